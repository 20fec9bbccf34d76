package session

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Repository updates: /repo, /diff and /pr.
const (
	UpdateSetRepo = "set_repo"
	UpdateDiff    = "diff"
	UpdateOpenPR  = "open_pr"
)

// RepoSpec names a repository a session starts from: where the worker
// clones it from, and which branch ("" for the remote's default).
type RepoSpec struct {
	URL    string `json:"url"`
	Branch string `json:"branch,omitempty"`
}

// repoName is GitHub's owner/name shape: what a mention may name without a
// URL.
var repoName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$`)

// branchName is what a branch in a spec may be: git's ref rules, kept
// strict (no spaces, no "..", no leading "-"), so a spec can never smuggle
// an option into a git command.
var branchName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./-]*$`)

// ParseRepoSpec reads a repository as a user writes it: "owner/name",
// "owner/name@branch", or a full https://, http:// or ssh git URL
// (optionally with "@branch" after ".git", or "#branch"). host is the web
// address short names are resolved against, such as "https://github.com".
func ParseRepoSpec(s, host string) (RepoSpec, error) {
	s = strings.TrimSpace(s)
	s = strings.Trim(s, "<>") // Slack wraps links in <...>
	if i := strings.IndexByte(s, '|'); i >= 0 {
		s = s[:i] // Slack's <url|label>
	}
	var spec RepoSpec
	if i := strings.LastIndex(s, "#"); i >= 0 {
		s, spec.Branch = s[:i], s[i+1:]
	}
	switch {
	case strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "ssh://"):
		if i := strings.LastIndex(s, ".git@"); i >= 0 && spec.Branch == "" {
			s, spec.Branch = s[:i+4], s[i+5:]
		}
		u, err := url.Parse(s)
		if err != nil || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return RepoSpec{}, fmt.Errorf("%q is not a repository URL; write owner/name, owner/name@branch or a full https:// git URL", s)
		}
		if u.User != nil && u.Scheme != "ssh" {
			return RepoSpec{}, fmt.Errorf("the repository URL carries credentials; give it without them (the worker uses its own)")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return RepoSpec{}, fmt.Errorf("%q has a query or fragment; give the plain repository URL", s)
		}
		spec.URL = u.String()
	case strings.HasPrefix(s, "git@") && strings.Contains(s, ":"):
		if i := strings.LastIndex(s, ".git@"); i >= 0 && spec.Branch == "" {
			s, spec.Branch = s[:i+4], s[i+5:]
		}
		spec.URL = s
	default:
		name := s
		if i := strings.IndexByte(s, '@'); i >= 0 && spec.Branch == "" {
			name, spec.Branch = s[:i], s[i+1:]
		}
		name = strings.TrimSuffix(name, ".git")
		if !repoName.MatchString(name) || strings.Contains(name, "..") {
			return RepoSpec{}, fmt.Errorf("%q is not a repository; write owner/name, owner/name@branch or a full https:// git URL", s)
		}
		spec.URL = strings.TrimRight(host, "/") + "/" + name + ".git"
	}
	if spec.Branch != "" && (!branchName.MatchString(spec.Branch) || strings.Contains(spec.Branch, "..") || strings.HasSuffix(spec.Branch, ".lock")) {
		return RepoSpec{}, fmt.Errorf("%q is not a branch name git accepts; use letters, digits and . _ / -", spec.Branch)
	}
	return spec, nil
}

// Name is the repository's owner/name (the last two parts of its path,
// without ".git"), the form allowlists, branches and messages use.
func (r RepoSpec) Name() string { return RepoName(r.URL) }

// RepoName is the owner/name of a repository URL.
func RepoName(raw string) string {
	p := raw
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		p = u.Path
	} else if i := strings.IndexByte(raw, ':'); i >= 0 && strings.HasPrefix(raw, "git@") {
		p = raw[i+1:]
	}
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	parts := strings.Split(p, "/")
	if len(parts) >= 2 {
		return parts[len(parts)-2] + "/" + parts[len(parts)-1]
	}
	return p
}

// RepoHost is the host of a repository URL ("github.com"), "" when it has
// none.
func RepoHost(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Hostname()
	}
	if rest, ok := strings.CutPrefix(raw, "git@"); ok {
		if i := strings.IndexByte(rest, ':'); i >= 0 {
			return rest[:i]
		}
	}
	return ""
}

// RepoAllowed reports whether a repository URL matches one of the
// allowlist's patterns. A pattern is "owner/name" or "host/owner/name",
// where each part may use path.Match wildcards ("acme/*",
// "github.com/acme/widgets"); "*" alone allows every repository. An empty
// list allows none: a worker clones nothing it was not told to.
func RepoAllowed(patterns []string, raw string) bool {
	name := RepoName(raw)
	full := RepoHost(raw) + "/" + name
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "*" {
			return true
		}
		target := name
		if strings.Count(p, "/") >= 2 {
			target = full
		}
		if ok, err := path.Match(p, target); err == nil && ok {
			return true
		}
	}
	return false
}

