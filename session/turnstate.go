package session

import (
	"time"
)

// TurnStatus is the state of the current (or last) turn.
type TurnStatus string

// Turn statuses.
const (
	StatusIdle             TurnStatus = "idle"
	StatusThinking         TurnStatus = "thinking"
	StatusAwaitingApproval TurnStatus = "awaiting_approval"
	StatusComplete         TurnStatus = "complete"
	StatusFailed           TurnStatus = "failed"
)

// Active reports whether a turn is in progress.
func (s TurnStatus) Active() bool {
	return s == StatusThinking || s == StatusAwaitingApproval
}

// CallStatus is the state of one tool call.
type CallStatus string

// Tool call statuses.
const (
	CallPending          CallStatus = "pending"
	CallAwaitingApproval CallStatus = "awaiting_approval"
	CallRunning          CallStatus = "running"
	CallCompleted        CallStatus = "completed"
	CallRejected         CallStatus = "rejected"
	CallFailed           CallStatus = "failed"
)

// MaxCallOutput caps the output kept per tool call in TurnState.
const MaxCallOutput = 4000

// CallOutput is out as ToolCallState.Output keeps it: its last
// MaxCallOutput bytes, cut at a rune boundary and marked with "…" when
// cut (the end of a command's output says most about how it went).
func CallOutput(out string) string {
	if len(out) <= MaxCallOutput {
		return out
	}
	cut := len(out) - MaxCallOutput
	for cut < len(out) && (out[cut]&0xC0) == 0x80 {
		cut++
	}
	return "…" + out[cut:]
}

// ToolCallState is one tool call of the current turn, keyed by CallID.
type ToolCallState struct {
	CallID    string     `json:"call_id"`
	Name      string     `json:"name"`
	Arguments string     `json:"arguments"`
	Commands  []string   `json:"commands,omitempty"`
	Status    CallStatus `json:"status"`
	// Output is the combined rendering of the commands' output, capped at
	// MaxCallOutput characters (tail kept).
	Output    string        `json:"output,omitempty"`
	ExitCode  *int          `json:"exit_code,omitempty"`
	Duration  time.Duration `json:"duration,omitempty"`
	StartedAt time.Time     `json:"started_at,omitzero"`
	// EndedAt is when the call reached a final status.
	EndedAt time.Time `json:"ended_at,omitzero"`
	// Decision is the approval decision, if one was asked for.
	Decision *DecisionRecord `json:"decision,omitempty"`
	// Error explains a failed call (bad arguments, sandbox error...).
	Error string `json:"error,omitempty"`
}

// PendingApproval is an approval the session waits for.
type PendingApproval struct {
	CallID    string    `json:"call_id"`
	Command   string    `json:"command"`
	Reason    string    `json:"reason"`
	AskedAt   time.Time `json:"asked_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// DecisionRecord is a recorded approval decision.
type DecisionRecord struct {
	CallID   string    `json:"call_id"`
	Command  string    `json:"command"`
	Decision Decision  `json:"decision"`
	Reason   string    `json:"reason,omitempty"`
	User     User      `json:"user"`
	At       time.Time `json:"at"`
	// Expired is true when nobody answered in time; Decision is then reject.
	Expired bool `json:"expired,omitempty"`
	// Auto is true when a standing "approve always" covered the call.
	Auto bool `json:"auto,omitempty"`
	Turn int  `json:"turn"`
	// Click is the platform's identity of the click that decided
	// (ApproveRequest.Click), so a copy of it is known as the same click.
	Click string `json:"click,omitempty"`
}

// TurnState is what the bot polls (QueryTurnState). Version changes on every
// visible change, so a poller renders only when it moves.
type TurnState struct {
	Turn int `json:"turn"`
	// Usage is what this turn's model calls cost, as the model reported.
	Usage   Usage      `json:"usage,omitzero"`
	Version int64      `json:"version"`
	Status  TurnStatus `json:"status"`
	// ToolCalls are in the order the model asked for them.
	ToolCalls []ToolCallState  `json:"tool_calls,omitempty"`
	Pending   *PendingApproval `json:"pending_approval,omitempty"`
	FinalText string           `json:"final_text,omitempty"`
	// Stopped is true when a user stopped the turn (Status is complete).
	Stopped bool `json:"stopped,omitempty"`
	// Error explains a failed turn in words fit for the user.
	Error string `json:"error,omitempty"`
	// Notices are user-facing events of this turn (sandbox restored, backend
	// switched, approval expired, message batched...).
	Notices []string `json:"notices,omitempty"`
	Backend string   `json:"backend"`
	// PendingBackend is a requested switch not yet applied.
	PendingBackend string `json:"pending_backend,omitempty"`
	// Queued counts messages waiting for the next turn.
	Queued    int       `json:"queued,omitempty"`
	Paused    bool      `json:"paused,omitempty"`
	Destroyed bool      `json:"destroyed,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// StatusRef and FinalRef are the chat messages the bot recorded for
	// this turn (see UpdateChatRef).
	StatusRef string `json:"status_ref,omitempty"`
	FinalRef  string `json:"final_ref,omitempty"`
	// FinalClaim is the bot replica allowed to post the final answer, and
	// FinalClaimAt when it claimed (see UpdateClaimFinal).
	FinalClaim   string    `json:"final_claim,omitempty"`
	FinalClaimAt time.Time `json:"final_claim_at,omitzero"`
	// Watcher holds the session's watch lease until WatchUntil (see
	// UpdateClaimWatch); empty when nobody does.
	Watcher    string    `json:"watcher,omitempty"`
	WatchUntil time.Time `json:"watch_until,omitzero"`
	// AwaitingPost is true when this turn has ended and its answer was
	// not posted yet: a bot must still post it. Only sessions run by
	// builds that keep the watch lease set it.
	AwaitingPost bool `json:"awaiting_post,omitempty"`
	// MessageRefs are the chat messages this turn answers (see
	// MessageRequest.Ref).
	MessageRefs []string `json:"message_refs,omitempty"`
	// ApprovalNoticed is the pending call whose approvers a bot told with
	// a new message (ChatRefApprovalNotice), so no other replica, and no
	// restarted bot, tells them again.
	ApprovalNoticed string `json:"approval_noticed,omitempty"`
	// Previous is how the turn before this one ended, for a bot that saw
	// it running but not ending (it ended between two polls).
	Previous *TurnEnd `json:"previous,omitempty"`
	// Shared are the files this turn's share_file calls put up for the
	// thread, in call order.
	Shared []SharedFile `json:"shared,omitempty"`
}

