package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/sandbot/sandbot/chat"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// Session discovery: /sessions in a channel, and the Sandbot* search
// attributes behind it.

var bobUser = chat.User{ID: "U-bob", Name: "bob"}

// waitListed waits until the visibility query lists exactly want (workflow
// IDs, in any order): visibility is eventually consistent.
func (e *threadEnv) waitListed(query string, want ...string) {
	e.t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(waitTimeout)
	var got []string
	for time.Now().Before(deadline) {
		resp, err := e.c.ListWorkflow(e.ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			e.t.Fatalf("list %q: %v", query, err)
		}
		got = got[:0]
		for _, x := range resp.GetExecutions() {
			got = append(got, x.GetExecution().GetWorkflowId())
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("visibility query %q lists %q, want %q", query, got, want)
}

func TestSessionsList(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals)
	a1, a2 := e.thread("alice-1"), e.thread("alice-2")
	elsewhere := chat.Thread{Platform: "console", Channel: e.channel + "-elsewhere", Thread: "bob-1"}
	e.turn(a1, 1, "first task", fakeopenai.FinalStep("one"))
	e.turn(a2, 1, "second task", fakeopenai.FinalStep("two"))
	e.model.Push(fakeopenai.FinalStep("three"))
	e.send(elsewhere, bobUser, "ev-bob-1", "bob's task")
	e.waitState(elsewhere, "bob's turn", func(ts session.TurnState) bool { return ts.Turn == 1 && done(ts) })
	fork := e.fork(a1, `/fork "alice's fork"`, 1, "local")

	// The search attributes say who, where, which backend and which parent.
	q := func(format string, args ...any) string {
		return "WorkflowType = 'Session' AND ExecutionStatus = 'Running' AND " + fmt.Sprintf(format, args...)
	}
	e.waitListed(q("SandbotChannel = '%s'", e.channel), a1.ID(), a2.ID(), fork.ID())
	e.waitListed(q("SandbotChannel = '%s' AND SandbotOwner = 'U-alice' AND SandbotPlatform = 'console' AND SandbotBackend = 'local' AND SandbotActiveTurn = false", e.channel),
		a1.ID(), a2.ID(), fork.ID())
	e.waitListed(q("SandbotChannel = '%s' AND SandbotOwner = 'U-bob'", elsewhere.Channel), elsewhere.ID())
	e.waitListed(q("SandbotParent = '%s'", a1.ID()), fork.ID())

	r := e.command(a1, "/sessions")
	for _, want := range []string{
		"`alice-1` **first task**: local, 1 turn, idle, owner @alice (this thread)",
		"`alice-2` **second task**: local, 1 turn, idle, owner @alice",
		"`alice-1-fork-1` **alice's fork**: local, 0 turns, idle, owner @alice",
	} {
		if !strings.Contains(r, want) {
			t.Fatalf("/sessions lacks %q:\n%s", want, r)
		}
	}
	if strings.Contains(r, "bob") {
		t.Fatalf("/sessions lists a session of another channel:\n%s", r)
	}
	if n := strings.Count(r, "\n- "); n != 3 {
		t.Fatalf("/sessions lists %d sessions, want 3:\n%s", n, r)
	}

	// In another channel alice has no sessions of her own; "all" shows
	// that channel's, and only those.
	r = e.command(elsewhere, "/sessions")
	if !strings.Contains(r, "You have no running sessions in this channel") {
		t.Fatalf("/sessions as alice in bob's channel:\n%s", r)
	}
	r = e.command(elsewhere, "/sessions all")
	if !strings.Contains(r, "`bob-1` **bob's task**") || strings.Contains(r, "alice-") {
		t.Fatalf("/sessions all in bob's channel:\n%s", r)
	}
}
