package cluster

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

// TestClusterRestart: while a turn waits for approval, the Temporal server
// is killed (SIGKILL) and PostgreSQL crashes (an immediate shutdown, with
// crash recovery on the next start); both start again on the same data.
// Workers and bot replicas keep running and reconnect by themselves, and
// the Approve button posted before the restart still works: the command
// runs, the turn finishes, the answer is posted once.
func TestClusterRestart(t *testing.T) {
	t.Parallel()
	c := ownCluster(t)
	w := newWorld(t, c, "restart")
	hosts := []*host{w.startHost("host-a", ""), w.startHost("host-b", "")}
	w.startBots(2)

	const answer = "The approval survived the cluster restart."
	w.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("echo approved > approved.txt")), fakeopenai.FinalStep(answer))
	th := w.mention(alice, "write approved.txt once I approve")
	ref, buttons := w.approvalButtons(th, 1)

	start := time.Now()
	c.Kill()
	if err := c.Postgres().Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.turnState(th); err == nil {
		t.Fatal("the session answered with the cluster down")
	}
	if err := c.Postgres().Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// A query is answered by a worker: once it is, the workers are back.
	ts := w.waitTurn(th, "the session answering again, still waiting", func(ts session.TurnState) bool { return ts.Pending != nil })
	t.Logf("cluster killed and back, session answering, in %s", time.Since(start).Round(time.Millisecond))
	if ts.Pending.CallID != "c1" || ts.StatusRef != ref {
		t.Fatalf("after the restart (status message before: %s): %s", ref, dump(ts))
	}
	if ran := filesNamed(t, "approved.txt", hosts...); len(ran) != 0 {
		t.Fatalf("the command ran before it was approved: %v", ran)
	}

	w.click(ref, alice, buttons[chat.ActionApprove])
	end := w.waitDone(th, 1)
	if end.Status != session.StatusComplete || end.ToolCalls[0].Status != session.CallCompleted {
		t.Fatalf("end state: %s", dump(end))
	}
	ran := filesNamed(t, "approved.txt", hosts...)
	if len(ran) != 1 {
		t.Fatalf("approved.txt should be in one workspace: %v", ran)
	}
	if b, _ := os.ReadFile(ran[0]); string(b) != "approved\n" {
		t.Fatalf("approved.txt = %q", b)
	}
	w.wait("the status message saying who approved", func(s fakeslack.Snapshot) bool {
		m, _ := s.Message(w.channel, ref)
		return strings.Contains(messageText(m), "approved by <@"+alice+">")
	})
	if n := w.posts(th, answer); n != 1 {
		t.Fatalf("the answer was posted %d times, want once", n)
	}
}
