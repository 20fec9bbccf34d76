package repo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sandbot/sandbot/redact"
	"github.com/sandbot/sandbot/repo/github"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Error types of the repository activities, as temporal application
// errors: the workflow shows their messages in the thread.
const (
	ErrTypeNotAllowed = "RepoNotAllowed"
	ErrTypeClone      = "RepoClone"
	ErrTypePush       = "RepoPush"
	ErrTypeSecret     = "RepoSecret"
	ErrTypePR         = "RepoPullRequest"
	ErrTypeNoChanges  = "RepoNoChanges"
	ErrTypeSnapshot   = "RepoSnapshot"
	ErrTypeNoAuth     = "RepoNoCredentials"
)

// Config is the worker's side of the repository loop (config.Repos,
// resolved).
type Config struct {
	// Allow are session.RepoAllowed patterns; empty allows none.
	Allow []string
	// GitURL is the host whose URLs get the worker's credentials; any
	// other host is cloned anonymously, so a user cannot aim the token at
	// a server of their own.
	GitURL string
	// Depth is the default clone depth (0: full history).
	Depth      int
	Submodules bool
	MaxBytes   int64
	// Author is "Name <email>" for the commits /pr makes.
	Author string
}

// Activities clone, diff and push repositories for sessions, on the
// worker and outside every sandbox: the credentials (Tokens) live only
// here. Workspaces travel through the snapshot store, so these run on any
// worker of the session queue.
type Activities struct {
	Store  sandbox.SnapshotStore
	Git    Git
	Config Config
	// Tokens mints the token for git and GitHub calls; nil means the
	// worker has no credentials (public clones only, no /pr).
	Tokens github.TokenSource
	// GitHub opens pull requests (nil: no /pr).
	GitHub *github.Client
	// Redactor scrubs the worker's secrets from everything returned.
	Redactor *redact.Redactor
	// Known are the worker's secret values, for the push's secret scan.
	Known []string
	// TempDir holds clones and work trees while an activity runs ("":
	// the system's).
	TempDir string
	Logger  *slog.Logger
}

// CloneRequest asks for a session's repository.
type CloneRequest struct {
	SessionID string           `json:"session_id"`
	Repo      session.RepoSpec `json:"repo"`
	// Full fetches all history instead of the configured depth.
	Full bool `json:"full,omitempty"`
	// Key is where the clone's snapshot goes (sandbox.RepoBaseKey).
	Key string `json:"key"`
}

// CloneResult is the cloned repository.
type CloneResult struct {
	Repo  session.Repo `json:"repo"`
	Files int          `json:"files"`
	Bytes int64        `json:"bytes"`
}

// DiffRequest compares a session's workspace snapshot with its base.
type DiffRequest struct {
	Repo    session.Repo `json:"repo"`
	Current string       `json:"current"`
}

