// Package session is the session contract shared by the bot and the worker:
// the names of the session workflow's updates, queries and signals, their
// request and response types, TurnState, the transcript message types, the
// search attributes and task-queue names. It is a leaf: it imports no
// implementation (no agent, sandbox or workflows), so cmd/bot links the
// contract without linking the worker.
//
// Each handler takes exactly one struct and returns one struct, so payloads
// can grow without breaking running sessions. Field names and JSON tags are
// part of the durable format: recorded histories hold them, so renaming a
// tag breaks every running session (see docs/ARCHITECTURE.md, "Sessions
// outlive code").
package session

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// WorkflowName is the registered name of the session workflow type.
const WorkflowName = "Session"

// TaskQueue is the default task queue of session workflows and the model
// activity.
const TaskQueue = "sandbot"

// Update, query and signal names.
const (
	UpdateSendMessage = "send_message"
	UpdateApprove     = "approve"
	UpdatePause       = "pause"
	UpdateCompact     = "compact"
	UpdateResume      = "resume"
	UpdateStop        = "stop"
	UpdateDestroy     = "destroy"
	UpdateSetBackend  = "set_backend"
	UpdateChatRef     = "chat_ref"
	UpdateFork        = "fork"
	UpdateClaimFinal  = "claim_final"
	UpdateClaimWatch  = "claim_watch"
	UpdateRewind      = "rewind"
	UpdateSetTitle    = "set_title"
	UpdateSetModel    = "set_model"

	QueryTurnState = "turn_state"
	QueryHistory   = "history"
	QueryInfo      = "info"
	// QueryToolOutput answers one tool call's arguments and kept output
	// (ToolOutputRequest, ToolOutputResponse): the "View output" button.
	QueryToolOutput = "tool_output"

	SignalDestroy = "destroy"
)

// Location is where a session lives in chat. Its ID is the workflow ID, so
// any bot replica routes any event without a database.
type Location struct {
	// Platform is "slack", "discord" or "console".
	Platform string `json:"platform"`
	// Workspace is the Slack team or Discord guild ("" for DMs/console).
	Workspace string `json:"workspace,omitempty"`
	// Channel is the channel (or DM) ID.
	Channel string `json:"channel"`
	// Thread is the thread root (Slack thread_ts, Discord thread ID).
	Thread string `json:"thread"`
}

// ID returns the session workflow ID for the location, for example
// "session/slack/T1/C1/1700000000.0001". Parts are escaped so that no
// two locations share an ID.
func (l Location) ID() string {
	esc := func(s string) string {
		s = strings.ReplaceAll(s, "%", "%25")
		return strings.ReplaceAll(s, "/", "%2F")
	}
	return fmt.Sprintf("session/%s/%s/%s/%s", esc(l.Platform), esc(l.Workspace), esc(l.Channel), esc(l.Thread))
}

// ParseID is the inverse of Location.ID.
func ParseID(id string) (Location, error) {
	parts := strings.Split(id, "/")
	if len(parts) != 5 || parts[0] != "session" {
		return Location{}, fmt.Errorf("workflows: %q is not a session ID (want session/<platform>/<workspace>/<channel>/<thread>)", id)
	}
	unesc := func(s string) string {
		s = strings.ReplaceAll(s, "%2F", "/")
		return strings.ReplaceAll(s, "%25", "%")
	}
	return Location{Platform: unesc(parts[1]), Workspace: unesc(parts[2]), Channel: unesc(parts[3]), Thread: unesc(parts[4])}, nil
}

// User is a chat user as the bot saw them.
type User struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Roles are platform roles (Discord), used for approver roles.
	Roles []string `json:"roles,omitempty"`
}

// SessionInput starts (or continues) a session.
type SessionInput struct {
	Location Location `json:"location"`
	Owner    User     `json:"owner"`
	Title    string   `json:"title,omitempty"`
	Backend  string   `json:"backend"`
	Settings Settings `json:"settings"`
	// Parent and ForkedAtTurn record lineage for forks.
	Parent       string `json:"parent,omitempty"`
	ForkedAtTurn int    `json:"forked_at_turn,omitempty"`
	// Seed is the transcript and snapshot a fork starts from.
	Seed *ForkSeed `json:"seed,omitempty"`
}

