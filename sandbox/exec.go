package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/session"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// Limits and timeouts of the Exec activity. The helpers below are pure, so
// the workflow uses them to schedule the activity and the activity uses
// them to run it; both sides always agree.
const (
	// ExecTimeoutMargin is added to the commands' total time for the
	// activity's StartToClose: process start-up, output drain, heartbeats.
	ExecTimeoutMargin = time.Minute
	// MaxCommands bounds the commands of one call.
	MaxCommands = 64
	// ExecOutputBudget bounds the output of a whole ExecResult (it is
	// stored in workflow history): each stream of each command gets at most
	// ExecOutputBudget/(2*len(Commands)) bytes, less if requested.
	ExecOutputBudget = 1 << 20
	// heartbeatOutputBudget bounds the output carried in heartbeat details.
	heartbeatOutputBudget = 64 << 10
)

// CommandTimeout is the per-command timeout Exec applies for a requested
// one: the session default for zero or less, at most the session
// contract's ceiling.
func CommandTimeout(requested time.Duration) time.Duration {
	switch {
	case requested <= 0:
		return session.DefaultCommandTimeout
	case requested > session.CommandTimeoutCeiling:
		return session.CommandTimeoutCeiling
	}
	return requested
}

// ExecActivityTimeout is the StartToClose timeout the workflow must give
// the Exec activity for req: every command may use its whole (clamped)
// timeout, plus ExecTimeoutMargin. A shorter activity timeout would let
// Temporal give up on a command that is still legitimately running.
func ExecActivityTimeout(req ExecRequest) time.Duration {
	n := max(len(req.Commands), 1)
	return time.Duration(n)*CommandTimeout(req.Timeout) + ExecTimeoutMargin
}

// ExecOutputCap is the per-stream cap Exec applies to each command of req.
func ExecOutputCap(req ExecRequest) int {
	share := ExecOutputBudget / (2 * max(len(req.Commands), 1))
	if req.OutputCap > 0 && req.OutputCap < share {
		return req.OutputCap
	}
	return min(share, max(req.OutputCap, DefaultOutputCap))
}

// ExecProgress is the Exec activity's heartbeat detail: which command was
// started last and the results of those that finished. If the worker dies,
// it is what the retry (or the workflow, from the timeout error) knows.
type ExecProgress struct {
	CallID string `json:"call_id"`
	// Started is the index of the command started last; -1 before any.
	Started int `json:"started"`
	// Results are the finished commands, in order (output trimmed to keep
	// heartbeats small).
	Results []CommandResult `json:"results,omitempty"`
}

// Interrupted texts for commands whose outcome is unknown.
const (
	interruptedRunning = "interrupted: the worker running this command was lost; it was not run again, and it may have had effects"
	interruptedMaybe   = "interrupted: the worker running this call was lost before this command was known to finish; it was not run again, and it may have run"
)

// Outcome builds the result of a call whose worker was lost, from the last
// progress Temporal recorded. Finished commands keep their results. Every
// other command is Interrupted, never Skipped: heartbeats are throttled,
// so the recorded progress can lag by one heartbeat interval, and a
// command that looks unstarted may have run. Reporting it as not run could
// lead the model to run it twice.
func (p ExecProgress) Outcome(req ExecRequest) ExecResult {
	var done []CommandResult
	if p.CallID == "" || p.CallID == req.CallID {
		done = p.Results
	}
	out := ExecResult{Results: make([]CommandResult, 0, len(req.Commands))}
	for i, c := range req.Commands {
		if i < len(done) && done[i].Command == c {
			out.Results = append(out.Results, done[i])
			continue
		}
		msg := interruptedMaybe
		if i == p.Started {
			msg = interruptedRunning
		}
		out.Results = append(out.Results, CommandResult{Command: c, Interrupted: true, Error: msg, Result: Result{ExitCode: -1}})
		done = nil // results after a gap cannot be trusted to line up
	}
	return out
}

// RecoverExec rebuilds an Exec outcome from the error of a failed Exec
// activity, for workflow code (it is deterministic). It returns false when
// the error says nothing ran or carries no outcome, in which case the
// workflow treats the error as it is (for ErrTypeNotFound it may Ensure and
// run the call again, since nothing ran):
//   - a cancellation (the user stopped the turn) carries the partial
//     ExecResult: finished commands, the killed one, the rest Skipped;
//   - a StartToClose or heartbeat timeout (the worker died or hung) yields
//     ExecProgress.Outcome of the last heartbeat;
//   - a ScheduleToStart timeout means the call never started (its host is
//     gone), so it returns false.
func RecoverExec(req ExecRequest, err error) (ExecResult, bool) {
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		var res ExecResult
		if canceled.HasDetails() && canceled.Details(&res) == nil && len(res.Results) == len(req.Commands) {
			return res, true
		}
		return ExecProgress{CallID: req.CallID, Started: -1}.Outcome(req), true
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		if timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			return ExecResult{}, false
		}
		p := ExecProgress{Started: -1}
		if timeout.HasLastHeartbeatDetails() {
			if derr := timeout.LastHeartbeatDetails(&p); derr != nil {
				p = ExecProgress{Started: -1}
			}
		}
		return p.Outcome(req), true
	}
	return ExecResult{}, false
}

