package slack

import (
	"fmt"

	"github.com/sandbot/sandbot/chat/internal/split"
)

// measure is how Slack's limits are applied here: in UTF-16 code units,
// which is never less than the number of characters Slack counts, so a text
// within a limit by this measure is within it for Slack (and for the fake,
// which counts the same way).
const measure = split.UTF16

// TextLen measures text as Slack's limits are applied here (see measure).
func TextLen(s string) int { return measure.Len(s) }

// Limits are the sizes a posted answer must respect.
type Limits struct {
	// SectionChars is the most text in one section block (Slack: 3,000).
	SectionChars int
	// MessageChars is the most text in one message's `text` (Slack answers
	// msg_too_long around 4,000).
	MessageChars int
	// MaxBlocks is the most blocks in one message (Slack: 50).
	MaxBlocks int
}

// DefaultLimits are Slack's.
var DefaultLimits = Limits{SectionChars: 3000, MessageChars: 4000, MaxBlocks: 50}

// Validate reports limits the splitter cannot honour: too small to make
// progress, or so many sections per message that MaxBlocks could be hit.
func (l Limits) Validate() error {
	if l.SectionChars < split.MinLimit || l.MessageChars < split.MinLimit {
		return fmt.Errorf("slack: limits: SectionChars (%d) and MessageChars (%d) must be at least %d", l.SectionChars, l.MessageChars, split.MinLimit)
	}
	if need := 2*ceilDiv(l.MessageChars, l.SectionChars-2*len(fenceOpen)) + 1; l.MaxBlocks < need {
		return fmt.Errorf("slack: limits: MaxBlocks is %d but a %d-character message may need %d sections of %d characters",
			l.MaxBlocks, l.MessageChars, need, l.SectionChars)
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Part is one message of a split answer.
type Part struct {
	// Text is the message's fallback `text` (at most MessageChars).
	Text string
	// Sections are the texts of its section blocks (each at most
	// SectionChars; together they show Text).
	Sections []string
}

// SplitMessages cuts mrkdwn into messages within l (which must Validate),
// and each message into sections, with the shared splitter: code blocks
// that have to be cut are closed and reopened, and no cut falls inside an
// &entity; or a <link>.
func SplitMessages(mrkdwn string, l Limits) []Part {
	var out []Part
	for _, msg := range chunk(mrkdwn, l.MessageChars) {
		out = append(out, Part{Text: msg, Sections: chunk(msg, l.SectionChars)})
	}
	return out
}

const (
	fenceOpen  = fence + "\n"
	fenceClose = "\n" + fence
)

// chunk cuts mrkdwn into pieces of at most max (TextLen) with balanced
// code fences (max must be at least split.MinLimit).
func chunk(mrkdwn string, max int) []string {
	return split.Markdown(mrkdwn, split.Options{Limit: max, Measure: measure, Mrkdwn: true})
}
