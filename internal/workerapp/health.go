package workerapp

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/internal/app"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Checks are the worker's readiness conditions: Temporal answers, every
// served backend that can check itself (sandbox.Checker: the Docker daemon
// and image) is usable, and no configured backend was left unserved.
func (w *Worker) Checks() []app.Check {
	checks := []app.Check{app.TemporalCheck(w.client, w.namespace)}
	for _, b := range w.backends {
		if c, ok := b.(sandbox.Checker); ok {
			checks = append(checks, app.Check{Name: "backend " + b.Name(), Probe: c.Check}.Cached(app.CheckTTL))
		}
	}
	names := make([]string, 0, len(w.Unavailable))
	for n := range w.Unavailable {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		why := w.Unavailable[n]
		checks = append(checks, app.Check{Name: "backend " + n, Probe: func(context.Context) error {
			return errors.New("configured but not served: " + why)
		}})
	}
	return checks
}

// SessionsEvery is how often a worker refreshes the session gauges.
const SessionsEvery = 30 * time.Second

// CountSessions sets the session gauges from Temporal visibility: this
// deployment's running session workflows (those on its task queue) and,
// where sandbot's search attributes are registered, those with a turn in
// progress.
func CountSessions(ctx context.Context, c client.Client, namespace, taskQueue string) error {
	base := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND TaskQueue = '%s'", session.WorkflowName, taskQueue)
	count := func(q string) (int64, error) {
		resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: q})
		return resp.GetCount(), err
	}
	running, err := count(base)
	if err != nil {
		return fmt.Errorf("count sessions: %w", err)
	}
	active, err := count(base + " AND " + session.SAActiveTurn.GetName() + " = true")
	if err != nil {
		active = -1 // not indexed: leave the gauge out
	}
	metrics.SetSessions(running, active)
	return nil
}

// runSessionCounter refreshes the session gauges now and every interval
// until ctx ends.
func (w *Worker) runSessionCounter(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, every)
		if err := CountSessions(cctx, w.client, w.namespace, w.taskQueue); err != nil && ctx.Err() == nil {
			w.log.Warn("session gauges", "error", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
