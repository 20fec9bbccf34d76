package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Activity method values. Activities are referenced by method value, never
// by string, so a rename is a compile error; the nil receivers are only used
// for their names.
var (
	modelActs   *agent.Activities
	sandboxActs *sandbox.Activities
)

// hostWait bounds how long a sandbox activity may wait for the worker that
// holds the sandbox. Past it the host counts as gone and the session
// restores from its snapshot on another worker.
const hostWait = 45 * time.Second

func modelOptions(ctx workflow.Context, s session.Settings) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           workflow.GetInfo(ctx).TaskQueueName,
		StartToCloseTimeout: s.ModelTimeout,
		// Complete heartbeats at half this while it waits, so a dead worker
		// is noticed in seconds rather than after ModelTimeout.
		HeartbeatTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			// Permanent failures (401/403/404) come back non-retryable
			// from agent.Classify; everything else retries with backoff,
			// honouring Retry-After through NextRetryDelay.
			MaximumAttempts: int32(s.ModelAttempts),
		},
	})
}

func ensureOptions(ctx workflow.Context, queue string, bounded bool) workflow.Context {
	o := workflow.ActivityOptions{
		TaskQueue:           queue,
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    4,
		},
	}
	if bounded {
		o.ScheduleToStartTimeout = hostWait
	}
	return workflow.WithActivityOptions(ctx, o)
}

// execOptions runs a shell call at most once: a retry could run a
// non-idempotent command twice, so a lost worker surfaces as a timeout the
// workflow reports to the model instead.
func execOptions(ctx workflow.Context, req sandbox.ExecRequest, heartbeat time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              req.Handle.TaskQueue,
		ScheduleToStartTimeout: hostWait,
		StartToCloseTimeout:    sandbox.ExecActivityTimeout(req),
		HeartbeatTimeout:       heartbeat,
		WaitForCancellation:    true,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

func housekeepingOptions(ctx workflow.Context, queue string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              queue,
		ScheduleToStartTimeout: hostWait,
		StartToCloseTimeout:    30 * time.Minute,
		HeartbeatTimeout:       2 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    3,
		},
	})
}
