// Package metrics owns sandbot's own Prometheus metrics: every name, label
// and bucket is defined here, once, and the packages that count (agent,
// sandbox, chat and its adapters, the worker and bot assemblies) call the
// small functions below, so label values stay bounded by construction.
//
// It is a leaf: it imports only the Prometheus client, so any package may
// count without an import cycle. The collectors are package-level because a
// process counts into one set whoever counts; they reach a /metrics
// endpoint only through a registry (NewRegistry, or Register on one of the
// caller's), so tests scrape registries of their own and compare values
// before and after.
//
// Labels never carry session, thread, user or call IDs: only outcomes,
// statuses, decisions, error classes, backend and platform names, and API
// method names, each from a short fixed set.
package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Turn outcomes (label outcome of sandbot_turns_total).
const (
	TurnComplete = "complete"
	TurnFailed   = "failed"
	TurnStopped  = "stopped"
)

// Exec outcomes of one command (label outcome of sandbot_exec_commands_total).
const (
	ExecOK       = "ok"       // exit code 0
	ExecNonZero  = "nonzero"  // ran and exited non-zero
	ExecTimedOut = "timeout"  // killed by its timeout
	ExecError    = "error"    // could not be run
	ExecCanceled = "canceled" // stopped by the user (/stop)
)

// Snapshot outcomes (label outcome of sandbot_snapshots_total); failures
// carry the activity's error type (WorkspaceOverQuota, SnapshotTooLarge)
// or SnapshotError.
const (
	SnapshotWritten   = "written"
	SnapshotUnchanged = "unchanged"
	SnapshotError     = "error"
)

// ModelOK is the outcome of a model call that answered; failed calls carry
// their error class (agent.ErrType*), "canceled" or "other".
const ModelOK = "ok"

// Rate-limit wait kinds (label kind of sandbot_chat_rate_limit_wait_seconds_total).
const (
	// WaitRetryAfter is time spent waiting because the platform answered
	// 429 and said how long.
	WaitRetryAfter = "retry_after"
	// WaitPace is time spent waiting on sandbot's own pacing of a
	// platform's documented limits, before a call.
	WaitPace = "pace"
)

var (
	turns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_turns_total",
		Help: "Turns that ended, by outcome (complete, failed, stopped), as the bot's turn watchers saw them.",
	}, []string{"outcome"})
	toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_tool_calls_total",
		Help: "Tool calls that reached a final status (completed, rejected, failed), as the bot's turn watchers saw them.",
	}, []string{"status"})
	approvals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_approvals_total",
		Help: "Approval decisions the sessions accepted, by decision (approve, approve_always, reject, expired).",
	}, []string{"decision"})
	approvalWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sandbot_approval_wait_seconds",
		Help:    "Time from an approval request to the decision a person made on it.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600},
	}, []string{"decision"})

	modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_model_calls_total",
		Help: "Model API calls (one per activity attempt), by outcome: ok or the error class (ModelRateLimited, ModelUnavailable, ModelTimeout, ...).",
	}, []string{"outcome"})
	modelLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sandbot_model_call_duration_seconds",
		Help:    "Duration of model API calls, by result (ok, error).",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, 600},
	}, []string{"result"})
	modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_model_tokens_total",
		Help: "Tokens the model endpoint reported, by kind (prompt, completion).",
	}, []string{"kind"})

	execCommands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_exec_commands_total",
		Help: "Shell commands run in sandboxes, by backend and outcome (ok, nonzero, timeout, error, canceled).",
	}, []string{"backend", "outcome"})
	execLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sandbot_exec_duration_seconds",
		Help:    "Duration of one shell command in a sandbox, by backend.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
	}, []string{"backend"})

	snapshots = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_snapshots_total",
		Help: "Workspace snapshot activities, by backend and outcome (written, unchanged, WorkspaceOverQuota, SnapshotTooLarge, error).",
	}, []string{"backend", "outcome"})
	snapshotBytes = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sandbot_snapshot_stored_bytes",
		Help:    "Stored (compressed) size of each snapshot written, by backend; the sum is the bytes written to the snapshot store.",
		Buckets: prometheus.ExponentialBuckets(4<<10, 4, 12), // 4 KiB … 16 GiB
	}, []string{"backend"})
	snapshotLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sandbot_snapshot_duration_seconds",
		Help:    "Duration of snapshot activities that wrote a snapshot (fingerprint, export, compression and upload), by backend.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900},
	}, []string{"backend"})

	chatCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_chat_api_calls_total",
		Help: "Chat platform API requests (each attempt), by platform and call (Slack: the Web API method; Discord: HTTP method and resource).",
	}, []string{"platform", "call"})
	chatErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_chat_api_errors_total",
		Help: "Chat platform API requests that failed (including 429s), by platform and call.",
	}, []string{"platform", "call"})
	chatRateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_chat_rate_limited_total",
		Help: "Chat platform answers of 429 Too Many Requests, by platform.",
	}, []string{"platform"})
	chatWaits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sandbot_chat_rate_limit_wait_seconds_total",
		Help: "Seconds spent waiting on chat platform rate limits, by platform and kind (retry_after: the platform asked; pace: sandbot's own pacing of its documented limits).",
	}, []string{"platform", "kind"})

	// WatchersActive is the number of turn watchers the bot runs (one per
	// session whose turn it follows).
	WatchersActive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sandbot_watchers_active",
		Help: "Turn watchers running in this bot process.",
	})
	sessions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sandbot_sessions",
		Help: "Session workflows of this deployment per Temporal visibility, by state (running; turn_active: running with a turn in progress, when search attributes are registered). Every worker reports the same cluster-wide count.",
	}, []string{"state"})
)

