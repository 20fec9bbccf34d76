package integration

import (
	"strings"
	"testing"

	"github.com/sandbot/sandbot/internal/fake/openai"
)

// Every completed turn is a checkpoint: /rewind N brings the live
// workspace and the conversation back to the end of turn N after a
// confirmation, /fork @N starts a copy from there, and /status lists
// them. Runs on the real worker, local backend and file store.
func TestRewindAndForkFromACheckpoint(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals)
	th := e.thread("checkpoints")
	e.turn(th, 1, "write version one",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo one > notes.txt", "mkdir -p src && echo keep > src/a.txt")),
		fakeopenai.FinalStep("wrote one"))
	e.turn(th, 2, "write version two",
		fakeopenai.ToolCallStep("c2", "shell", shell("echo two > notes.txt", "rm src/a.txt", "echo new > extra.txt")),
		fakeopenai.FinalStep("wrote two"))
	e.turn(th, 3, "write version three",
		fakeopenai.ToolCallStep("c3", "shell", shell("echo three >> notes.txt")),
		fakeopenai.FinalStep("wrote three"))

	if cps := e.info(th).Checkpoints; len(cps) != 3 || cps[0].Turn != 1 || cps[2].Turn != 3 || cps[0].Files != 2 {
		t.Fatalf("checkpoints %+v, want turns 1 to 3 (turn 1 with 2 files)", cps)
	}
	// A fork from turn 1 sees turn 1's files.
	fork := e.fork(th, `/fork @1 "from one"`, 1, "local")
	ts := e.turn(fork, 1, "look",
		fakeopenai.ToolCallStep("f1", "shell", shell("cat notes.txt", "cat src/a.txt", "ls")),
		fakeopenai.FinalStep("looked"))
	c := onlyCall(t, ts)
	if got := cmdOut(t, c, "cat notes.txt"); got != "one" {
		t.Fatalf("the fork from turn 1 reads notes.txt = %q", got)
	}
	if got := cmdOut(t, c, "ls"); strings.Contains(got, "extra.txt") {
		t.Fatalf("the fork from turn 1 has turn 2's file: %q", got)
	}

	// /rewind asks first, then undoes turns 2 and 3.
	if r := e.command(th, "/rewind 1"); !strings.Contains(r, "/rewind 1 confirm") || !strings.Contains(r, "undoing turns 2 to 3") {
		t.Fatalf("/rewind 1 replied %q", r)
	}
	if r := e.command(th, "/rewind 9 confirm"); !strings.Contains(r, "no checkpoint") && !strings.Contains(r, "latest") {
		t.Fatalf("/rewind 9 replied %q", r)
	}
	if r := e.command(th, "/rewind 1 confirm"); !strings.Contains(r, "Rewound to the end of turn 1; 2 later turns were undone") {
		t.Fatalf("/rewind 1 confirm replied %q", r)
	}
	ts = e.turn(th, 4, "what is there now",
		fakeopenai.ToolCallStep("c4", "shell", shell("cat notes.txt", "cat src/a.txt", "ls")),
		fakeopenai.FinalStep("looked"))
	c = onlyCall(t, ts)
	if got := cmdOut(t, c, "cat notes.txt"); got != "one" {
		t.Fatalf("after the rewind notes.txt = %q, want turn 1's", got)
	}
	if got := cmdOut(t, c, "cat src/a.txt"); got != "keep" {
		t.Fatalf("after the rewind src/a.txt = %q, want it back", got)
	}
	if got := cmdOut(t, c, "ls"); strings.Contains(got, "extra.txt") {
		t.Fatalf("after the rewind turn 2's file is still there: %q", got)
	}
	// The model sees turn 1, the rewind note, and not turns 2 and 3.
	reqs := e.model.Requests()
	body := dump(reqs[len(reqs)-1].Body.Messages)
	if !strings.Contains(body, "write version one") || strings.Contains(body, "write version two") || !strings.Contains(body, "rewound the workspace and this conversation to the end of turn 1") {
		t.Fatalf("after the rewind the model got: %s", body)
	}
}
