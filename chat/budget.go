package chat

import (
	"context"
	"time"
)

// Limiter is an optional shared budget (for example a workspace-wide rate
// for chat.update, which the Slack adapter provides). Wait blocks until one
// more call may be made or ctx ends.
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
	// token bucket, chat/internal/pace). 0 or 1 means strict spacing.
	// Discord allows about 5 edits per 5 s per channel, and every session
	// thread is a channel.
	EditBurst int
	// HandoffWindow is the platform's rate window for a thread's edits that
	// every replica on the bot's token shares (Discord: 5 edits per 5 s per
	// channel, while each process paces by its own requests). A replica
	// that starts holding a session's watch lease tells its TakeoverPacer
	// (TookOver with no ref), so its first edit there waits out the window
	// the previous holder may have filled, unless this replica itself held
	// the lease until less than HandoffWindow ago (see holdEnds). 0: the
	// platform paces per message only (Slack), and nothing is told.
	HandoffWindow time.Duration
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
	// MaxApprovalChars bounds the commands of a pending approval shown on
	// a card, in MeasureCode's units (default 2500; negative: no bound).
	// Longer commands are attached as a file (see Attacher), never cut:
	// it must stay within the platform's limit for one code block.
	MaxApprovalChars int
	// MeasureCode is the platform's length of text in a code block after
	// its own escaping (Slack's &amp; entities, Discord's UTF-16 units);
	// runes if nil.
	MeasureCode func(string) int
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

// Clock is the watchers' time source, so tests can run them on virtual time.
type Clock interface {
	Now() time.Time
	// After sends the time on the returned channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
