package integration

import (
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
	"github.com/sandbot/sandbot/workflows"
)

// assertReplays replays the session's recorded history against the current
// workflow code: any non-determinism (map order, time, randomness outside
// the SDK) fails here, not months later in production.
func assertReplays(t *testing.T, s *stack, th chat.Thread) {
	t.Helper()
	iter := s.c.GetWorkflowHistory(s.ctx, th.ID(), "", false, 0)
	var events []*historypb.HistoryEvent
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.Session, workflow.RegisterOptions{Name: session.WorkflowName})
	if err := r.ReplayWorkflowHistory(nil, &historypb.History{Events: events}); err != nil {
		t.Fatalf("replaying %d events of %s: %v", len(events), th.ID(), err)
	}
}
