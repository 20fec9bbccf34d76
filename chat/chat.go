// Package chat is the platform-neutral bot core. It turns normalized chat
// events (Message, Action, Command) into calls on session workflows, watches
// running turns by polling their turn state, and renders that state as a
// neutral Card that each platform adapter converts with its own limits.
//
// Adapters (chat/slack, chat/discord, chat/console) normalize at the edge,
// acknowledge the platform within its deadline, and then hand the event to
// the core through Handler (HandleMessage, HandleCommand, HandleAction;
// Resume at start-up). They implement only the small interfaces declared
// here (Poster, plus the optional ThreadStarter, Mentioner, ThreadLinker);
// everything about sessions, commands, approvals, progress and dedupe
// lives once, in this package. Sessions is the core's view of the session
// workflows; TemporalSessions implements it with the Temporal client.
//
// The core is a few small parts: Core routes events (core.go); commands
// are a table with one file per command (commands.go, cmd_*.go); the turn
// watcher follows a running turn and renders it (watch.go, watcher*.go,
// render.go); approvals round-trip through button values (approval.go).
package chat

import (
	"context"
	"slices"
	"strings"
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
	// Ref is the message itself (Slack ts, Discord message ID), for the
	// reactions that show its turn's state; "" where there is none.
	Ref string
	// Context is what was said in the thread before the bot was first
	// mentioned in it, oldest first: the adapter fills it only when the
	// message would start a session in a thread that already had a
	// conversation.
	Context []ContextLine
	// Admin is true when the platform says the user may act for everyone
	// (for example a configured approver role); the workflow checks again.
	Admin bool
	// Files are the files attached to the message, as the platform
	// described them; the worker downloads them into the workspace.
	Files []session.Attachment
	// Backend is the sandbox backend of the session this message starts,
	// when the front end asked its user (the terminal's New session); ""
	// takes the configured default. Once the session exists it is
	// ignored: /backend switches it.
	Backend string
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
	// Click is the platform's identity of the click (Discord's interaction
	// ID, Slack's trigger ID), "" if it gives none. Every replica that
	// receives one click passes the same Click, so the session knows a copy
	// of a click that decided already (session.ApproveRequest.Click).
	Click string
	// Reply answers the clicking user privately (ephemeral). Adapters must
	// set it.
	Reply func(ctx context.Context, text string) error
}

