package repo

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	tg := target{op: "push", url: "https://github.com/o/r.git", branch: "bot/x", commit: "abc"}
	cases := []struct {
		stderr string
		kind   ErrKind
		msgHas string
	}{
		{"fatal: could not read Username for 'https://github.com': terminal prompts disabled", ErrAuth, "credentials"},
		{"remote: Invalid username or password.\nfatal: Authentication failed for 'https://github.com/o/r.git/'", ErrAuth, "token"},
		{"fatal: unable to access 'https://github.com/o/r.git/': The requested URL returned error: 403", ErrAuth, "access"},
		{"remote: Repository not found.\nfatal: repository 'https://github.com/o/r.git/' not found", ErrNotFound, "not found"},
		{"fatal: '/srv/x.git' does not appear to be a git repository\nfatal: Could not read from remote repository.", ErrNotFound, "not found"},
		{"fatal: unable to access 'https://h/r.git/': The requested URL returned error: 404", ErrNotFound, "not found"},
		{"warning: Could not find remote branch nope to clone.\nfatal: Remote branch nope not found in upstream origin", ErrBranchNotFound, `"bot/x"`},
		{"To https://github.com/o/r.git\n ! [rejected]        abc -> bot/x (fetch first)\nerror: failed to push some refs", ErrNonFastForward, "someone else"},
		{" ! [rejected]        abc -> bot/x (non-fast-forward)", ErrNonFastForward, "someone else"},
		{"remote: error: GH006: Protected branch update failed for refs/heads/bot/x.\nremote: error: Changes must be made through a pull request.\nTo https://github.com/o/r.git\n ! [remote rejected] abc -> bot/x (protected branch hook declined)", ErrProtected, "Changes must be made through a pull request."},
		{"remote: no pushes on Fridays\n ! [remote rejected] abc -> bot/x (pre-receive hook declined)", ErrProtected, "no pushes on Fridays"},
		{" ! [remote rejected] abc -> bot/x (shallow update not allowed)", ErrRejected, "shallow update not allowed"},
		{"fatal: unable to access 'https://github.com/o/r.git/': Could not resolve host: github.com", ErrNetwork, "reach"},
		{"fatal: unable to access 'https://h/': Failed to connect to h port 443 after 2 ms: Connection refused", ErrNetwork, "reach"},
		{"fatal: unable to access 'https://h/': Operation timed out after 300000 milliseconds", ErrNetwork, "reach"},
		{"fatal: remote error: upload-pack: not our ref abc", ErrNotFound, "commit abc"},
		{"fatal: something odd\nhint: try harder", ErrGit, "fatal: something odd"},
	}
	for _, c := range cases {
		e := classify(tg, c.stderr, nil)
		if e.Kind != c.kind || !strings.Contains(e.Msg, c.msgHas) {
			t.Errorf("classify(%q) = %s %q, want %s containing %q", c.stderr, e.Kind, e.Msg, c.kind, c.msgHas)
		}
		if strings.TrimSpace(c.stderr) != e.Detail {
			t.Errorf("Detail = %q, want the trimmed stderr", e.Detail)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	cause := &exec.ExitError{}
	e := classify(target{op: "clone", url: "https://h/r.git", branch: "dev"}, "hint: advice\nfatal: Remote branch dev not found in upstream origin\n", cause)
	want := `repo: branch_not_found: The branch "dev" does not exist in https://h/r.git: check its name, or leave it out to use the default branch. (git: fatal: Remote branch dev not found in upstream origin)`
	if e.Error() != want {
		t.Errorf("Error() =\n%s\nwant\n%s", e.Error(), want)
	}
	var ee *exec.ExitError
	if !errors.As(e, &ee) || ee != cause {
		t.Error("the exit error is not reachable with errors.As")
	}
	long := strings.Repeat("x", 2*maxDetail)
	if d := classify(target{op: "push"}, long, nil).Detail; len(d) > maxDetail+len("…") {
		t.Errorf("Detail is %d bytes", len(d))
	}
}