// NotAllowedText is the refusal of a repository off the allowlist, the
// same from the bot (which refuses early) and the worker (which enforces).
func NotAllowedText(raw string, patterns []string) string {
	allowed := "none: SANDBOT_REPOS_ALLOW is empty"
	if len(patterns) > 0 {
		allowed = strings.Join(patterns, ", ")
	}
	return fmt.Sprintf("%s is not on this deployment's repository allowlist (allowed: %s); an operator can add it to SANDBOT_REPOS_ALLOW.", RepoName(raw), allowed)
}

// Repo is a session's repository as /status shows it: where it came from,
// the commit it started at, and the pull request the session opened.
type Repo struct {
	URL    string `json:"url"`
	Name   string `json:"name"`
	Branch string `json:"branch"`
	// Commit is the base commit the workspace was cloned at; /diff and
	// /pr compare against it.
	Commit string `json:"commit"`
	// Base is the snapshot of the fresh clone, kept for the session's
	// life: the other side of every /diff.
	Base string `json:"base"`
	// Shallow is true when the clone holds only the latest commit.
	Shallow bool `json:"shallow,omitempty"`
	// PR is the pull request this session opened, if any.
	PR *PullRequest `json:"pr,omitempty"`
}

// PullRequest is the pull request a session pushed its changes to.
type PullRequest struct {
	Number int    `json:"number"`
	URL    string `json:"url"`
	// Branch is the session's branch on the remote; Head is the last
	// commit the session pushed to it, on which the next /pr builds.
	Branch string `json:"branch"`
	Head   string `json:"head"`
}

// SetRepoRequest is the input of UpdateSetRepo (/repo URL [branch]).
type SetRepoRequest struct {
	Repo RepoSpec `json:"repo"`
	// Full clones the whole history instead of the configured depth.
	Full bool `json:"full,omitempty"`
	User User `json:"user"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// SetRepoResponse says what was cloned.
type SetRepoResponse struct {
	Repo  Repo  `json:"repo"`
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// DiffRequest is the input of UpdateDiff.
type DiffRequest struct {
	User User `json:"user"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// DiffFile is one file of a diff.
type DiffFile struct {
	Path string `json:"path"`
	// Status is "added", "modified" or "deleted".
	Status  string `json:"status"`
	Added   int    `json:"added"`
	Deleted int    `json:"deleted"`
	Binary  bool   `json:"binary,omitempty"`
}

// MaxPatchBytes caps the patch /diff returns: it travels in an update's
// result (recorded in history) and into a chat file.
const MaxPatchBytes = 512 << 10

// DiffResponse is the workspace's diff against the session's base commit,
// as of the end of turn AsOfTurn (the last snapshot).
type DiffResponse struct {
	Repo     Repo       `json:"repo"`
	AsOfTurn int        `json:"as_of_turn"`
	Files    []DiffFile `json:"files,omitempty"`
	Added    int        `json:"added"`
	Deleted  int        `json:"deleted"`
	// Patch is the git patch (binary-safe), cut at a file boundary when
	// it passed MaxPatchBytes (Truncated).
	Patch     string `json:"patch,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// OpenPRRequest is the input of UpdateOpenPR (/pr [title]).
type OpenPRRequest struct {
	Title string `json:"title,omitempty"`
	// ThreadURL links the pull request back to the chat thread.
	ThreadURL string `json:"thread_url,omitempty"`
	User      User   `json:"user"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// OpenPRResponse says what /pr did.
type OpenPRResponse struct {
	PR PullRequest `json:"pr"`
	// Created is false when an open pull request was updated.
	Created bool `json:"created"`
	// Changed is false when the workspace had nothing new to push.
	Changed bool `json:"changed"`
	Files   int  `json:"files"`
}

// SessionBranch is the branch a session pushes its n-th pull request to:
// "sandbot/<8 hex digits of the session's ID hash>-<n>", so forks (other
// IDs) never push to each other's branches.
func SessionBranch(workflowID string, n int) string {
	var h uint32 = 2166136261 // FNV-1a: short, stable, no import
	for i := 0; i < len(workflowID); i++ {
		h ^= uint32(workflowID[i])
		h *= 16777619
	}
	return fmt.Sprintf("sandbot/%08x-%s", h, strconv.Itoa(n))
}

func (r *SetRepoRequest) auth() *Signature { return &r.Auth }
func (r *SetRepoRequest) signedFields() []string {
	return append([]string{r.Repo.URL, r.Repo.Branch, strconv.FormatBool(r.Full)}, userFields(r.User)...)
}
func (r *DiffRequest) auth() *Signature       { return &r.Auth }
func (r *DiffRequest) signedFields() []string { return userFields(r.User) }
func (r *OpenPRRequest) auth() *Signature     { return &r.Auth }
func (r *OpenPRRequest) signedFields() []string {
	return append([]string{r.Title, r.ThreadURL}, userFields(r.User)...)
}

// FormatBytes writes a size for people in binary units ("1.5 MiB",
// "200 MiB"): one definition for the worker's messages and the bot's.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	s := strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/float64(div)), ".0")
	return s + " " + "KMGTPE"[exp:exp+1] + "iB"
}
