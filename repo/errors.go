package repo

import (
	"fmt"
	"strings"
)

// ErrKind says what went wrong with a repository operation, in terms the
// caller can act on: ask the user to reconnect (ErrAuth), to fix a name
// (ErrNotFound, ErrBranchNotFound, ErrBadURL), to pick another branch
// (ErrProtected, ErrNonFastForward, ErrRejected), to wait (ErrNetwork), or
// none of these (ErrGit).
type ErrKind string

// The kinds of *Error. The values are stable: they may be stored in
// workflow state and matched by later versions.
const (
	// ErrAuth: the server refused the credentials, or there were none
	// and it wanted some.
	ErrAuth ErrKind = "auth"
	// ErrNotFound: the repository (or the commit asked for) does not
	// exist, or the credentials cannot see it. GitHub answers 404 rather
	// than 403 for a private repository the token has no access to.
	ErrNotFound ErrKind = "not_found"
	// ErrBranchNotFound: the repository exists but the branch does not.
	ErrBranchNotFound ErrKind = "branch_not_found"
	// ErrTooBig: the checkout is larger than the cap it was given.
	ErrTooBig ErrKind = "too_big"
	// ErrBadURL: the URL is malformed, of a scheme that is not served, or
	// holds credentials.
	ErrBadURL ErrKind = "bad_url"
	// ErrProtected: a branch protection rule or a server-side hook refused
	// the push.
	ErrProtected ErrKind = "protected"
	// ErrNonFastForward: the branch moved on the server since the parent
	// commit was read; the push would have dropped someone else's work.
	ErrNonFastForward ErrKind = "non_fast_forward"
	// ErrRejected: the server refused the push for another reason.
	ErrRejected ErrKind = "rejected"
	// ErrNetwork: the server could not be reached.
	ErrNetwork ErrKind = "network"
	// ErrGit: any other git failure.
	ErrGit ErrKind = "git"
)

// Error is a failed repository operation. Msg is written for the person in
// the chat; Detail is for logs. Neither ever holds a credential: Detail is
// git's stderr with the Auth header and token scrubbed, and Msg is built
// only from scrubbed text and credential-free URLs.
type Error struct {
	Kind ErrKind
	// Msg is a sentence for a chat user: what went wrong and what to do.
	Msg string
	// Detail is git's stderr, trimmed, with the auth header and token
	// scrubbed.
	Detail string

	// err is the underlying failure (an *exec.ExitError), kept so
	// errors.As can reach it.
	err error
}

func (e *Error) Error() string {
	s := "repo: " + string(e.Kind) + ": " + e.Msg
	if d := oneLine(e.Detail); d != "" {
		s += " (git: " + d + ")"
	}
	return s
}

// Unwrap returns the failure the error was classified from, if any.
func (e *Error) Unwrap() error { return e.err }

// maxDetail bounds Detail: git's stderr is short when it fails for a
// reason worth reporting, and a runaway one must not bloat workflow state.
const maxDetail = 4 << 10

// target is what a failed git call was doing, so its message can name it.
type target struct {
	op     string // "clone", "fetch", "push", ...
	url    string // credential-free
	branch string
	commit string
}

// classify turns the scrubbed stderr of a failed git call into an *Error.
// The order of the checks matters: a push refused by a protected branch
// also says "[remote rejected]", and a missing branch also says "not
// found".
func classify(t target, stderr string, err error) *Error {
	detail := strings.TrimSpace(stderr)
	if len(detail) > maxDetail {
		detail = "…" + detail[len(detail)-maxDetail:]
	}
	e := &Error{Kind: ErrGit, Detail: detail, err: err}
	low := strings.ToLower(stderr)
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(low, s) {
				return true
			}
		}
		return false
	}
	where := t.url
	if where == "" {
		where = "the repository"
	}
	switch {
	case has("protected branch", "pre-receive hook declined", "gh006"):
		e.Kind = ErrProtected
		e.Msg = fmt.Sprintf("The server refused the push to branch %q: it is protected or a server-side hook declined it.", t.branch)
		if r := remoteLines(stderr); r != "" {
			e.Msg += " The server said: " + r
		}
		e.Msg += " Push to another branch and open a pull request instead."
	case has("[rejected]") && has("non-fast-forward", "fetch first"):
		e.Kind = ErrNonFastForward
		e.Msg = fmt.Sprintf("The branch %q changed on the server since this session last saw it (someone else pushed to it), so pushing would drop their work. Push to a new branch, or start again from the branch's current state.", t.branch)
	case has("[remote rejected]", "[rejected]"):
		e.Kind = ErrRejected
		e.Msg = fmt.Sprintf("The server rejected the push to branch %q", t.branch)
		if why := rejectReason(stderr); why != "" {
			e.Msg += " (" + why + ")"
		}
		e.Msg += "."
		if r := remoteLines(stderr); r != "" {
			e.Msg += " The server said: " + r
		}
	case has("remote branch ") && has(" not found"):
		e.Kind = ErrBranchNotFound
		e.Msg = fmt.Sprintf("The branch %q does not exist in %s: check its name, or leave it out to use the default branch.", t.branch, where)
	case has("not our ref", "couldn't find remote ref"):
		e.Kind = ErrNotFound
		e.Msg = fmt.Sprintf("The commit %s is not in %s any more (the branch may have been rewritten): start again from the branch's current state.", t.commit, where)
	case has("authentication failed", "could not read username", "could not read password",
		"returned error: 401", "returned error: 403", "invalid username or password",
		"permission denied (publickey", "terminal prompts disabled"):
		e.Kind = ErrAuth
		e.Msg = fmt.Sprintf("The git server refused the credentials for %s: the token is missing, expired or has no access to this repository. Check that the app is installed on it with access to its contents.", where)
	case has("could not resolve host", "could not resolve proxy", "connection refused", "timed out",
		"failed to connect", "network is unreachable", "connection reset", "no route to host"):
		e.Kind = ErrNetwork
		e.Msg = fmt.Sprintf("Could not reach the git server for %s. Try again in a moment.", where)
	case has("repository not found", "does not appear to be a git repository", "returned error: 404", "not found"):
		e.Kind = ErrNotFound
		e.Msg = fmt.Sprintf("The repository %s was not found, or the credentials cannot see it: check the URL and that the app has access to it.", where)
	default:
		e.Msg = fmt.Sprintf("git %s failed", t.op)
		if l := lastLine(detail); l != "" {
			e.Msg += ": " + l
		}
		e.Msg += "."
	}
	return e
}

// remoteLines joins what the server printed ("remote: ..." lines), which
// is where GitHub explains a protection rule.
func remoteLines(stderr string) string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		rest, ok := strings.CutPrefix(l, "remote:")
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		rest = strings.TrimPrefix(rest, "error: ")
		if rest != "" {
			out = append(out, rest)
		}
	}
	return strings.Join(out, " ")
}

// rejectReason is the parenthesised reason of the first rejected ref in a
// push's status table: " ! [remote rejected] x -> y (reason)".
func rejectReason(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.Contains(l, "rejected]") {
			continue
		}
		i, j := strings.LastIndex(l, "("), strings.LastIndex(l, ")")
		if i >= 0 && j > i {
			return l[i+1 : j]
		}
	}
	return ""
}

// lastLine is the last line of s that says something: git ends with the
// "fatal:" line that names the failure, after any hints.
func lastLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "hint:") {
			return l
		}
	}
	return ""
}

// oneLine folds a multi-line detail into one line for Error, dropping
// git's hints, which only repeat advice meant for a terminal.
func oneLine(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "hint:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}
