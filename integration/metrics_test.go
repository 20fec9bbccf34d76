package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/internal/app"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/internal/metrics/metricstest"
	"github.com/sandbot/sandbot/internal/workerapp"
	"github.com/sandbot/sandbot/session"
)

// metricWant is a series that must have grown by at least min.
type metricWant struct {
	name   string
	labels []string
	min    float64
}

// waitMetrics scrapes url until every want has grown by its min since
// before (the bot counts from what its watcher reads, after the turn's end
// is visible to the test), and returns the last scrape.
func waitMetrics(t *testing.T, url string, before metricstest.Families, wants ...metricWant) metricstest.Families {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		after := metricstest.Scrape(t, url)
		var missing []string
		for _, w := range wants {
			if d := after.Value(w.name, w.labels...) - before.Value(w.name, w.labels...); d < w.min {
				missing = append(missing, fmt.Sprintf("%s%v moved by %v, want %v", w.name, w.labels, d, w.min))
			}
		}
		if len(missing) == 0 {
			return after
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics did not move:\n  %s", strings.Join(missing, "\n  "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// One turn end to end, then /metrics: the turn, its tool call, the model
// calls, the commands and the snapshot are counted; a second turn's
// approval, clicked through the chat core, is counted with its wait. The
// worker's /readyz is ready. Other tests of the package share the
// process's counters, so only increases are checked.
func TestMetricsMoveAfterATurn(t *testing.T) {
	e := newThreadEnv(t, false)
	hs, err := app.ServeHealth(app.Health{Addr: "127.0.0.1:0", Metrics: metrics.NewRegistry(), Ready: e.worker.Checks()}, e.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hs.Stop)
	base := "http://" + hs.Addr
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("worker /readyz: %s", resp.Status)
	}

	// Unique per run, so -count reruns start a fresh session.
	th := e.thread(fmt.Sprintf("metrics-one-turn-%d", time.Now().UnixNano()))
	before := metricstest.Scrape(t, base+"/metrics")
	end := e.turn(th, 1, "look around",
		fakeopenai.ToolCallStep("metrics-c1", "shell", shell("ls -la", "pwd", "false")),
		fakeopenai.FinalStep("All quiet."))
	if end.Status != session.StatusComplete {
		t.Fatalf("turn 1: %s", dump(end))
	}
	after := waitMetrics(t, base+"/metrics", before,
		metricWant{"sandbot_turns_total", []string{"outcome", metrics.TurnComplete}, 1},
		metricWant{"sandbot_tool_calls_total", []string{"status", string(session.CallCompleted)}, 1},
		metricWant{"sandbot_model_calls_total", []string{"outcome", metrics.ModelOK}, 2},
		metricWant{"sandbot_model_call_duration_seconds", []string{"result", "ok"}, 2},
		metricWant{"sandbot_exec_commands_total", []string{"backend", "local", "outcome", metrics.ExecOK}, 2},
		metricWant{"sandbot_exec_commands_total", []string{"backend", "local", "outcome", metrics.ExecNonZero}, 1},
		metricWant{"sandbot_exec_duration_seconds", []string{"backend", "local"}, 3},
		metricWant{"sandbot_snapshots_total", []string{"backend", "local", "outcome", metrics.SnapshotWritten}, 1},
		metricWant{"sandbot_snapshot_duration_seconds", []string{"backend", "local"}, 1},
	)
	if d := after.Sum("sandbot_snapshot_stored_bytes", "backend", "local") - before.Sum("sandbot_snapshot_stored_bytes", "backend", "local"); d <= 0 {
		t.Errorf("no snapshot bytes counted (%v)", d)
	}

	// The session gauges count this stack's running session (the worker
	// refreshes them every 30 s; here they are refreshed at once).
	// A session counts as turn_active (SandbotActiveTurn) until its answer
	// is posted, and visibility lags the workflow: wait for the post, then
	// for the index.
	e.waitState(th, "the answer posted", func(ts session.TurnState) bool { return ts.FinalRef != "" })
	deadline := time.Now().Add(waitTimeout)
	for {
		if err := workerapp.CountSessions(e.ctx, e.c, e.cfg.Temporal.Namespace, e.cfg.Temporal.TaskQueue); err != nil {
			t.Fatalf("count sessions: %v", err)
		}
		got := metricstest.Scrape(t, base+"/metrics")
		running, active := got.Value("sandbot_sessions", "state", "running"), got.Value("sandbot_sessions", "state", "turn_active")
		if running == 1 && active == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbot_sessions: running %v, turn_active %v; want 1 and 0", running, active)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Turn 2 writes, so it asks; the click goes through the core.
	e.model.Push(fakeopenai.ToolCallStep("metrics-c2", "shell", shell("echo noted > note.txt")), fakeopenai.FinalStep("Noted."))
	e.send(th, alice, "ev-metrics-2", "take a note")
	e.waitState(th, "the approval request", func(ts session.TurnState) bool {
		return ts.Turn == 2 && ts.Pending != nil && ts.Pending.CallID == "metrics-c2"
	})
	var btn chat.Button
	e.p.waitFor(t, "an approval button", func([]posted, []string) bool {
		var ok bool
		btn, ok = approvalButton(t, e.p.recPoster, th, chat.ActionApprove)
		return ok
	})
	before = metricstest.Scrape(t, base+"/metrics")
	if err := e.core.HandleAction(e.ctx, e.p, chat.Action{ID: chat.ActionApprove, Value: btn.Value, User: alice, Thread: th,
		Reply: func(_ context.Context, text string) error { t.Errorf("approval answered %q", text); return nil }}); err != nil {
		t.Fatalf("HandleAction: %v", err)
	}
	if end := e.waitState(th, "turn 2 to end", func(ts session.TurnState) bool { return ts.Turn == 2 && done(ts) }); end.Status != session.StatusComplete {
		t.Fatalf("turn 2: %s", dump(end))
	}
	waitMetrics(t, base+"/metrics", before,
		metricWant{"sandbot_approvals_total", []string{"decision", string(session.DecisionApprove)}, 1},
		metricWant{"sandbot_approval_wait_seconds", []string{"decision", string(session.DecisionApprove)}, 1},
		metricWant{"sandbot_turns_total", []string{"outcome", metrics.TurnComplete}, 1},
	)
}
