package slack

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// TextLen measures text the way Slack's limits are applied here: in UTF-16
// code units, which is never less than the number of characters Slack
// counts, so a text within a limit by this measure is within it for Slack.
func TextLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

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
	if l.SectionChars < 64 || l.MessageChars < 64 {
		return fmt.Errorf("slack: limits: SectionChars (%d) and MessageChars (%d) must be at least 64", l.SectionChars, l.MessageChars)
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

// SplitMessages cuts mrkdwn into messages within l (which must Validate).
// Cuts fall between paragraphs or lines where possible, else between
// words, never inside a character, an &entity; or a <link>; a code block
// that has to be cut is closed at the end of one part and reopened at the
// start of the next, so every part and every section has balanced fences.
// Whitespace-only parts are dropped.
func SplitMessages(mrkdwn string, l Limits) []Part {
	var out []Part
	for _, msg := range Chunk(mrkdwn, l.MessageChars) {
		out = append(out, Part{Text: msg, Sections: Chunk(msg, l.SectionChars)})
	}
	return out
}

const (
	fenceOpen  = fence + "\n"
	fenceClose = "\n" + fence
)

// Chunk cuts mrkdwn into pieces of at most max (TextLen) with balanced
// code fences, as SplitMessages describes. An unclosed fence in the input
// is closed in the last piece. max must be at least 64.
func Chunk(mrkdwn string, max int) []string {
	c := chunker{max: max}
	for i, line := range strings.Split(mrkdwn, "\n") {
		c.addLine(line, i > 0)
	}
	c.flush(true)
	return c.parts
}

type chunker struct {
	max    int
	parts  []string
	b      strings.Builder
	n      int  // TextLen of b
	inCode bool // fence state at the end of b
	fresh  bool // b holds nothing but a reopened fence
}

// fits reports whether s (with state change) can be appended: the piece must
// still close its fence within max.
func (c *chunker) fits(s string, inCodeAfter bool) bool {
	n := c.n + TextLen(s)
	if inCodeAfter {
		n += len(fenceClose)
	}
	return n <= c.max
}

func (c *chunker) write(s string) {
	c.b.WriteString(s)
	c.n += TextLen(s)
	c.inCode = c.inCode != (strings.Count(s, fence)%2 == 1)
	if s != "" {
		c.fresh = false
	}
}

func (c *chunker) empty() bool { return c.b.Len() == 0 || c.fresh }

// flush ends the current piece, closing an open fence; unless last, a
// closed fence is reopened in the next piece.
func (c *chunker) flush(last bool) {
	s := strings.Trim(c.b.String(), "\n")
	open := c.inCode
	if open {
		s += fenceClose
	}
	if strings.TrimSpace(strings.ReplaceAll(s, fence, "")) != "" {
		c.parts = append(c.parts, s)
	}
	c.b.Reset()
	c.n = 0
	c.inCode = false
	c.fresh = false
	if open && !last {
		c.write(fenceOpen)
		c.fresh = true
	}
}

// addLine appends one line (after a newline when sep).
func (c *chunker) addLine(line string, sep bool) {
	if sep && !c.empty() {
		line = "\n" + line
	}
	for {
		// TextLen is at least a third of the byte length, so a line this
		// long cannot fit; skip measuring it (keeps long lines linear).
		if len(line) <= 3*c.max && c.fits(line, c.inCode != (strings.Count(line, fence)%2 == 1)) {
			c.write(line)
			return
		}
		if !c.empty() {
			c.flush(false)
			line = strings.TrimPrefix(line, "\n")
			continue
		}
		// The line alone does not fit an empty piece: cut it.
		cut := c.cut(line)
		c.write(line[:cut])
		c.flush(false)
		line = line[cut:]
	}
}

// cut returns how many bytes of line go into the current (empty) piece:
// as many as fit, backed off to a word boundary if there is one in the
// second half, and never inside a rune, a backtick run, an &entity; or a
// <link>. It always makes progress.
func (c *chunker) cut(line string) int {
	room := c.max - c.n - len(fenceClose) // keep room to close a fence
	end, used := 0, 0
	for end < len(line) {
		r, size := utf8.DecodeRuneInString(line[end:])
		w := utf16.RuneLen(r)
		if w < 0 {
			w = 1
		}
		if used+w > room {
			break
		}
		used += w
		end += size
	}
	best := safeCut(line, end, 3*c.max)
	if sp := strings.LastIndexByte(line[:best], ' '); sp > best/2 {
		best = sp + 1
	}
	if best <= 0 {
		// Nothing safe fits: cut at the last rune boundary that fits (or
		// the first rune, to make progress).
		best = end
		if best == 0 {
			_, best = utf8.DecodeRuneInString(line)
		}
	}
	return best
}

// safeCut moves a cut position back out of a backtick run, an entity or a
// link (whose end is within window bytes), so the pieces on both sides keep
// their meaning.
func safeCut(s string, at, window int) int {
	if at >= len(s) {
		return at
	}
	// Inside a run of backticks (which may be a fence): back to its start.
	for at > 0 && s[at-1] == '`' && s[at] == '`' {
		at--
	}
	// Inside an &entity; (at most "&amp;"-like, 8 bytes).
	if amp := strings.LastIndexByte(s[max(0, at-8):at], '&'); amp >= 0 {
		amp += max(0, at-8)
		if !strings.Contains(s[amp:at], ";") && strings.Contains(s[at:min(len(s), at+8)], ";") {
			at = amp
		}
	}
	// Inside a <link|label> or <@mention>: back to its '<'.
	if lt := strings.LastIndexByte(s[:at], '<'); lt >= 0 && !strings.Contains(s[lt:at], ">") && strings.Contains(s[at:min(len(s), at+window)], ">") {
		at = lt
	}
	return at
}
