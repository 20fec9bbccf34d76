package workerapp

import (
	"context"
	"errors"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/sandbox"
)

// sweeper is a backend that can remove sandboxes whose session is gone.
type sweeper interface {
	Sweep(ctx context.Context, alive func(sessionID string) (bool, error)) ([]string, error)
}

// SessionAlive reports whether the session workflow is still running. A
// closed or unknown workflow is not alive; any other error is returned so
// that sweeping keeps the sandbox when in doubt.
func SessionAlive(ctx context.Context, c client.Client) func(string) (bool, error) {
	return func(id string) (bool, error) {
		resp, err := c.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return resp.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
	}
}

// SweepOrphans removes sandboxes of every backend that supports it whose
// session is gone, and returns what was removed.
func SweepOrphans(ctx context.Context, c client.Client, backends []sandbox.Backend, log *slog.Logger) []string {
	var removed []string
	for _, b := range backends {
		s, ok := b.(sweeper)
		if !ok {
			continue
		}
		got, err := s.Sweep(ctx, SessionAlive(ctx, c))
		if err != nil {
			log.Warn("orphan sweep", "backend", b.Name(), "error", err)
		}
		removed = append(removed, got...)
	}
	if len(removed) > 0 {
		log.Info("removed orphan sandboxes", "count", len(removed))
	}
	return removed
}

// runSweeper sweeps at start and then every interval until ctx ends.
func runSweeper(ctx context.Context, c client.Client, backends []sandbox.Backend, every time.Duration, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		SweepOrphans(ctx, c, backends, log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
