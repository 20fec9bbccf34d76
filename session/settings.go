package session

import "time"

// ApprovalMode is the policy for asking before a shell call runs.
type ApprovalMode string

// Approval modes.
const (
	ApproveNever          ApprovalMode = "never"
	ApproveAlways         ApprovalMode = "always"
	ApproveUnlessReadOnly ApprovalMode = "unless-readonly"
)

// Policy is the part of a session's settings that the worker owns: what
// needs approval, how long things may take, how much a turn may do. The
// session takes it from the worker that starts its run (a local activity,
// recorded in history, at session start and at every continue-as-new), so
// two bot replicas with different environments cannot give sessions
// different policies, and replay never depends on the environment.
type Policy struct {
	ApprovalMode    ApprovalMode  `json:"approval_mode"`
	ApprovalTimeout time.Duration `json:"approval_timeout"`
	// MaxToolCalls caps shell calls per turn.
	MaxToolCalls int `json:"max_tool_calls"`
	// CommandTimeout is the default per-command timeout.
	CommandTimeout time.Duration `json:"command_timeout"`
	// MaxCommandTimeout caps a timeout the model asks for.
	MaxCommandTimeout time.Duration `json:"max_command_timeout"`
	// HistoryLimitBytes forces continue-as-new past this history size even if
	// Temporal has not suggested it yet.
	HistoryLimitBytes int `json:"history_limit_bytes"`
	// TranscriptLimitBytes caps the transcript kept in workflow state; the
	// oldest entries are dropped first.
	TranscriptLimitBytes int `json:"transcript_limit_bytes,omitempty"`
	// ContextBytes caps the transcript sent to the model per call.
	ContextBytes int `json:"context_bytes,omitempty"`
	// ExecHeartbeat is the heartbeat timeout of exec activities: how long a
	// dead worker goes unnoticed.
	ExecHeartbeat time.Duration `json:"exec_heartbeat,omitempty"`
	// ModelTimeout bounds one model call; ModelAttempts bounds its retries.
	ModelTimeout  time.Duration `json:"model_timeout,omitempty"`
	ModelAttempts int           `json:"model_attempts,omitempty"`
	// IdleSuspend suspends the sandbox after this much idle time (0: never).
	IdleSuspend time.Duration `json:"idle_suspend,omitempty"`
	// Checkpoints is how many ends of turns a session keeps to rewind to
	// or fork from; CheckpointMaxAge drops older ones sooner. The latest
	// is always kept.
	Checkpoints      int           `json:"checkpoints,omitempty"`
	CheckpointMaxAge time.Duration `json:"checkpoint_max_age,omitempty"`
	// TokenBudget is the tokens a session may use (0: no budget); a turn
	// that finds it spent stops before calling the model.
	TokenBudget int `json:"token_budget,omitempty"`
	// Model is the worker's model; Models those a session may pick
	// (/model), the default first.
	Model  string   `json:"model,omitempty"`
	Models []string `json:"models,omitempty"`
}

// Settings are the per-session knobs carried through continue-as-new: the
// worker's Policy plus what the bot knows (who may approve, which backends
// exist, whether sessions are indexed). Policy is embedded, so the JSON is
// one flat object, as recorded histories have it.
type Settings struct {
	Policy
	// Approvers may decide approvals in addition to the owner.
	Approvers []string `json:"approvers,omitempty"`
	// ApproverRoles grant approval rights to holders of these roles.
	ApproverRoles []string `json:"approver_roles,omitempty"`
	// Backends lists the backend names /backend may switch to (empty: any
	// name; the bot checks which ones workers serve).
	Backends []string `json:"backends,omitempty"`
	// Indexed is true when the namespace has the Sandbot* search attributes
	// (see SearchAttributeTypes); the session then keeps them current.
	Indexed bool `json:"indexed,omitempty"`
}

// CommandTimeoutCeiling is the longest any one command may run: the sandbox
// clamps every timeout to it and configuration refuses a larger maximum.
const CommandTimeoutCeiling = 30 * time.Minute

// Defaults for zero Policy fields.
const (
	DefaultApprovalTimeout      = 30 * time.Minute
	DefaultMaxToolCalls         = 50
	DefaultCommandTimeout       = 2 * time.Minute
	DefaultMaxCommandTimeout    = CommandTimeoutCeiling
	DefaultHistoryLimitBytes    = 20 << 20
	DefaultTranscriptLimitBytes = 1 << 20
	DefaultContextBytes         = 256 << 10
	DefaultExecHeartbeat        = 30 * time.Second
	DefaultModelTimeout         = 5 * time.Minute
	DefaultModelAttempts        = 6
	DefaultCheckpoints          = 20
	DefaultCheckpointMaxAge     = 30 * 24 * time.Hour
)

// WithDefaults fills zero fields with documented defaults. IdleSuspend
// stays as it is: zero means never.
func (s Policy) WithDefaults() Policy {
	if s.ApprovalMode == "" {
		s.ApprovalMode = ApproveUnlessReadOnly
	}
	if s.ApprovalTimeout <= 0 {
		s.ApprovalTimeout = DefaultApprovalTimeout
	}
	if s.MaxToolCalls <= 0 {
		s.MaxToolCalls = DefaultMaxToolCalls
	}
	if s.CommandTimeout <= 0 {
		s.CommandTimeout = DefaultCommandTimeout
	}
	if s.MaxCommandTimeout <= 0 {
		s.MaxCommandTimeout = DefaultMaxCommandTimeout
	}
	if s.CommandTimeout > s.MaxCommandTimeout {
		s.CommandTimeout = s.MaxCommandTimeout
	}
	if s.HistoryLimitBytes <= 0 {
		s.HistoryLimitBytes = DefaultHistoryLimitBytes
	}
	if s.TranscriptLimitBytes <= 0 {
		s.TranscriptLimitBytes = DefaultTranscriptLimitBytes
	}
	if s.ContextBytes <= 0 {
		s.ContextBytes = DefaultContextBytes
	}
	if s.ExecHeartbeat <= 0 {
		s.ExecHeartbeat = DefaultExecHeartbeat
	}
	if s.ModelTimeout <= 0 {
		s.ModelTimeout = DefaultModelTimeout
	}
	if s.ModelAttempts <= 0 {
		s.ModelAttempts = DefaultModelAttempts
	}
	if s.Checkpoints <= 0 {
		s.Checkpoints = DefaultCheckpoints
	}
	if s.CheckpointMaxAge <= 0 {
		s.CheckpointMaxAge = DefaultCheckpointMaxAge
	}
	return s
}

// WithDefaults fills zero policy fields with documented defaults.
func (s Settings) WithDefaults() Settings {
	s.Policy = s.Policy.WithDefaults()
	return s
}