// Exec runs the call's commands in order in the workspace root, at most
// once each. The workflow schedules it with MaximumAttempts 1,
// StartToClose ExecActivityTimeout(req) and a heartbeat timeout (see
// session.DefaultExecHeartbeat). Should it run again anyway (a retry policy,
// a redelivered task), it runs nothing and reports from the recorded
// progress (see ExecProgress.Outcome).
//
// A failing command does not stop the ones after it (the model sees each
// outcome). Cancellation kills the running command; the activity then
// fails with a CanceledError carrying the partial ExecResult (commands
// not reached are Skipped), which RecoverExec extracts.
func (a *Activities) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	if len(req.Commands) == 0 {
		return ExecResult{}, badRequest("sandbox: exec: no commands")
	}
	if len(req.Commands) > MaxCommands {
		return ExecResult{}, badRequest("sandbox: exec: %d commands; at most %d per call", len(req.Commands), MaxCommands)
	}
	b, err := a.backend(req.Handle.Backend)
	if err != nil {
		return ExecResult{}, err
	}
	b = a.redacting(b) // see Activities.Redactor
	if activity.GetInfo(ctx).Attempt > 1 || activity.HasHeartbeatDetails(ctx) {
		p := ExecProgress{Started: -1}
		if activity.HasHeartbeatDetails(ctx) {
			if err := activity.GetHeartbeatDetails(ctx, &p); err != nil {
				p = ExecProgress{Started: -1}
			}
		}
		a.log().Warn("exec activity ran again; reporting recorded progress instead of re-running commands",
			"call_id", req.CallID, "sandbox", req.Handle.ID, "attempt", activity.GetInfo(ctx).Attempt, "started", p.Started)
		return p.Outcome(req), nil
	}

	timeout, limit := CommandTimeout(req.Timeout), ExecOutputCap(req)
	prog := &progress{p: ExecProgress{CallID: req.CallID, Started: -1}, n: len(req.Commands)}
	stop := heartbeatWhileRunning(ctx, prog.details)
	defer stop()

	results := make([]CommandResult, 0, len(req.Commands))
	for i, command := range req.Commands {
		if ctx.Err() != nil {
			break
		}
		// The next beat carries it (within HeartbeatEvery), as the SDK's
		// batching did when it was recorded here.
		prog.start(i)
		start := time.Now()
		res, err := b.Exec(ctx, req.Handle, Cmd{Command: command, Timeout: timeout, OutputCap: limit})
		metrics.ExecCommand(req.Handle.Backend, execOutcome(ctx, res, err), time.Since(start))
		cr := CommandResult{Command: command, Result: res}
		if err != nil {
			switch {
			case ctx.Err() != nil:
				cr.Error = "stopped: the call was canceled while this command ran"
			case i == 0 && (errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnavailable)):
				return ExecResult{}, classify("exec", err) // nothing ran
			case errors.Is(err, ErrOutcomeUnknown):
				// Started, end unseen: it may have run, so it is
				// interrupted, as when the worker dies mid-command.
				cr.Interrupted = true
				cr.ExitCode = -1
				cr.Error = err.Error()
			default:
				// It did not run (or not to a known end): no exit
				// code, lest a zero one read as success. The chaos
				// suite caught a command the Docker daemon refused to
				// start reported to the model as "exit code: 0".
				cr.ExitCode = -1
				cr.Error = fmt.Sprintf("could not run: %v", err)
			}
			results = append(results, cr)
			prog.finish(cr)
			break
		}
		results = append(results, cr)
		prog.finish(cr)
	}
	for _, command := range req.Commands[len(results):] {
		results = append(results, CommandResult{Command: command, Skipped: true})
	}
	out := ExecResult{Results: results}
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.Canceled) {
			return out, temporal.NewCanceledError(out)
		}
		return out, fmt.Errorf("sandbox: exec: %w", err)
	}
	return out, nil
}

// execOutcome is a command's outcome for metrics.
func execOutcome(ctx context.Context, res Result, err error) string {
	switch {
	case err != nil && ctx.Err() != nil:
		return metrics.ExecCanceled
	case err != nil:
		return metrics.ExecError
	case res.TimedOut:
		return metrics.ExecTimedOut
	case res.ExitCode != 0:
		return metrics.ExecNonZero
	}
	return metrics.ExecOK
}

// progress is ExecProgress shared between the command loop and the
// heartbeat goroutine.
type progress struct {
	mu sync.Mutex
	p  ExecProgress
	n  int
}

func (p *progress) start(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.p.Started = i
}

func (p *progress) finish(cr CommandResult) {
	share := heartbeatOutputBudget / (2 * max(p.n, 1))
	cr.Stdout, cr.Truncated = keepTail(cr.Stdout, share, cr.Truncated)
	cr.Stderr, cr.Truncated = keepTail(cr.Stderr, share, cr.Truncated)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.p.Results = append(p.p.Results, cr)
}

func (p *progress) details() any {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.p
	c.Results = append([]CommandResult(nil), p.p.Results...)
	return c
}

// keepTail keeps the last n bytes of s (on a rune boundary).
func keepTail(s string, n int, truncated bool) (string, bool) {
	if len(s) <= n {
		return s, truncated
	}
	return s[runeEnd(s, len(s)-n):], true
}
