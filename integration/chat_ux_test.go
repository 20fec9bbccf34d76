package integration

import (
	"strings"
	"testing"

	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
)

// /title renames the session; /status and /sessions show the new title,
// and only the owner and approvers may rename.
func TestTitleRenamesTheSession(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals)
	th := e.thread("title")
	e.turn(th, 1, "first task", fakeopenai.FinalStep("done"))
	if r := e.command(th, "/title Fix the flaky test"); r != "Renamed this session to **Fix the flaky test**." {
		t.Fatalf("/title replied %q", r)
	}
	if info := e.info(th); info.Title != "Fix the flaky test" {
		t.Fatalf("title = %q", info.Title)
	}
	if r := e.command(th, "/sessions"); !strings.Contains(r, "**Fix the flaky test**") || !strings.Contains(r, "idle") {
		t.Fatalf("/sessions = %q", r)
	}
	before := len(e.p.textsIn(th))
	e.send(th, bobUser, "title-bob", "/title mine now")
	if got := e.p.textsIn(th); len(got) <= before || !strings.Contains(got[len(got)-1].Text, "may not rename this session") {
		t.Fatalf("bob's /title got %q", got[len(got)-1].Text)
	}
	if r := e.command(th, "/title"); !strings.Contains(r, "/title TEXT") {
		t.Fatalf("/title without text replied %q", r)
	}
}