// SessionResult is returned when a session ends.
type SessionResult struct {
	Turns     int  `json:"turns"`
	Destroyed bool `json:"destroyed"`
}

// MaxMessageBytes is the largest accepted chat message.
const MaxMessageBytes = 64 << 10

// MessageRequest is the input of UpdateSendMessage.
type MessageRequest struct {
	// EventID is the platform's own event ID; a redelivered event with the
	// same ID is acknowledged but never starts a second turn.
	EventID string `json:"event_id"`
	User    User   `json:"user"`
	Text    string `json:"text"`
	// Repo is the repository a session's first message names (or its
	// channel's default): the worker clones it before the turn. A session
	// that has one already ignores it.
	Repo *RepoSpec `json:"repo,omitempty"`
	// Ref is the chat message itself (Slack ts, Discord message ID), so the
	// bot can mark it when its turn ends. Not signed: it only says where a
	// reaction goes.
	Ref string `json:"ref,omitempty"`
	// Context is what the thread said that did not reach the session
	// ("name: text" lines): before the bot was first mentioned in it, or,
	// where only mentions reach the bot, since its last turn. With Text
	// within MaxMessageBytes.
	Context string `json:"context,omitempty"`
	// Model is a model the message picked (model=NAME), for this turn and
	// the ones after; it must be one the worker offers.
	Model string `json:"model,omitempty"`
	// Attachments are the files attached to the message; the worker
	// downloads them into the workspace before the turn. With Text and
	// Context within MaxMessageBytes (see AttachmentBytes).
	Attachments []Attachment `json:"attachments,omitempty"`
	// Watch asks for the session's watch lease with the message (see
	// ClaimWatchRequest): the bot that sends a message watches its turn,
	// and one update instead of two keeps a workflow task out of the turn.
	// The message is taken whether the lease is granted or not. Not
	// signed, like Ref: a worker of an older build verifies the message's
	// signature without knowing this field (a signed claim failed every
	// new bot's message to an old worker in the rolling-upgrade test), and
	// all it can do is decide which bot replica draws the turn's card for
	// at most WatchLeaseMax.
	Watch *WatchClaim `json:"watch,omitempty"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// WatchClaim is a watch lease asked for with a message: who asks, and
// for how long from now (within [WatchLeaseMin, WatchLeaseMax]).
type WatchClaim struct {
	Claimer string        `json:"claimer"`
	For     time.Duration `json:"for"`
}

// MessageBytes is what a message counts against MaxMessageBytes: its
// text, the thread context and its attachment descriptors.
func (r MessageRequest) MessageBytes() int {
	n := len(r.Text) + len(r.Context)
	for _, a := range r.Attachments {
		n += AttachmentBytes(a)
	}
	return n
}

// MessageResponse tells the bot which turn will answer the message.
type MessageResponse struct {
	// Turn is the turn number that will take (or took) this message.
	Turn int `json:"turn"`
	// Duplicate is true when EventID was seen before.
	Duplicate bool `json:"duplicate,omitempty"`
	// Queued is true when a turn is running and the message waits for the
	// next one.
	Queued bool `json:"queued,omitempty"`
	// Watch answers the request's Watch as claim_watch would; nil when
	// none was asked for or the session's build keeps no lease with
	// messages (the bot then claims it on its own).
	Watch *ClaimWatchResponse `json:"watch,omitempty"`
}

// Decision is an approval answer.
type Decision string

// Decisions.
const (
	DecisionApprove       Decision = "approve"
	DecisionApproveAlways Decision = "approve_always"
	DecisionReject        Decision = "reject"
)

// ApproveRequest is the input of UpdateApprove.
type ApproveRequest struct {
	CallID   string   `json:"call_id"`
	Decision Decision `json:"decision"`
	Reason   string   `json:"reason,omitempty"`
	User     User     `json:"user"`
	// Click is the platform's identity of the click that decided (Discord's
	// interaction ID, Slack's trigger ID), "" when the platform gives none.
	// Discord delivers a click to every bot replica, and each sends the
	// decision: the session keeps the click with the decision it took and
	// answers the same click again with ErrTypeClickDecided, which the bot
	// takes as the success it is (the click did decide). Requests without
	// it (bots of an older build) are judged as before.
	//
	// It is not signed: workers of the build before it verify the fields
	// they know, and it carries no authority (a request still needs a
	// signature over the call, decision, reason and user, and a repeat is
	// refused all the same, only with another error type).
	Click string `json:"click,omitempty"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// ApproveResponse confirms a decision.
type ApproveResponse struct {
	Command string `json:"command"`
	// Repeat is set by the bot's client (never by the session) when the
	// session answered that this very click had decided the call already
	// (ErrTypeClickDecided): another replica's copy of the click came first.
	Repeat bool `json:"repeat,omitempty"`
}

// ErrTypeClickDecided is the error type with which the workflow refuses a
// decision whose click (ApproveRequest.Click) already decided the call: a
// second replica's copy of one click. A refusal leaves no trace in the
// history, where accepting the copy would add two events per click.
const ErrTypeClickDecided = "ClickDecided"

// PauseRequest, StopRequest, DestroyRequest and ResumeRequest carry who asked.
type (
	PauseRequest struct {
		User User      `json:"user"`
		Auth Signature `json:"auth,omitzero"`
	}
	ResumeRequest struct {
		User User      `json:"user"`
		Auth Signature `json:"auth,omitzero"`
	}
	StopRequest struct {
		User User      `json:"user"`
		Auth Signature `json:"auth,omitzero"`
	}
	DestroyRequest struct {
		User User      `json:"user"`
		Auth Signature `json:"auth,omitzero"`
	}
	// CompactRequest asks for the conversation to be compacted now
	// (/compact).
	CompactRequest struct {
		User User      `json:"user"`
		Auth Signature `json:"auth,omitzero"`
	}
)

// CompactResponse says what a compaction did.
type CompactResponse struct {
	// Compacted is false when there was too little to compact.
	Compacted bool `json:"compacted"`
	// Summary is the note that replaced the older conversation.
	Summary string `json:"summary,omitempty"`
	// Error says why compacting failed, in words for the user.
	Error string `json:"error,omitempty"`
}

// PauseResponse is returned once the session is quiet at a turn boundary.
type PauseResponse struct {
	Turn int `json:"turn"`
}

// StopResponse says whether a turn was running.
type StopResponse struct {
	Stopped bool `json:"stopped"`
	Turn    int  `json:"turn"`
}

// DestroyResponse is returned after the sandbox and snapshots are removed.
type DestroyResponse struct {
	Turns int `json:"turns"`
}

// SetBackendRequest is the input of UpdateSetBackend.
type SetBackendRequest struct {
	Backend string `json:"backend"`
	User    User   `json:"user"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// SetBackendResponse says when the switch applies.
type SetBackendResponse struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Deferred is true when a turn is running; the switch applies after it.
	Deferred bool `json:"deferred,omitempty"`
}

// ChatRefRequest records a chat message the bot posted for a turn, so that a
// restarted bot keeps editing the same status message and never posts a
// second final answer.
type ChatRefRequest struct {
	Turn int `json:"turn"`
	// Kind is ChatRefStatus ("status"), "final", ChatRefApprovalNotice
	// or ChatRefSharedFile.
	Kind string `json:"kind"`
	Ref  string `json:"ref"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// ChatRefApprovalNotice is the ChatRefRequest kind that records, with the
// pending call's ID as Ref, that its approvers were told.
const ChatRefApprovalNotice = "approval_notice"

// NoticeRecordedAlready starts the refusal of a second ChatRefApprovalNotice
// record for the same turn: another replica told the approvers, so the
// refused one must not post.
const NoticeRecordedAlready = "approvers told already"

// ChatRefStatus is the ChatRefRequest kind of a turn's status card. The
// session keeps the first one recorded for a turn: a replica that posted a
// card and was held up recording it past its watch lease (a Temporal
// restart on a loaded machine) may find that the replica which took the
// watch over posted and recorded a card of its own meanwhile. A second
// record with another ref is refused (CardRecordedAlready), so every
// replica agrees on one card; the refused one deletes its own card and
// edits the recorded one from then on.
const ChatRefStatus = "status"

// CardRecordedAlready starts the refusal of a ChatRefStatus record for a
// turn whose card was recorded first with another ref. The refusal names
// that ref (CardRefusal, RecordedCard), so the refused replica can adopt
// it without another query.
const CardRecordedAlready = "card recorded already"

// CardRefusal is the text of the refusal of a card record for turn, whose
// recorded card is ref.
func CardRefusal(turn int, ref string) string {
	return fmt.Sprintf("%s %q: turn %d's status card was recorded first; delete yours and edit that one", CardRecordedAlready, ref, turn)
}

// RecordedCard reads the recorded card's ref out of an error that carries
// a CardRefusal (wrapped in any way that keeps its text). ok is false for
// any other error.
func RecordedCard(err error) (ref string, ok bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	i := strings.Index(msg, CardRecordedAlready+" ")
	if i < 0 {
		return "", false
	}
	q, qerr := strconv.QuotedPrefix(msg[i+len(CardRecordedAlready)+1:])
	if qerr != nil {
		return "", false
	}
	ref, qerr = strconv.Unquote(q)
	if qerr != nil || ref == "" {
		return "", false
	}
	return ref, true
}

// ChatRefResponse is empty.
type ChatRefResponse struct{}

// ClaimFinalRequest asks to be the one bot replica that posts a finished
// turn's answer. Two replicas watching the same turn both ask; the workflow
// grants one, so the answer is posted once.
type ClaimFinalRequest struct {
	Turn int `json:"turn"`
	// Claimer identifies the bot replica (stable for its lifetime).
	Claimer string `json:"claimer"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// ClaimFinalResponse says whether the claimer may post.
type ClaimFinalResponse struct {
	Granted bool `json:"granted"`
	// Holder is the replica that holds the claim when it is not granted.
	Holder string `json:"holder,omitempty"`
	// Posted is true when the answer was already posted (FinalRef is set).
	Posted bool `json:"posted,omitempty"`
	// Earlier is the replica whose claim this grant took over ("" for a
	// claim nobody held). That replica may have posted the answer and died
	// before recording it, so the new holder looks in the thread before it
	// posts (chat.AnswerFinder).
	Earlier string `json:"earlier,omitempty"`
}

// FinalClaimTakeover is how long a claim without a posted answer holds
// before another replica may take it over (its holder died between the
// claim and the post).
const FinalClaimTakeover = 2 * time.Minute

// FinalClaimGrace is how old a final-answer claim must be before the
// holder of the session's watch lease may take it over from a replica
// that lost the lease: longer than a claimed post takes, retries included
// (chat's watcher tries a refused answer again for up to 14 s).
const FinalClaimGrace = 30 * time.Second

// ClaimWatchRequest asks for (or renews, or gives up) the session's watch
// lease: the right to be the one bot replica that follows its turns,
// renders their progress and posts their answers. A replica that holds no
// lease only polls; when the holder dies its lease runs out and another
// replica claims it. The lease lives in the workflow, not in any bot's
// memory, so it survives every process.
type ClaimWatchRequest struct {
	// Claimer identifies the bot replica (stable for its lifetime).
	Claimer string `json:"claimer"`
	// For is how long the lease should last from now; the workflow keeps it
	// within [WatchLeaseMin, WatchLeaseMax].
	For time.Duration `json:"for"`
	// Release gives the lease up at once (the watcher is done), so another
	// replica need not wait for it to run out.
	Release bool `json:"release,omitempty"`
	// Held, with Release, is the end of the hold being given up as the
	// workflow granted it (ClaimWatchResponse.Until). A release whose hold
	// was renewed since — a message of the same replica granted the lease
	// again while the release was on its way, or the release arrived after
	// its call had timed out — is refused (ErrTypeStaleRelease) rather than
	// clearing a lease the replica holds for its next turn: the soak's
	// debug logs showed a turn with no holder right after its message was
	// granted the lease, which a scanning replica then drew. Zero releases
	// whatever this claimer holds, as before. Unsigned, like
	// MessageRequest.Watch: it can only make a release refuse, and a
	// worker of an earlier build, which ignores it, still verifies the
	// fields it signs.
	Held time.Time `json:"held,omitzero"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// ClaimWatchResponse says who holds the watch lease, and until when.
type ClaimWatchResponse struct {
	Granted bool      `json:"granted"`
	Holder  string    `json:"holder,omitempty"`
	Until   time.Time `json:"until,omitzero"`
}

// GrantedTo reports whether the lease was granted to claimer. A message's
// answer can carry another replica's grant: Temporal answers a repeated
// update ID with the first outcome, so a replica sending an event another
// replica sent first reads that replica's grant (the chaos suite's two
// replicas both editing one card, past Slack's per-message pace). A nil
// response grants nothing.
func (r *ClaimWatchResponse) GrantedTo(claimer string) bool {
	return r != nil && r.Granted && r.Holder == claimer
}

// ErrTypeWatchLeaseHeld is the error type with which the workflow rejects
// a watch claim while another replica's lease runs: a rejected update
// leaves no trace in the history, so standby replicas may ask often.
const ErrTypeWatchLeaseHeld = "WatchLeaseHeld"

// ErrTypeStaleRelease is the error type with which the workflow rejects a
// release of a hold that was renewed or ended since (ClaimWatchRequest.Held):
// nothing to give up, and nothing written to the history.
const ErrTypeStaleRelease = "StaleWatchRelease"

// Watch lease bounds.
const (
	// WatchLease is the lease a bot asks for; it renews at a third of it,
	// so another replica takes over within about WatchLease of a holder's
	// death.
	WatchLease    = 15 * time.Second
	WatchLeaseMin = time.Second
	WatchLeaseMax = 5 * time.Minute
)

// ForkRequest is the input of UpdateFork: copy this session into a new one.
type ForkRequest struct {
	Location Location `json:"location"`
	Title    string   `json:"title,omitempty"`
	Backend  string   `json:"backend,omitempty"`
	// AtTurn forks from the checkpoint of that turn (/fork @N) instead of
	// the last completed turn; 0 means the last.
	AtTurn int  `json:"at_turn,omitempty"`
	User   User `json:"user"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// ForkResponse names the new session.
type ForkResponse struct {
	WorkflowID string `json:"workflow_id"`
	AtTurn     int    `json:"at_turn"`
	Backend    string `json:"backend"`
}

// ForkSeed is what a fork starts from.
type ForkSeed struct {
	Transcript  []Message `json:"transcript"`
	Snapshot    string    `json:"snapshot,omitempty"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	// Repo is the source's repository, its base snapshot copied under
	// the fork's own key and without the source's pull request: a fork
	// pushes its own branch.
	Repo *Repo `json:"repo,omitempty"`
}

// RewindRequest is the input of UpdateRewind (/rewind N): bring the
// workspace and the conversation back to the end of turn Turn, from the
// checkpoint the session kept for it. Later turns are undone; the
// transcript records who rewound and what was undone.
type RewindRequest struct {
	Turn int  `json:"turn"`
	User User `json:"user"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// RewindResponse says what a rewind did.
type RewindResponse struct {
	// Turn is the turn rewound to; Undone counts the turns undone.
	Turn   int `json:"turn"`
	Undone int `json:"undone"`
}

// Checkpoint is the end of a completed turn, which the session can rewind
// to or fork from (see Info.Checkpoints).
type Checkpoint struct {
	Turn int       `json:"turn"`
	At   time.Time `json:"at"`
	// Files and Bytes describe the workspace then (0 when its snapshot
	// did not say, or it was empty).
	Files int   `json:"files,omitempty"`
	Bytes int64 `json:"bytes,omitempty"`
}

// MaxTitleRunes bounds a session's title (/title): Discord thread names
// take 100 characters.
const MaxTitleRunes = 100

// SetTitleRequest is the input of UpdateSetTitle (/title TEXT).
type SetTitleRequest struct {
	Title string `json:"title"`
	User  User   `json:"user"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// SetTitleResponse is the title before and after.
type SetTitleResponse struct {
	From string `json:"from,omitempty"`
	To   string `json:"to"`
}

// SetModelRequest is the input of UpdateSetModel (/model NAME): the model
// the session's next turns use, one of Settings.Models.
type SetModelRequest struct {
	Model string `json:"model"`
	User  User   `json:"user"`
	// Auth is the bot's signature (see Signature).
	Auth Signature `json:"auth,omitzero"`
}

// SetModelResponse is the model before and after; Deferred when a turn
// runs (it keeps its model; the next turn takes the new one).
type SetModelResponse struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Deferred bool   `json:"deferred,omitempty"`
}
