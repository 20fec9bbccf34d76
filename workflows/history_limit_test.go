package workflows

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/session"
)

// seeded is an input whose session starts with a transcript of about n
// bytes (as a fork's does), so the state continue-as-new carries is large.
func seeded(h *harness, n int) session.SessionInput {
	in := h.input(session.ApproveNever)
	in.Settings.HistoryLimitBytes = 1 << 20
	h.policy = in.Settings.Policy
	seed := &session.ForkSeed{}
	for i := 0; i < n/(8<<10); i++ {
		seed.Transcript = append(seed.Transcript,
			session.Message{Role: session.RoleUser, Content: "question"},
			session.Message{Role: session.RoleAssistant, Content: strings.Repeat("x", 8<<10)})
	}
	in.Seed = seed
	return in
}

// A run continues as new before its history plus the state it would carry
// out passes the limit: the soak's runs averaged 1.5 times a 1 MiB limit
// (one 2.1 MB), because the limit was compared with the history before the
// last event, which holds the whole state once more. Here the run started
// at 500 KB, its turn brought it to 800 KB, and it carries about 400 KB:
// under the limit by the old count, over it with the carry counted, and
// the run's own 300 KB are more than a quarter of the limit.
func TestContinueAsNewCountsTheCarriedState(t *testing.T) {
	h := newHarness(t, final("one"))
	in := seeded(h, 400<<10)
	h.env.SetCurrentHistorySize(500 << 10)
	h.at(time.Second, func() { // after the run's first workflow task
		h.env.SetCurrentHistorySize(800 << 10)
		h.send("e1", "hello")
	})
	h.env.ExecuteWorkflow(session.WorkflowName, in)
	var can *workflow.ContinueAsNewError
	if err := h.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new after the turn (800 KB of history + about 400 KB carried > 1 MiB), got %v (completed %v)", err, h.env.IsWorkflowCompleted())
	}
}

// A state that alone fills most of the limit does not make a run continue
// after every turn: the run first adds a quarter of the limit of its own.
func TestContinueAsNewLetsARunAddAQuarterOfTheLimit(t *testing.T) {
	h := newHarness(t, final("one"))
	in := seeded(h, 400<<10)
	h.env.SetCurrentHistorySize(700 << 10)
	h.at(time.Second, func() {
		h.env.SetCurrentHistorySize(800 << 10) // 100 KB of its own
		h.send("e1", "hello")
	})
	h.destroyAt(10 * time.Minute)
	h.env.ExecuteWorkflow(session.WorkflowName, in)
	var res session.SessionResult
	if err := h.env.GetWorkflowResult(&res); err != nil || !res.Destroyed || res.Turns != 1 {
		t.Fatalf("want the run to wait for more turns (then be destroyed), got %+v, %v", res, err)
	}
}