// TurnEnd is how a turn ended.
type TurnEnd struct {
	Turn      int        `json:"turn"`
	Status    TurnStatus `json:"status"`
	Stopped   bool       `json:"stopped,omitempty"`
	Error     string     `json:"error,omitempty"`
	FinalText string     `json:"final_text,omitempty"`
	// FinalRef, FinalClaim and FinalClaimAt carry the turn's answer
	// bookkeeping over into the next turn: the replica that posted the
	// answer may record it after the user already started the next turn,
	// and a replica that missed the turn's end claims before it posts
	// (so the answer is posted once).
	FinalRef     string    `json:"final_ref,omitempty"`
	FinalClaim   string    `json:"final_claim,omitempty"`
	FinalClaimAt time.Time `json:"final_claim_at,omitzero"`
	// StatusRef is the turn's status card as recorded (the first recorded
	// wins), so a replica that posted another card for the turn and could
	// not record it before the turn ended still learns it is not the
	// turn's card, and deletes it.
	StatusRef string `json:"status_ref,omitempty"`
	// StartedAt, EndedAt and Usage are the turn's, so a replica that
	// finishes the card of a turn that ended while no replica watched it
	// (the next turn has begun) draws the card under the same key, with
	// the same footer.
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	Usage     Usage     `json:"usage,omitzero"`
}

// HistoryRequest is the (optional) argument of QueryHistory.
type HistoryRequest struct {
	// Last limits the answer to the last N entries (0: all).
	Last int `json:"last,omitempty"`
}

// HistoryEntry is one line of the visible transcript.
type HistoryEntry struct {
	Turn int       `json:"turn"`
	At   time.Time `json:"at"`
	Msg  Message   `json:"message"`
}

// Info is the answer of QueryInfo: session metadata for /status and lists.
type Info struct {
	WorkflowID   string           `json:"workflow_id"`
	Location     Location         `json:"location"`
	Owner        User             `json:"owner"`
	Title        string           `json:"title,omitempty"`
	Backend      string           `json:"backend"`
	Turns        int              `json:"turns"`
	Status       TurnStatus       `json:"status"`
	Parent       string           `json:"parent,omitempty"`
	ForkedAtTurn int              `json:"forked_at_turn,omitempty"`
	CreatedAt    time.Time        `json:"created_at"`
	Snapshot     string           `json:"snapshot,omitempty"`
	Decisions    []DecisionRecord `json:"decisions,omitempty"`
	Runs         int              `json:"runs"`
	// Suspended is true while the idle sandbox is suspended.
	Suspended bool `json:"suspended,omitempty"`
	// Confinement says how the sandbox confines commands ("" until the
	// session first used one, or for a backend that does not say).
	Confinement string `json:"confinement,omitempty"`
	// SandboxWarning is set when the sandbox is unconfined or shares the
	// host's network.
	SandboxWarning string `json:"sandbox_warning,omitempty"`
	// Usage is what the session's model calls cost so far.
	Usage Usage `json:"usage,omitzero"`
	// Checkpoints are the ends of turns the session keeps, oldest first:
	// /rewind and /fork @N take one of them.
	Checkpoints []Checkpoint `json:"checkpoints,omitempty"`
	// Repo is the repository the session works on, if any.
	Repo *Repo `json:"repo,omitempty"`
	// Model is the model the session's turns use; Models those it may
	// switch to (/model).
	Model  string   `json:"model,omitempty"`
	Models []string `json:"models,omitempty"`
}

// Usage is the token accounting of model calls, as the model endpoint
// reported it (an endpoint that reports none leaves it zero).
type Usage struct {
	Calls            int `json:"calls,omitempty"`
	PromptTokens     int `json:"prompt_tokens,omitempty"`
	CompletionTokens int `json:"completion_tokens,omitempty"`
}

// Total is prompt plus completion tokens.
func (u Usage) Total() int { return u.PromptTokens + u.CompletionTokens }

// Prices are what a deployment pays its model endpoint, in USD per
// million tokens; zero prices show tokens only.
type Prices struct {
	Input, Output float64
}

// Cost is what u cost at p, and whether p says anything.
func (u Usage) Cost(p Prices) (float64, bool) {
	if p.Input <= 0 && p.Output <= 0 {
		return 0, false
	}
	return float64(u.PromptTokens)*p.Input/1e6 + float64(u.CompletionTokens)*p.Output/1e6, true
}

// Add returns u plus one call's prompt and completion tokens.
func (u Usage) Add(prompt, completion int) Usage {
	return Usage{Calls: u.Calls + 1, PromptTokens: u.PromptTokens + prompt, CompletionTokens: u.CompletionTokens + completion}
}
