package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/session"
)

// scenarioHistories are the real session histories every generation of
// workflow code commits under testdata/histories as v<N>-<name>, recorded by
// the integration scenarios (go test ./integration -update-histories; see
// historyGeneration there). Each stands for sessions running in production
// when a new build deploys; every one must replay against today's code. A
// failure here means the change would break running sessions: put it behind
// workflow.GetVersion (docs/ARCHITECTURE.md, "Sessions outlive code")
// instead of re-recording a file.
var scenarioHistories = []string{
	"awaiting-approval",    // open: mid-turn, waiting for an approval
	"approvals",            // a read-only call, an approval and its command
	"rejection",            // a rejection with a reason
	"stop",                 // /stop while a command runs, then another turn
	"fork-source",          // a session that forks
	"fork-child",           // the fork, started from the seed
	"backend-switch",       // local → docker → local, workspace carried
	"continue-as-new-run1", // the first of six runs
	"continue-as-new-run2",
	"continue-as-new-run6", // the open last run
	"destroy",              // /destroy on docker
}

// historyGenerations are the generations of workflow code that recorded
// histories; each must have every scenario.
var historyGenerations = []string{"v1", "v2"}

func TestCommittedHistoriesReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range files {
		have[filepath.Base(f)] = true
	}
	for _, gen := range historyGenerations {
		for _, name := range scenarioHistories {
			if !have[gen+"-"+name+".json"] {
				t.Errorf("committed history %s-%s.json is missing from testdata/histories", gen, name)
			}
		}
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
