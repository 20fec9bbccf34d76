package repo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Signature is a commit's author or committer.
type Signature struct {
	Name, Email string
	// When is the time of the signature; the zero time is now.
	When time.Time
}

// CommitOptions says what CommitAndPush commits and where it goes.
type CommitOptions struct {
	// URL and Auth are the remote, as for Clone.
	URL  string
	Auth Auth
	// Parent is the commit the new one goes on: the session's base
	// commit, or the last commit this session pushed to Branch.
	Parent string
	// WorkTree holds the untrusted files to commit; any .git in it is
	// ignored.
	WorkTree string
	// Branch is pushed to refs/heads/<Branch>, never forced.
	Branch  string
	Message string
	// Author signs the commit; a zero Committer is the Author. An empty
	// Name is the Email (git refuses an empty name).
	Author, Committer Signature
}

// PushResult is what CommitAndPush did.
type PushResult struct {
	// Commit is the commit pushed, or Parent when nothing changed.
	Commit string
	// Changed is false when the work tree's tree equals Parent's: no
	// commit was made and nothing was pushed.
	Changed bool
	// Files counts the paths that differ from Parent.
	Files int
}

// commitID matches a full SHA-1 or SHA-256 object name: the parent must be
// exact, a branch name or an abbreviation could resolve to something else.
var commitID = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)

// CommitAndPush makes a commit of WorkTree on Parent in a fresh trusted
// repository under tmp (created if missing) and pushes it. It:
//
//   - runs git init (bare: the repository has no work tree of its own);
//   - fetches Parent by its id, depth 1, with Auth;
//   - builds the index (GIT_INDEX_FILE in the scratch directory) from
//     Parent's tree with read-tree, so files that are tracked but ignored
//     stay, then runs add -A with WorkTree as the work tree;
//   - resets every submodule entry (gitlink) to what Parent has, since the
//     commit a gitlink records would come from a .git inside WorkTree;
//   - write-tree, and when the tree is Parent's, stops (Changed false);
//   - commit-tree with the signatures in the environment and the message
//     on stdin;
//   - pushes <commit>:refs/heads/<Branch> without force.
//
// WorkTree is only ever read as files. The repository is named with
// --git-dir, so git never looks for one in WorkTree: its .git (config with
// core.fsmonitor or core.hooksPath, hooks, a gitdir: file) is never read,
// and git itself never adds an entry named .git. A subdirectory that is a
// repository of its own (it has a .git, or a gitdir: file) is left out, as
// git add leaves out the content of an embedded repository; only a
// submodule Parent already has stays, at Parent's commit. Symlinks are
// committed as symlinks. .gitattributes in WorkTree still applies as it would for any
// git add (eol and encoding conversion), but no filter or diff driver is
// configured, so none runs.
func (g Git) CommitAndPush(ctx context.Context, tmp string, o CommitOptions) (PushResult, error) {
	if err := checkURL(o.URL); err != nil {
		return PushResult{}, err
	}
	if !commitID.MatchString(o.Parent) {
		return PushResult{}, fmt.Errorf("repo: commit: parent %q is not a full commit id", o.Parent)
	}
	if o.Branch == "" || strings.HasPrefix(o.Branch, "-") {
		return PushResult{}, fmt.Errorf("repo: commit: invalid branch name %q", o.Branch)
	}
	if fi, err := os.Stat(o.WorkTree); err != nil || !fi.IsDir() {
		return PushResult{}, fmt.Errorf("repo: commit: work tree %q is not a directory", o.WorkTree)
	}
	author, err := identity("author", o.Author)
	if err != nil {
		return PushResult{}, err
	}
	c := o.Committer
	if c.Name == "" && c.Email == "" {
		c = o.Author
	}
	committer, err := identity("committer", c)
	if err != nil {
		return PushResult{}, err
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return PushResult{}, fmt.Errorf("repo: commit: %w", err)
	}
	s, err := g.newRunner(tmp, o.URL, o.Auth)
	if err != nil {
		return PushResult{}, err
	}
	defer s.close()
	return s.commitAndPush(ctx, o, append(author, committer...))
}

