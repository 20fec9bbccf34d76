package workflows

import (
	"time"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// State is everything a session carries through continue-as-new. It must
// stay well under Temporal's payload limits: the transcript is capped by
// Settings.TranscriptLimitBytes and every tool result in it by
// agent.MaxToolResultBytes.
type State struct {
	Location     session.Location `json:"location"`
	Owner        session.User     `json:"owner"`
	Title        string           `json:"title,omitempty"`
	Settings     session.Settings `json:"settings"`
	Backend      string           `json:"backend"`
	Parent       string           `json:"parent,omitempty"`
	ForkedAtTurn int              `json:"forked_at_turn,omitempty"`
	CreatedAt    time.Time        `json:"created_at"`

	// Turn is the number of the last turn started.
	Turn int `json:"turn"`
	// Version increases on every visible change (see TurnState.Version).
	Version int64 `json:"version"`
	// Runs counts workflow runs (continue-as-new generations).
	Runs int `json:"runs"`

	Transcript []session.HistoryEntry `json:"transcript,omitempty"`
	// Appended counts the transcript entries ever appended, so an entry
	// keeps its position (Appended-len(Transcript) is the first one's)
	// while the oldest are trimmed.
	Appended int `json:"appended,omitempty"`
	// ModelRef is the transcript the model activity stored at the last
	// call, whose first message is entry ModelRefFirst (a position as
	// Appended counts them); the next call sends it and what came after.
	ModelRef      *agent.TranscriptRef `json:"model_ref,omitempty"`
	ModelRefFirst int                  `json:"model_ref_first,omitempty"`
	// CompactDue is set when the last model call had to leave whole
	// exchanges out; the conversation is compacted at the turn's end.
	CompactDue bool `json:"compact_due,omitempty"`
	// Compactions counts the summaries that replaced older conversation.
	Compactions int `json:"compactions,omitempty"`
	// Queue holds messages waiting for the next turn.
	Queue []QueuedMessage `json:"queue,omitempty"`
	// Seen remembers recent event IDs and the turn that took them.
	Seen []SeenEvent `json:"seen,omitempty"`
	// AlwaysApproved holds commands approved for the rest of the session.
	AlwaysApproved []string `json:"always_approved,omitempty"`
	// Decisions is the recent approval log (capped).
	Decisions []session.DecisionRecord `json:"decisions,omitempty"`

	// Watch is the session's watch lease (see session.UpdateClaimWatch).
	Watch WatchLease `json:"watch,omitzero"`

	Handle      *sandbox.Handle `json:"handle,omitempty"`
	Snapshot    string          `json:"snapshot,omitempty"`
	Fingerprint string          `json:"fingerprint,omitempty"`
	// Stale are superseded snapshots waiting to be deleted (not while a
	// fork may still be copying one).
	Stale []string `json:"stale,omitempty"`
	// Checkpoints are the ends of completed turns kept for /rewind and
	// /fork @N, oldest first (runs since changeCheckpoints).
	Checkpoints []Checkpoint `json:"checkpoints,omitempty"`
	// PendingBackend is a switch waiting for the next turn boundary.
	PendingBackend string `json:"pending_backend,omitempty"`
	// Carried are notices made between turns that the next turn's card
	// shows too (see noticeNext): a finished turn's card is not drawn
	// again, so there they would go unseen.
	Carried []string `json:"carried,omitempty"`
	Paused  bool     `json:"paused,omitempty"`
	// Suspended is true when the idle sandbox was suspended.
	Suspended bool `json:"suspended,omitempty"`
	// Confinement is how the sandbox's backend confines commands, as the
	// backend last said (shown by /status).
	Confinement string `json:"confinement,omitempty"`
	// SandboxWarning is set when that confinement is weakened (see
	// sandbox.EnsureResult.Warning).
	SandboxWarning string `json:"sandbox_warning,omitempty"`

	// Repo is the repository the session works on; PendingRepo one
	// waiting to be cloned; PRs counts the pull requests it opened (the
	// n of its branch sandbot/<id>-<n>).
	Repo        *session.Repo `json:"repo,omitempty"`
	PendingRepo *PendingRepo  `json:"pending_repo,omitempty"`
	PRs         int           `json:"prs,omitempty"`

	// Model is the session's pick (/model, model=NAME); "" is the
	// worker's model.
	Model string `json:"model,omitempty"`

	// Usage is what the session's model calls cost so far.
	Usage session.Usage `json:"usage,omitzero"`
	// Last is the current (or last) turn as the bot sees it.
	Last session.TurnState `json:"last"`
}

// QueuedMessage is a message waiting for a turn.
type QueuedMessage struct {
	EventID string       `json:"event_id"`
	User    session.User `json:"user"`
	Text    string       `json:"text"`
	At      time.Time    `json:"at"`
	// Ref is the chat message (see session.MessageRequest.Ref).
	Ref string `json:"ref,omitempty"`
	// Context is the thread's earlier conversation, for a session's first
	// message (see session.MessageRequest.Context).
	Context string `json:"context,omitempty"`
	// Attachments are the message's files, saved into the workspace when
	// its turn starts.
	Attachments []session.Attachment `json:"attachments,omitempty"`
}

// SeenEvent maps a processed event ID to its turn.
type SeenEvent struct {
	EventID string `json:"event_id"`
	Turn    int    `json:"turn"`
}

// Limits on what State keeps.
const (
	maxSeen      = 512
	maxDecisions = 200
)

func (st *State) seenTurn(eventID string) (int, bool) {
	if eventID == "" {
		return 0, false
	}
	for _, s := range st.Seen {
		if s.EventID == eventID {
			return s.Turn, true
		}
	}
	for _, q := range st.Queue {
		if q.EventID == eventID {
			return st.Turn + 1, true
		}
	}
	return 0, false
}

func (st *State) remember(eventID string, turn int) {
	if eventID == "" {
		return
	}
	st.Seen = append(st.Seen, SeenEvent{EventID: eventID, Turn: turn})
	if len(st.Seen) > maxSeen {
		st.Seen = append([]SeenEvent(nil), st.Seen[len(st.Seen)-maxSeen:]...)
	}
}

func (st *State) recordDecision(d session.DecisionRecord) {
	st.Decisions = append(st.Decisions, d)
	if len(st.Decisions) > maxDecisions {
		st.Decisions = append([]session.DecisionRecord(nil), st.Decisions[len(st.Decisions)-maxDecisions:]...)
	}
}

// appendTranscript adds an entry and trims the oldest entries past the
// transcript limit, never leaving a tool result without its call.
func (st *State) appendTranscript(e session.HistoryEntry) {
	st.Appended = max(st.Appended, len(st.Transcript)) + 1
	st.Transcript = append(st.Transcript, e)
	limit := st.Settings.TranscriptLimitBytes
	total := 0
	for _, t := range st.Transcript {
		total += entrySize(t)
	}
	drop := 0
	for total > limit && drop < len(st.Transcript)-1 {
		total -= entrySize(st.Transcript[drop])
		drop++
	}
	// Do not start on an orphaned tool result.
	for drop < len(st.Transcript)-1 && st.Transcript[drop].Msg.Role == session.RoleTool {
		drop++
	}
	if drop > 0 {
		st.Transcript = append([]session.HistoryEntry(nil), st.Transcript[drop:]...)
	}
}

// firstPosition is the position of Transcript[0] as Appended counts.
func (st *State) firstPosition() int {
	return max(st.Appended, len(st.Transcript)) - len(st.Transcript)
}

func entrySize(e session.HistoryEntry) int {
	n := len(e.Msg.Content) + len(e.Msg.User) + 32 + 128*len(e.Msg.Images)
	for _, c := range e.Msg.ToolCalls {
		n += len(c.Arguments) + len(c.ID) + len(c.Name)
	}
	return n
}

func (st *State) alwaysApproved(commands []string) bool {
	if len(commands) == 0 {
		return false
	}
	for _, c := range commands {
		found := false
		for _, a := range st.AlwaysApproved {
			if a == c {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (st *State) addAlwaysApproved(commands []string) {
	for _, c := range commands {
		if !st.alwaysApproved([]string{c}) {
			st.AlwaysApproved = append(st.AlwaysApproved, c)
		}
	}
}

// mayApprove reports whether u may decide approvals in this session.
func (st *State) mayApprove(u session.User) bool {
	if u.ID == "" {
		return false
	}
	if u.ID == st.Owner.ID {
		return true
	}
	for _, a := range st.Settings.Approvers {
		if a == u.ID {
			return true
		}
	}
	for _, r := range u.Roles {
		for _, ar := range st.Settings.ApproverRoles {
			if r == ar {
				return true
			}
		}
	}
	return false
}

// WatchLease is who may follow the session's turns in chat, until when.
type WatchLease struct {
	Holder string    `json:"holder,omitempty"`
	Until  time.Time `json:"until,omitzero"`
}
