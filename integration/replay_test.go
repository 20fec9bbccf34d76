package integration

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
	"github.com/sandbot/sandbot/workflows"
)

// updateHistories writes the histories of the scenarios that record them
// under workflows/testdata/histories, as gen<historyGeneration>-<name>.json:
//
//	go test ./integration -run 'TestTurnWithToolCallsAndOneApproval|...' -update-histories
//
// Committed files are the sessions already running in production and are
// never rewritten (recordHistory refuses): when workflow behaviour changes
// (under workflow.GetVersion), bump historyGeneration and record the new
// generation next to the old ones, so both replay from then on.
var updateHistories = flag.Bool("update-histories", false, "write this generation's histories to workflows/testdata/histories")

// historyGeneration numbers the workflow code that recorded a history:
// v1 is the code before worker-owned policies; v2 has the worker-policy,
// frozen-approval-decision and destroy-before-continue-as-new changes
// (and signed-decisions); v3 adds watch-lease; v4 transcript-refs and
// compaction; v5 checkpoints (incremental snapshots); v6 attachments and
// share-file (so far recorded: files, a Slack session with attachments and
// shared files); v7 the watch lease claimed with the message (recorded:
// awaiting-approval, approvals, continue-as-new); v8 the history limit
// counting the state continue-as-new carries (recorded: continue-as-new);
// v9 cancel-idle-timer (recorded: awaiting-approval, approvals, stop,
// backend-switch, continue-as-new).
const historyGeneration = 9

// historyDir is where the replay test in package workflows reads them.
const historyDir = "../workflows/testdata/histories"

// runHistories returns every run of the session's workflow, oldest first:
// continue-as-new starts a new run, and a replayer takes one run per
// history.
func runHistories(t *testing.T, s *stack, workflowID string) []*historypb.History {
	t.Helper()
	var runs []*historypb.History
	runID := ""
	for {
		iter := s.c.GetWorkflowHistory(s.ctx, workflowID, runID, false, 0)
		var events []*historypb.HistoryEvent
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Fatalf("history of %s run %q: %v", workflowID, runID, err)
			}
			events = append(events, ev)
		}
		if len(events) == 0 {
			t.Fatalf("history of %s run %q is empty", workflowID, runID)
		}
		runs = append([]*historypb.History{{Events: events}}, runs...)
		prev := events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if prev == "" {
			return runs
		}
		runID = prev
	}
}

// assertReplays replays every run of the session's recorded history
// against the current workflow code: any non-determinism (map order, time,
// randomness outside the SDK) fails here, not months later in production.
func assertReplays(t *testing.T, s *stack, th chat.Thread) {
	t.Helper()
	replayRuns(t, th.ID(), runHistories(t, s, th.ID()))
}

// recordHistory replays the session's runs like assertReplays and, with
// -update-histories, writes them as name.json (name-runN.json when the
// session continued as new) for the committed replay test.
func recordHistory(t *testing.T, s *stack, workflowID, name string) {
	t.Helper()
	runs := runHistories(t, s, workflowID)
	replayRuns(t, workflowID, runs)
	if !*updateHistories {
		return
	}
	if err := os.MkdirAll(historyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, h := range runs {
		file := fmt.Sprintf("v%d-%s.json", historyGeneration, name)
		if len(runs) > 1 {
			file = fmt.Sprintf("v%d-%s-run%d.json", historyGeneration, name, i+1)
		}
		path := filepath.Join(historyDir, file)
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("%s exists: committed histories are never re-recorded; bump historyGeneration for new workflow code", path)
		}
		b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d events)", file, len(h.Events))
	}
}

func replayRuns(t *testing.T, workflowID string, runs []*historypb.History) {
	t.Helper()
	for i, h := range runs {
		r := worker.NewWorkflowReplayer()
		r.RegisterWorkflowWithOptions(workflows.Session, workflow.RegisterOptions{Name: session.WorkflowName})
		if err := r.ReplayWorkflowHistory(nil, h); err != nil {
			t.Fatalf("replaying run %d (%d events) of %s: %v", i+1, len(h.Events), workflowID, err)
		}
	}
}