func (s *runner) commitAndPush(ctx context.Context, o CommitOptions, sigEnv []string) (PushResult, error) {
	gitDir := filepath.Join(s.base, "repo.git")
	gd := "--git-dir=" + gitDir
	index := []string{"GIT_INDEX_FILE=" + filepath.Join(s.base, "index")}
	t := target{op: "commit", url: o.URL, branch: o.Branch, commit: o.Parent}
	run := func(c call) (string, error) {
		out, err := s.run(ctx, c)
		return strings.TrimSpace(string(out)), err
	}

	if _, err := run(call{args: []string{"check-ref-format", "refs/heads/" + o.Branch}, t: t}); err != nil {
		return PushResult{}, fmt.Errorf("repo: commit: invalid branch name %q", o.Branch)
	}
	if _, err := run(call{args: []string{"init", "--quiet", "--bare", "--initial-branch=sandbot", gitDir}, t: t}); err != nil {
		return PushResult{}, err
	}
	t.op = "fetch"
	if _, err := run(call{args: []string{gd, "fetch", "--quiet", "--no-tags", "--depth=1", "--", o.URL, o.Parent}, t: t}); err != nil {
		return PushResult{}, err
	}
	t.op = "commit"
	parentTree, err := run(call{args: []string{gd, "rev-parse", "--verify", o.Parent + "^{tree}"}, t: t})
	if err != nil {
		return PushResult{}, err
	}
	if _, err := run(call{args: []string{gd, "read-tree", o.Parent}, env: index, t: t}); err != nil {
		return PushResult{}, err
	}
	if _, err := run(call{args: []string{gd, "--work-tree=" + o.WorkTree, "add", "--all", "--no-warn-embedded-repo"}, env: index, t: t}); err != nil {
		return PushResult{}, err
	}
	if err := s.resetGitlinks(ctx, gd, o.Parent, index, t); err != nil {
		return PushResult{}, err
	}
	tree, err := run(call{args: []string{gd, "write-tree"}, env: index, t: t})
	if err != nil {
		return PushResult{}, err
	}
	if tree == parentTree {
		return PushResult{Commit: o.Parent}, nil
	}
	names, err := s.run(ctx, call{args: []string{gd, "diff-tree", "-r", "-z", "--no-renames", "--name-only", parentTree, tree}, t: t})
	if err != nil {
		return PushResult{}, err
	}
	files := bytes.Count(names, []byte{0})
	commit, err := run(call{
		args:  []string{gd, "commit-tree", tree, "-p", o.Parent, "-F", "-"},
		env:   sigEnv,
		stdin: strings.NewReader(o.Message),
		t:     t,
	})
	if err != nil {
		return PushResult{}, err
	}
	t.op = "push"
	if _, err := run(call{args: []string{gd, "push", "--quiet", "--no-verify", "--no-recurse-submodules", "--", o.URL, commit + ":refs/heads/" + o.Branch}, t: t}); err != nil {
		return PushResult{}, err
	}
	return PushResult{Commit: commit, Changed: true, Files: files}, nil
}

// resetGitlinks makes every gitlink in the index what Parent has at that
// path, dropping those Parent does not have. add -A records a
// subdirectory holding a repository as a gitlink to that repository's
// HEAD, read from a .git inside the untrusted tree (which may even point
// elsewhere on the worker with a gitdir: file); submodule pointers are
// therefore only ever the ones already in Parent.
func (s *runner) resetGitlinks(ctx context.Context, gd, parent string, index []string, t target) error {
	staged, err := s.run(ctx, call{args: []string{gd, "ls-files", "--stage", "-z"}, env: index, t: t})
	if err != nil {
		return err
	}
	now := gitlinks(staged, true)
	if len(now) == 0 {
		return nil
	}
	tree, err := s.run(ctx, call{args: []string{gd, "ls-tree", "-r", "-z", "--full-tree", parent}, t: t})
	if err != nil {
		return err
	}
	was := gitlinks(tree, false)
	var info strings.Builder
	for p, id := range now {
		switch old, ok := was[p]; {
		case !ok:
			fmt.Fprintf(&info, "0 %s\t%s\x00", strings.Repeat("0", len(id)), p)
		case old != id:
			fmt.Fprintf(&info, "160000 %s\t%s\x00", old, p)
		}
	}
	if info.Len() == 0 {
		return nil
	}
	_, err = s.run(ctx, call{args: []string{gd, "update-index", "-z", "--index-info"}, env: index, stdin: strings.NewReader(info.String()), t: t})
	return err
}

// gitlinks picks the gitlink entries (mode 160000) of ls-files --stage -z
// ("mode id stage\tpath") or ls-tree -z ("mode type id\tpath") output.
func gitlinks(out []byte, stage bool) map[string]string {
	links := map[string]string{}
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || f[0] != "160000" {
			continue
		}
		id := f[2]
		if stage {
			id = f[1]
		}
		links[path] = id
	}
	return links
}

// identity is the environment that signs a commit as role, checked so git
// cannot fail later for a reason the caller could have been told now.
func identity(role string, sig Signature) ([]string, error) {
	name := strings.TrimSpace(sig.Name)
	if name == "" {
		name = sig.Email
	}
	for _, v := range []string{name, sig.Email} {
		if strings.ContainsAny(v, "<>\n\r\x00") {
			return nil, fmt.Errorf("repo: commit: %s %q <%s>: a name or email may not hold <, > or a line break", role, name, sig.Email)
		}
	}
	if name == "" || sig.Email == "" {
		return nil, fmt.Errorf("repo: commit: the %s needs a name and an email", role)
	}
	prefix := "GIT_" + strings.ToUpper(role) + "_"
	env := []string{prefix + "NAME=" + name, prefix + "EMAIL=" + sig.Email}
	if !sig.When.IsZero() {
		env = append(env, prefix+"DATE="+fmt.Sprintf("@%d %s", sig.When.Unix(), sig.When.Format("-0700")))
	}
	return env, nil
}
