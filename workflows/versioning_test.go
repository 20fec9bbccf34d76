package workflows

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/session"
)

// The worker's policy wins over the settings the bot sent: a bot started the
// session asking for approval of everything, the worker says never, and the
// command runs without a request.
func TestSessionTakesTheWorkersPolicy(t *testing.T) {
	h := newHarness(t, shellCall("c1", "rm -rf build"), final("done"))
	in := h.input(session.ApproveAlways)
	h.at(0, func() { h.send("e1", "clean") })
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.mu.Lock()
	h.policy = session.Policy{ApprovalMode: session.ApproveNever, MaxToolCalls: 3}
	h.mu.Unlock()
	h.env.ExecuteWorkflow(session.WorkflowName, in)
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if end.Status != session.StatusComplete || end.ToolCalls[0].Decision != nil || end.ToolCalls[0].Status != session.CallCompleted {
		t.Fatalf("the worker's never-ask policy should have run the call unasked: %+v", end)
	}
	if ran := h.box.ran(); len(ran) != 1 || ran[0][0] != "rm -rf build" {
		t.Fatalf("executed: %v", ran)
	}
}

// A deliberately unversioned change (an extra side effect at the start of
// every run, without GetVersion) must fail the replay of the committed
// histories: the replay test is what stops such a change before it ships.
func TestReplayCatchesAnUnversionedChange(t *testing.T) {
	unversioned := func(ctx workflow.Context, in Input) (session.SessionResult, error) {
		var x int
		_ = workflow.SideEffect(ctx, func(workflow.Context) any { return 1 }).Get(&x)
		return Session(ctx, in)
	}
	for _, name := range []string{"approvals.json", "awaiting-approval.json", "continue-as-new-run2.json"} {
		r := worker.NewWorkflowReplayer()
		r.RegisterWorkflowWithOptions(unversioned, workflow.RegisterOptions{Name: session.WorkflowName})
		err := r.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("testdata", "histories", name))
		// TMPRL1100 is the SDK's code for a non-deterministic replay.
		if err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
			t.Errorf("replaying %s against an unversioned change: got %v, want a nondeterminism error", name, err)
		}
	}
}