// PRRequest pushes a session's workspace and opens (or updates) its pull
// request.
type PRRequest struct {
	SessionID string       `json:"session_id"`
	Repo      session.Repo `json:"repo"`
	Current   string       `json:"current"`
	// Branch and Parent: where the commit goes and what it builds on (the
	// base commit, or the session's last pushed commit).
	Branch string `json:"branch"`
	Parent string `json:"parent"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	// CoAuthor is the user who asked, as a Co-authored-by trailer.
	CoAuthor session.User `json:"co_author"`
	Platform string       `json:"platform"`
}

func (a *Activities) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// userErr is an error the thread shows as is: retrying cannot help.
func (a *Activities) userErr(typ, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(a.Redactor.Redact(fmt.Sprintf(format, args...)), typ, nil)
}

// gitErr turns a git failure into words for the thread; network trouble
// stays retryable.
func (a *Activities) gitErr(typ, what string, err error) error {
	var ge *Error
	if errors.As(err, &ge) {
		msg := a.Redactor.Redact(ge.Msg)
		if ge.Kind == ErrTooBig {
			msg = strings.TrimRight(msg, ". ") + " (the limit is the worker's SANDBOT_REPOS_MAX_BYTES)"
		}
		if what != "" {
			msg = what + ": " + msg
		}
		if ge.Kind == ErrNetwork {
			return temporal.NewApplicationError(msg, typ)
		}
		return temporal.NewNonRetryableApplicationError(msg, typ+"."+string(ge.Kind), nil)
	}
	if what != "" {
		what += ": "
	}
	return temporal.NewApplicationError(a.Redactor.Redact(what+err.Error()), typ)
}

// auth returns the credentials for a git URL: the worker's token for its
// own git host over https (or http on loopback, for tests and local
// servers), anonymous for every other host.
func (a *Activities) auth(ctx context.Context, raw string) (Auth, error) {
	if a.Tokens == nil || !a.ownHost(raw) {
		return Auth{}, nil
	}
	tok, err := a.Tokens.Token(ctx)
	if err != nil {
		return Auth{}, temporal.NewApplicationError(a.Redactor.Redact("get a GitHub token: "+err.Error()), ErrTypeNoAuth)
	}
	return TokenAuth(tok), nil
}

func (a *Activities) ownHost(raw string) bool {
	u, err := url.Parse(raw)
	own, oerr := url.Parse(a.Config.GitURL)
	return err == nil && oerr == nil && u.Host != "" && u.Scheme == own.Scheme && strings.EqualFold(u.Host, own.Host)
}

func (a *Activities) tempDir(pattern string) (string, error) {
	return os.MkdirTemp(a.TempDir, pattern)
}

// checkURL refuses what the worker will not clone: repositories off the
// allowlist, ssh (the worker's credentials are HTTPS tokens) and plain
// http to any host but the configured one.
func (a *Activities) checkURL(raw string) error {
	if !session.RepoAllowed(a.Config.Allow, raw) {
		return a.userErr(ErrTypeNotAllowed, "%s", session.NotAllowedText(raw, a.Config.Allow))
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		return a.userErr(ErrTypeNotAllowed, "%s is not an https git URL; sandbot clones over https (write owner/name or https://host/owner/name.git)", session.RepoName(raw))
	case u.Scheme == "https":
	case u.Scheme == "http" && a.ownHost(raw):
	default:
		return a.userErr(ErrTypeNotAllowed, "%s: sandbot clones over https only (got %s); write owner/name or https://host/owner/name.git", session.RepoName(raw), u.Scheme)
	}
	return nil
}

// Clone clones the session's repository on the worker, with the worker's
// credentials, and stores the checkout as the snapshot req.Key; the
// session's sandbox then restores it like any workspace, on any backend.
// The checkout holds no credential: .git/config names the remote URL
// only.
func (a *Activities) Clone(ctx context.Context, req CloneRequest) (res CloneResult, err error) {
	if err := a.checkURL(req.Repo.URL); err != nil {
		return CloneResult{}, err
	}
	if err := sandbox.CheckKey(req.Key); err != nil {
		return CloneResult{}, a.userErr(ErrTypeClone, "clone: %v", err)
	}
	stop := sandbox.HeartbeatWhileRunning(ctx)
	defer stop()
	auth, err := a.auth(ctx, req.Repo.URL)
	if err != nil {
		return CloneResult{}, err
	}
	tmp, err := a.tempDir("sandbot-clone-")
	if err != nil {
		return CloneResult{}, fmt.Errorf("repo: clone: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "ws")
	depth := a.Config.Depth
	if req.Full {
		depth = 0
	}
	info, err := a.Git.Clone(ctx, dir, CloneOptions{
		URL: req.Repo.URL, Branch: req.Repo.Branch, Depth: depth,
		Submodules: a.Config.Submodules, MaxBytes: a.Config.MaxBytes, Auth: auth,
	})
	if err != nil {
		return CloneResult{}, a.gitErr(ErrTypeClone, "", err) // the workflow names the repository
	}
	files, size, err := sandbox.SnapshotDir(ctx, a.Store, dir, req.Key, 0)
	if err != nil {
		return CloneResult{}, temporal.NewApplicationError(a.Redactor.Redact("store the clone: "+err.Error()), ErrTypeSnapshot)
	}
	a.log().Info("cloned a repository", "session_id", req.SessionID, "repo", session.RepoName(req.Repo.URL), "commit", info.Commit, "files", files, "bytes", size)
	return CloneResult{
		Repo: session.Repo{
			URL: req.Repo.URL, Name: session.RepoName(req.Repo.URL), Branch: info.Branch,
			Commit: info.Commit, Base: req.Key, Shallow: info.Shallow,
		},
		Files: files, Bytes: size,
	}, nil
}

// inGit reports whether a workspace path is inside a .git directory (the
// agent's own repository metadata, which the worker never trusts, diffs
// or commits).
func inGit(p string) bool {
	return slices.Contains(strings.Split(p, "/"), ".git")
}

// changes lists the paths (outside .git) whose entries differ between two
// manifests, and the entries of each side keyed by path.
func changes(base, cur *sandbox.Manifest) (paths []string, old, now map[string]*sandbox.ManifestEntry) {
	old, now = index(base), index(cur)
	for p, e := range now {
		if o, ok := old[p]; !ok || !sameManifestEntry(o, e) {
			paths = append(paths, p)
		}
	}
	for p := range old {
		if _, ok := now[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths, old, now
}

func index(m *sandbox.Manifest) map[string]*sandbox.ManifestEntry {
	out := make(map[string]*sandbox.ManifestEntry, len(m.Entries))
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Type == sandbox.EntryDir || inGit(e.Path) || e.Path == "." || e.Path == "" {
			continue
		}
		out[e.Path] = e
	}
	return out
}

func sameManifestEntry(a, b *sandbox.ManifestEntry) bool {
	return a.Type == b.Type && a.Hash == b.Hash && a.Link == b.Link && a.Mode&0o111 == b.Mode&0o111
}

func (a *Activities) manifests(ctx context.Context, base, cur string) (*sandbox.Manifest, *sandbox.Manifest, error) {
	bm, err := sandbox.LoadManifest(ctx, a.Store, base)
	if err != nil {
		return nil, nil, a.userErr(ErrTypeSnapshot, "the snapshot of the freshly cloned repository cannot be read (%v); /diff and /pr need it", err)
	}
	if cur == "" || cur == base {
		return bm, bm, nil
	}
	cm, err := sandbox.LoadManifest(ctx, a.Store, cur)
	if err != nil {
		return nil, nil, a.userErr(ErrTypeSnapshot, "the workspace's last snapshot cannot be read: %v", err)
	}
	return bm, cm, nil
}

// keepPaths selects the entries at the given paths (plus the directories
// that hold them, which extraction creates anyway).
func keepPaths(paths []string) func(*sandbox.ManifestEntry) bool {
	set := make(map[string]bool, len(paths))
	for _, p := range paths {
		set[p] = true
	}
	return func(e *sandbox.ManifestEntry) bool { return set[e.Path] }
}

// Diff is the workspace's change since the clone: only the files that
// differ are read from the store, into two trees the git CLI compares
// (no repository involved, so nothing the agent put in .git can run).
func (a *Activities) Diff(ctx context.Context, req DiffRequest) (session.DiffResponse, error) {
	stop := sandbox.HeartbeatWhileRunning(ctx)
	defer stop()
	bm, cm, err := a.manifests(ctx, req.Repo.Base, req.Current)
	if err != nil {
		return session.DiffResponse{}, err
	}
	paths, _, _ := changes(bm, cm)
	res := session.DiffResponse{Repo: req.Repo}
	if len(paths) == 0 {
		return res, nil
	}
	tmp, err := a.tempDir("sandbot-diff-")
	if err != nil {
		return res, fmt.Errorf("repo: diff: %w", err)
	}
	defer os.RemoveAll(tmp)
	oldDir, newDir := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	for _, d := range []string{oldDir, newDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return res, fmt.Errorf("repo: diff: %w", err)
		}
	}
	keep := keepPaths(paths)
	if err := sandbox.ExtractManifest(ctx, a.Store, bm, oldDir, keep); err != nil {
		return res, a.userErr(ErrTypeSnapshot, "read the base files: %v", err)
	}
	if err := sandbox.ExtractManifest(ctx, a.Store, cm, newDir, keep); err != nil {
		return res, a.userErr(ErrTypeSnapshot, "read the workspace's files: %v", err)
	}
	d, err := a.Git.DiffDirs(ctx, oldDir, newDir, session.MaxPatchBytes)
	if err != nil {
		return res, a.gitErr(ErrTypeClone, "diff", err)
	}
	for _, f := range d.Files {
		res.Files = append(res.Files, session.DiffFile{Path: f.Path, Status: f.Status, Added: f.Added, Deleted: f.Deleted, Binary: f.Binary})
	}
	res.Added, res.Deleted = d.Added, d.Deleted
	res.Patch, res.Truncated = a.Redactor.Redact(d.Patch), d.Truncated
	return res, nil
}

// OpenPR commits the workspace (outside .git) on the session's branch,
// pushes it with the worker's token and opens or updates the pull
// request. It refuses, pushing nothing, when a changed file holds one of
// the worker's secrets or a common secret pattern.
func (a *Activities) OpenPR(ctx context.Context, req PRRequest) (session.OpenPRResponse, error) {
	if a.Tokens == nil || a.GitHub == nil {
		return session.OpenPRResponse{}, a.userErr(ErrTypeNoAuth, "this deployment has no GitHub credentials: an operator sets SANDBOT_GITHUB_TOKEN (or a GitHub App) on the worker to let /pr push and open pull requests")
	}
	if err := a.checkURL(req.Repo.URL); err != nil {
		return session.OpenPRResponse{}, err
	}
	if !a.ownHost(req.Repo.URL) {
		return session.OpenPRResponse{}, a.userErr(ErrTypeNoAuth, "%s is not on %s, the git host this worker holds credentials for; /pr can only push there", req.Repo.Name, a.Config.GitURL)
	}
	stop := sandbox.HeartbeatWhileRunning(ctx)
	defer stop()
	bm, cm, err := a.manifests(ctx, req.Repo.Base, req.Current)
	if err != nil {
		return session.OpenPRResponse{}, err
	}
	paths, _, now := changes(bm, cm)
	if len(paths) == 0 && req.Repo.PR == nil {
		return session.OpenPRResponse{}, a.userErr(ErrTypeNoChanges, "nothing to push: the workspace matches %s at %s", req.Repo.Name, short(req.Repo.Commit))
	}
	tmp, err := a.tempDir("sandbot-pr-")
	if err != nil {
		return session.OpenPRResponse{}, fmt.Errorf("repo: pr: %w", err)
	}
	defer os.RemoveAll(tmp)
	work := filepath.Join(tmp, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return session.OpenPRResponse{}, fmt.Errorf("repo: pr: %w", err)
	}
	if err := sandbox.ExtractManifest(ctx, a.Store, cm, work, func(e *sandbox.ManifestEntry) bool { return !inGit(e.Path) }); err != nil {
		return session.OpenPRResponse{}, a.userErr(ErrTypeSnapshot, "read the workspace's files: %v", err)
	}
	var scan []string
	for _, p := range paths {
		if e, ok := now[p]; ok && e.Type == sandbox.EntryFile {
			scan = append(scan, p)
		}
	}
	findings, err := ScanSecrets(work, scan, a.Known)
	if err != nil {
		return session.OpenPRResponse{}, fmt.Errorf("repo: pr: secret scan: %w", err)
	}
	if len(findings) > 0 {
		var list []string
		for _, f := range findings {
			list = append(list, f.String())
		}
		return session.OpenPRResponse{}, a.userErr(ErrTypeSecret, "refused to push: %s what looks like a secret (%s). Nothing was pushed; remove it from the workspace and ask again",
			plural(len(findings), "a changed file holds", "changed files hold"), strings.Join(list, "; "))
	}
	auth, err := a.auth(ctx, req.Repo.URL)
	if err != nil {
		return session.OpenPRResponse{}, err
	}
	author, err := mail.ParseAddress(a.Config.Author)
	if err != nil {
		return session.OpenPRResponse{}, a.userErr(ErrTypePush, "the commit author %q is not Name <email> (SANDBOT_GIT_AUTHOR)", a.Config.Author)
	}
	sig := Signature{Name: author.Name, Email: author.Address, When: time.Now()}
	msg := req.Title + "\n\n" + fmt.Sprintf("Co-authored-by: %s <%s>\n", coName(req.CoAuthor), coEmail(req.Platform, req.CoAuthor))
	pushed, err := a.Git.CommitAndPush(ctx, filepath.Join(tmp, "git"), CommitOptions{
		URL: req.Repo.URL, Auth: auth, Parent: req.Parent, WorkTree: work, Branch: req.Branch,
		Message: msg, Author: sig, Committer: sig,
	})
	if err != nil {
		return session.OpenPRResponse{}, a.gitErr(ErrTypePush, "could not push to "+req.Branch, err)
	}
	head := pushed.Commit
	if !pushed.Changed {
		head = req.Parent
		if req.Repo.PR == nil {
			return session.OpenPRResponse{}, a.userErr(ErrTypeNoChanges, "nothing to push: the workspace matches %s at %s", req.Repo.Name, short(req.Parent))
		}
	}
	owner, name, _ := strings.Cut(req.Repo.Name, "/")
	pr, created, err := a.GitHub.OpenOrUpdate(ctx, owner, name, github.NewPullRequest{Title: req.Title, Head: req.Branch, Base: req.Repo.Branch, Body: a.Redactor.Redact(req.Body)})
	if err != nil {
		return session.OpenPRResponse{}, a.userErr(ErrTypePR, "pushed %s to %s, but could not open the pull request: %v", short(head), req.Branch, err)
	}
	a.log().Info("pushed a session's changes", "session_id", req.SessionID, "repo", req.Repo.Name, "branch", req.Branch, "commit", head, "pr", pr.Number, "created", created)
	return session.OpenPRResponse{
		PR:      session.PullRequest{Number: pr.Number, URL: pr.URL, Branch: req.Branch, Head: head},
		Created: created, Changed: pushed.Changed, Files: len(paths),
	}, nil
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func coName(u session.User) string {
	if u.Name != "" {
		return strings.Map(func(r rune) rune {
			if r == '<' || r == '>' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, u.Name)
	}
	return u.ID
}

// coEmail is a stable, non-deliverable address for a chat user: sandbot
// knows their chat ID, not their email.
func coEmail(platform string, u session.User) string {
	id := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '-'
	}, u.ID)
	if platform == "" {
		platform = "chat"
	}
	return id + "@" + platform + ".sandbot.invalid"
}