// all lists every collector above, for Register.
var all = []prometheus.Collector{
	turns, toolCalls, approvals, approvalWait,
	modelCalls, modelLatency, modelTokens,
	execCommands, execLatency,
	snapshots, snapshotBytes, snapshotLatency,
	chatCalls, chatErrors, chatRateLimited, chatWaits,
	WatchersActive, sessions,
}

// Register registers sandbot's collectors on reg. A collector already
// registered there is not an error, so Register may be called more than
// once for one registry.
func Register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// NewRegistry returns a registry with the Go runtime and process collectors
// and sandbot's own: what a process serves on /metrics (the Temporal SDK's
// metrics are added to it by internal/app when the client is made).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := Register(reg); err != nil {
		// Only a programming error here (two collectors of one name) can
		// fail, and every test that builds a registry would catch it.
		panic(err)
	}
	return reg
}

// TurnEnded counts a turn that ended with outcome (TurnComplete,
// TurnFailed, TurnStopped).
func TurnEnded(outcome string) { turns.WithLabelValues(outcome).Inc() }

// ToolCallEnded counts a tool call that reached a final status (the
// session.CallStatus values completed, rejected, failed).
func ToolCallEnded(status string) { toolCalls.WithLabelValues(status).Inc() }

// ApprovalDecided counts a decision a session accepted (the
// session.Decision values, or "expired"); waited, when positive, is the
// time since the request and is observed too.
func ApprovalDecided(decision string, waited time.Duration) {
	approvals.WithLabelValues(decision).Inc()
	if waited > 0 {
		approvalWait.WithLabelValues(decision).Observe(waited.Seconds())
	}
}

// ModelCall counts one model API call that took d, with outcome ModelOK or
// its error class.
func ModelCall(outcome string, d time.Duration) {
	modelCalls.WithLabelValues(outcome).Inc()
	result := "ok"
	if outcome != ModelOK {
		result = "error"
	}
	modelLatency.WithLabelValues(result).Observe(d.Seconds())
}

// ModelTokens counts the tokens a model call reported.
func ModelTokens(prompt, completion int) {
	if prompt > 0 {
		modelTokens.WithLabelValues("prompt").Add(float64(prompt))
	}
	if completion > 0 {
		modelTokens.WithLabelValues("completion").Add(float64(completion))
	}
}

// ExecCommand counts one command run on backend with outcome (Exec*)
// that took d.
func ExecCommand(backend, outcome string, d time.Duration) {
	execCommands.WithLabelValues(backend, outcome).Inc()
	execLatency.WithLabelValues(backend).Observe(d.Seconds())
}

// Snapshot counts one snapshot activity on backend. For SnapshotWritten,
// stored is the stored size and d the activity's duration.
func Snapshot(backend, outcome string, stored int64, d time.Duration) {
	snapshots.WithLabelValues(backend, outcome).Inc()
	if outcome == SnapshotWritten {
		snapshotBytes.WithLabelValues(backend).Observe(float64(stored))
		snapshotLatency.WithLabelValues(backend).Observe(d.Seconds())
	}
}

// ChatCall counts one API request to platform; failed says it failed.
func ChatCall(platform, call string, failed bool) {
	chatCalls.WithLabelValues(platform, call).Inc()
	if failed {
		chatErrors.WithLabelValues(platform, call).Inc()
	}
}

// ChatRateLimited counts a 429 from platform that asked to wait retryAfter
// (zero: it did not say).
func ChatRateLimited(platform string, retryAfter time.Duration) {
	chatRateLimited.WithLabelValues(platform).Inc()
	ChatWaited(platform, WaitRetryAfter, retryAfter)
}

// ChatWaited adds time spent waiting on platform's rate limits, of kind
// WaitRetryAfter or WaitPace.
func ChatWaited(platform, kind string, d time.Duration) {
	if d > 0 {
		chatWaits.WithLabelValues(platform, kind).Add(d.Seconds())
	}
}

// SetSessions sets the session gauges: running session workflows and,
// when known (turnActive >= 0), those with a turn in progress.
func SetSessions(running, turnActive int64) {
	sessions.WithLabelValues("running").Set(float64(running))
	if turnActive >= 0 {
		sessions.WithLabelValues("turn_active").Set(float64(turnActive))
	}
}