// Action IDs on approval buttons.
const (
	ActionApprove       = "approve"
	ActionApproveAlways = "approve_always"
	ActionReject        = "reject"
	// ActionStop is the Stop button of a running turn's card: what /stop
	// does. Its value is the session's workflow ID (or empty, for the
	// click's thread).
	ActionStop = "stop"
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

// CardFinder is an optional Poster capability: the refs of the status
// cards in th whose Card.Key is key, oldest first, among the messages
// posted after the message after (the turn's first message; "": the whole
// thread). A replica that did not
// start a turn's watch itself looks before it posts the turn's first card:
// a replica that died between posting a card and recording it
// (session.ChatRefStatus) left that card in the thread, and a second one
// would show the turn twice (the chaos suite: every bot killed the moment
// the user clicked Approve on a card not yet recorded).
type CardFinder interface {
	FindCards(ctx context.Context, th Thread, key, after string) ([]string, error)
}

// AnswerFinder is an optional Poster capability: the ref of the first
// message of an answer PostText posted in th with exactly this markdown,
// among this bot's messages after the message after and before the
// message before ("": no bound), or "" when there is none. A replica that
// takes a turn's answer claim over from another
// (session.ClaimFinalResponse.Earlier) looks before it posts: the other
// may have posted the answer and died before recording it, and the answer
// would show twice (the chaos soak under faults: fork f05's answer).
// Bounded by the next turn's first message, an equal answer of a later
// turn ("Done.") is not taken for this turn's.
type AnswerFinder interface {
	FindAnswer(ctx context.Context, th Thread, markdown, after, before string) (string, error)
}

// Attacher is an optional Poster capability: put a text file into the
// thread (Slack files upload, a Discord attachment). The watcher attaches
// a card's Attachments before it shows the card; on a Poster without it,
// the file's text is posted with PostText instead.
type Attacher interface {
	Attach(ctx context.Context, th Thread, a Attachment) error
}

// FileSharer is an optional Poster capability: post a workspace file the
// agent shared (the share_file tool) into the thread as a file (Slack
// files upload v2, a Discord message with an attachment). On a Poster
// without it (the terminal), the watcher posts the file's path and size.
type FileSharer interface {
	ShareFile(ctx context.Context, th Thread, f SharedFile) error
}

// SharedFile is a file the agent shared, with its bytes.
type SharedFile struct {
	// Name is the file's base name; Path its workspace path.
	Name, Path string
	MimeType   string
	Data       []byte
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

// Handler is the core as every adapter drives it; *Core implements it. An
// adapter's Run takes one and calls it from its event goroutines, after
// acknowledging the platform. Methods are safe for concurrent use.
type Handler interface {
	// HandleMessage handles a message addressed to the bot: a command, or
	// a message for the thread's session.
	HandleMessage(ctx context.Context, p Poster, m Message) error
	// HandleCommand runs a command the platform parsed itself (native
	// slash commands) and returns the answer for the adapter to deliver.
	HandleCommand(ctx context.Context, p Poster, th Thread, u User, cmd Command) (Reply, error)
	// HandleAction answers a button click or modal submission.
	HandleAction(ctx context.Context, p Poster, a Action) error
	// Resume watches again the platform's turns that were running when
	// the bot last stopped; adapters call it once they are connected.
	Resume(ctx context.Context, p Poster, platform string) error
}

var _ Handler = (*Core)(nil)

// Reactions the core puts on a user's message: working while its turn
// runs, then how it ended.
const (
	ReactionWorking = "👀"
	ReactionDone    = "✅"
	ReactionFailed  = "❌"
	ReactionStopped = "⏹️"
)

// Reactor is an optional Poster capability: react to a message (Slack
// reactions, Discord reactions) with one of the Reaction* emoji.
type Reactor interface {
	React(ctx context.Context, th Thread, ref, emoji string) error
	Unreact(ctx context.Context, th Thread, ref, emoji string) error
}

// Notifier is an optional Poster capability for a platform that posts
// with mentions silenced (Discord): post text that notifies exactly these
// users. Where a mention in text always notifies (Slack), PostText does.
type Notifier interface {
	Notify(ctx context.Context, th Thread, text string, users []User) (string, error)
}

// TakeoverPacer is an optional Poster capability for a platform adapter
// that paces each message's edits itself (Slack). A watcher that starts
// editing a status message it did not post calls TookOver first: another
// bot may have been editing it until a moment ago (it took the session's
// watch over), so the adapter paces the next edit as for a message it
// never saw, whatever it remembers of its own earlier edits. Where the
// platform's edit budget is the thread's, shared by every replica
// (Discord; Budget.HandoffWindow), a watcher that starts holding a
// session's watch lease calls it with ref "": the next edit of any message
// in th waits out the window another replica may have filled.
type TakeoverPacer interface {
	TookOver(th Thread, ref string)
}

// Deleter is an optional Poster capability: delete a message the bot
// posted (Slack chat.delete, Discord DELETE message). The watcher deletes a
// status card it posted when the session recorded another replica's card
// for the turn first (session.CardRecordedAlready): two replicas around a
// watch takeover can each post one, and only the recorded card is edited
// from then on, so the other would stay as a second, stale card showing the
// turn's calls.
//
// Where a message cannot be deleted (a Poster without Deleter, or a delete
// the platform refuses), the watcher edits the extra card into a one-line
// pointer to the other (PointerCard) instead: a card that stopped moving
// half-way through the turn would tell the reader the turn stalled, while
// a pointer says where the turn goes on and shows no call twice.
type Deleter interface {
	Delete(ctx context.Context, th Thread, ref string) error
}

// ContextLine is one earlier message of a thread.
type ContextLine struct {
	User string // display name
	Text string
}

// Thread context limits: what the first prompt may carry of a thread's
// earlier conversation (the newest lines win).
const (
	MaxContextLines     = 50
	MaxContextLineRunes = 2000
	MaxContextBytes     = 16 << 10
)

// contextText formats a thread's earlier messages for the session, within
// MaxContextBytes, keeping the newest; each line neutralised like any text
// shown to people, and cut to MaxContextLineRunes.
func contextText(lines []ContextLine) string {
	if len(lines) > MaxContextLines {
		lines = lines[len(lines)-MaxContextLines:]
	}
	var out []string
	total := 0
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		who := strings.TrimSpace(l.User)
		if who == "" {
			who = "someone"
		}
		s := who + ": " + truncate(strings.TrimSpace(l.Text), MaxContextLineRunes)
		if total+len(s)+1 > MaxContextBytes {
			break
		}
		total += len(s) + 1
		out = append(out, s)
	}
	slices.Reverse(out)
	return strings.Join(out, "\n")
}

// TimeFormatter is an optional Poster capability: write a moment so that
// each reader sees it in their own time zone (Slack's <!date>, Discord's
// <t:…>). Without it, cards say UTC.
type TimeFormatter interface {
	FormatTime(t time.Time) string
}
