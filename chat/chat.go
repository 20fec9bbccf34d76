// Package chat is the platform-neutral bot core. It turns normalized chat
// events (Message, Action, Command) into calls on session workflows, watches
// running turns by polling their turn state, and renders that state as a
// neutral Card that each platform adapter converts with its own limits.
//
// Adapters (chat/slack, chat/discord, chat/console) normalize at the edge,
// acknowledge the platform within its deadline, and then hand the event to
// Core (HandleMessage, HandleCommand, HandleAction; Resume at start-up).
// They implement only the small interfaces declared here (Poster, plus the
// optional ThreadStarter, Mentioner, ThreadLinker); everything about
// sessions, commands, approvals, progress and dedupe lives once, in this
// package. Sessions is the core's view of the session workflows;
// TemporalSessions implements it with the Temporal client.
package chat

import (
	"context"
	"time"

	"github.com/sandbot/sandbot/session"
)

// Thread identifies a session's chat thread. It is the session's Location:
// its ID() is the workflow ID.
type Thread = session.Location

// User is a chat user.
type User = session.User

// Message is a normalized chat message addressed to the bot.
type Message struct {
	// EventID is the platform's own ID for the event (Slack event_ts or
	// client_msg_id, Discord message ID). Redeliveries carry the same ID.
	EventID string
	Thread  Thread
	User    User
	// Text has the bot mention removed and surrounding space trimmed.
	Text string
	// Admin is true when the platform says the user may act for everyone
	// (for example a configured approver role); the workflow checks again.
	Admin bool
}

// Action is a normalized button click or modal submission.
type Action struct {
	// ID is one of the Action* constants.
	ID string
	// Value is what the button carried (see EncodeApproval).
	Value  string
	Reason string
	User   User
	Thread Thread
	// Reply answers the clicking user privately (ephemeral). Adapters must
	// set it.
	Reply func(ctx context.Context, text string) error
}

// Action IDs on approval buttons.
const (
	ActionApprove       = "approve"
	ActionApproveAlways = "approve_always"
	ActionReject        = "reject"
)

// Poster is what the core needs from a platform to show a session.
//
// Methods may be called concurrently, also for the same thread (a command
// reply can race the turn watcher's edit), but the core never edits one
// message from two goroutines at once and never edits a message before its
// Post returned. Errors are logged by the core and never shown to users, so
// they may carry platform detail (but no tokens).
type Poster interface {
	// Post sends a new message to the thread and returns a reference that
	// Edit accepts (and that survives a bot restart: it is recorded in the
	// session workflow).
	Post(ctx context.Context, th Thread, c Card) (ref string, err error)
	// Edit replaces a message posted by Post.
	Edit(ctx context.Context, th Thread, ref string, c Card) error
	// PostText sends a (possibly long) Markdown answer. The adapter splits
	// it or uploads it as a file within its platform's limits, and returns
	// the reference of the first message.
	PostText(ctx context.Context, th Thread, markdown string) (ref string, err error)
}

// ThreadStarter is an optional Poster capability: open a new thread next to
// from (same channel), titled title, and return its location. /fork needs
// it, because a fork lives in its own thread; on a Poster without it /fork
// answers that forking is not supported there.
type ThreadStarter interface {
	StartThread(ctx context.Context, from Thread, title string) (Thread, error)
}

// Mentioner is an optional Poster capability: how to mention a user in Card
// text on this platform (for example "<@U123>"). Without it the core writes
// "@name".
type Mentioner interface {
	Mention(u User) string
}

// ThreadLinker is an optional Poster capability: a Markdown link to a
// thread, used by /sessions and /fork replies. Without it the core names
// the thread by its ID.
type ThreadLinker interface {
	ThreadLink(th Thread) string
}

// Limiter is an optional shared budget (for example a workspace-wide rate
// for chat.update). Wait blocks until one more call may be made or ctx ends.
// *rate.Limiter from golang.org/x/time/rate satisfies it.
type Limiter interface {
	Wait(ctx context.Context) error
}

// Budget is a platform's pacing and size budget for the turn watcher and
// the renderer. Zero fields take DefaultBudget's values.
type Budget struct {
	// MinEditInterval is the least time between the end of one edit of a
	// status message and the start of the next (Slack: 1.5 s, Discord: 1 s).
	// States that arrive meanwhile are coalesced: only the latest is sent.
	MinEditInterval time.Duration
	// EditBurst lets up to this many edits of one message go out back to
	// back after a quiet spell, refilled at one per MinEditInterval (a
	// token bucket). 0 or 1 means strict spacing. Discord allows about 5
	// edits per 5 s per channel, and every session thread is a channel.
	EditBurst int
	// Limiter, if set, is waited on before every Post, Edit and PostText the
	// watcher makes, so several threads can share a platform-wide budget.
	Limiter Limiter
	// MaxButtonValue is the longest Button.Value the platform carries
	// (Discord: MaxDiscordButtonValue; 0: no limit). Approval values that
	// would not fit are encoded in a shorter, thread-relative form (see
	// EncodeApprovalCompact).
	MaxButtonValue int
	// MaxCardChars bounds the text of one status Card (default 3500, which
	// fits Slack's practical ~4000-character message and Discord's
	// 4000-character components budget).
	MaxCardChars int
}

// DefaultBudget is used for platforms CoreConfig.Budgets does not name, and
// fills zero fields of the ones it does.
var DefaultBudget = Budget{MinEditInterval: time.Second, MaxCardChars: 3500}

func (b Budget) withDefaults() Budget {
	if b.MinEditInterval <= 0 {
		b.MinEditInterval = DefaultBudget.MinEditInterval
	}
	if b.MaxCardChars <= 0 {
		b.MaxCardChars = DefaultBudget.MaxCardChars
	}
	return b
}

// Card is a neutral rich message: a title and blocks. Converters in each
// adapter turn it into Slack blocks or Discord components within their
// limits, always with fallback text.
type Card struct {
	Title  string  `json:"title"`
	Blocks []Block `json:"blocks,omitempty"`
}

// BlockKind says what a Block holds.
type BlockKind string

// Block kinds.
const (
	BlockText    BlockKind = "text"    // Markdown text
	BlockCode    BlockKind = "code"    // preformatted text
	BlockFields  BlockKind = "fields"  // label/value pairs
	BlockDivider BlockKind = "divider" // a rule
	BlockActions BlockKind = "actions" // buttons
	BlockContext BlockKind = "context" // small print
)

// Block is one part of a Card. Text of BlockText and BlockContext is
// Markdown (**bold**, _italic_, `code`, [text](url), "- " lists), which
// converters translate to their platform's dialect; BlockCode text is raw
// and the converter fences it.
type Block struct {
	Kind    BlockKind `json:"kind"`
	Text    string    `json:"text,omitempty"`
	Fields  []Field   `json:"fields,omitempty"`
	Buttons []Button  `json:"buttons,omitempty"`
}

// Field is a label/value pair.
type Field struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// ButtonStyle colours a button.
type ButtonStyle string

// Button styles.
const (
	StyleDefault ButtonStyle = ""
	StylePrimary ButtonStyle = "primary"
	StyleDanger  ButtonStyle = "danger"
)

// Button is an interactive button. ID is an Action* constant and Value what
// the click carries back (it must fit the platform's limits: Discord's
// custom_id is 100 characters including the ID).
type Button struct {
	ID    string      `json:"id"`
	Label string      `json:"label"`
	Style ButtonStyle `json:"style,omitempty"`
	Value string      `json:"value"`
}
