package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/session"
)

// committedHistories are real session histories, recorded by the
// integration scenarios (go test ./integration -update-histories) with the
// workflow code of their time. Each stands for sessions that are running in
// production when a new build deploys; every one must replay against
// today's code. A failure here means the change would break running
// sessions: put it behind workflow.GetVersion (see docs/ARCHITECTURE.md,
// "Sessions outlive code") instead of re-recording the file.
var committedHistories = []string{
	"awaiting-approval.json", // open: mid-turn, waiting for an approval
	"approvals.json",         // a turn with a read-only call, an approval and its command
	"rejection.json",         // a rejection with a reason
	"stop.json",              // /stop while a command runs, then another turn
	"fork-source.json",       // a session that forks
	"fork-child.json",        // the fork, started from the seed
	"backend-switch.json",    // local → docker → local, workspace carried
	"continue-as-new-run1.json",
	"continue-as-new-run2.json",
	"continue-as-new-run6.json", // the open last run after five continue-as-new
	"destroy.json",              // /destroy on docker
}

func TestCommittedHistoriesReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range files {
		have[filepath.Base(f)] = true
	}
	for _, name := range committedHistories {
		if !have[name] {
			t.Errorf("committed history %s is missing from testdata/histories", name)
		}
	}
	if len(files) < len(committedHistories) {
		t.Fatalf("found %d histories, want at least %d", len(files), len(committedHistories))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: session.WorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
