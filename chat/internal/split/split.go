// Package split cuts Markdown answers into messages that fit a chat
// platform's length limit, the one splitter every adapter uses.
//
// Cuts fall at paragraph ends, then line ends, then spaces, and never
// inside a character or a run of backticks (optionally, never inside
// Slack markup either). A part that ends inside a code block closes it, and
// the next part reopens it, so every part renders on its own; an unclosed
// block at the end is closed. Parts with nothing but white space and
// fences are left out.
package split

import (
	"regexp"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Measure is how a platform counts text against its limits.
type Measure int

// Measures.
const (
	// CodePoints counts Unicode code points (runes).
	CodePoints Measure = iota
	// UTF16 counts UTF-16 code units: a code point outside the Basic
	// Multilingual Plane (most emoji) counts two. It is never less than
	// CodePoints, so text within a limit by UTF16 is within it by either
	// count; the adapters use it where a platform's unit is unclear or its
	// fake counts this way.
	UTF16
)

// width is what one rune counts.
func (m Measure) width(r rune) int {
	if m == UTF16 {
		if n := utf16.RuneLen(r); n > 0 {
			return n
		}
	}
	return 1
}

// Len measures s.
func (m Measure) Len(s string) int {
	n := 0
	for _, r := range s {
		n += m.width(r)
	}
	return n
}

// prefixLen is the byte length of the longest prefix of s, ending on a
// rune boundary, that measures at most n. It reads only that prefix, so
// cutting a long text into parts stays linear.
func (m Measure) prefixLen(s string, n int) int {
	used := 0
	for i, r := range s {
		w := m.width(r)
		if used+w > n {
			return i
		}
		used += w
	}
	return len(s)
}

// Prefix is the longest prefix of s that measures at most n, ending on a
// rune boundary.
func (m Measure) Prefix(s string, n int) string { return s[:m.prefixLen(s, n)] }

// Truncate cuts plain text to at most n, ending with "…" when cut.
func (m Measure) Truncate(s string, n int) string {
	if m.Len(s) <= n {
		return s
	}
	return m.Prefix(s, n-1) + "…"
}

// Fence opens and closes a code block.
const Fence = "```"

// closeFence ends a code block a cut left open.
const closeFence = "\n" + Fence

// MinLimit is the smallest limit Parts works with: room for a reopened
// fence with a language tag, a close and some text. Smaller limits are
// raised to it.
const MinLimit = 64

// Options shape a split.
type Options struct {
	// Limit is the most one part may measure (at least MinLimit).
	Limit int
	// Measure is how Limit is counted.
	Measure Measure
	// KeepLanguage reopens a cut code block with its language tag
	// ("```go"). Platforms whose fences take no tag (Slack mrkdwn, where
	// the text after a fence is code) leave it off.
	KeepLanguage bool
	// Mrkdwn treats the text as Slack mrkdwn: no part ends inside a
	// <link|label>, <@mention> or &entity;, so both sides keep their meaning.
	Mrkdwn bool
}

// Part is one message of a split text.
type Part struct {
	// Open reopens the code block the previous part cut ("" if none).
	Open string
	// Body is the text taken from the input, without the separator the
	// cut fell on and without surrounding newlines.
	Body string
	// Close ends a code block the part leaves open ("" if none).
	Close string
}

// String is the part's message text.
func (p Part) String() string { return p.Open + p.Body + p.Close }

// Markdown cuts text into messages of at most o.Limit; see Parts.
func Markdown(text string, o Options) []string {
	ps := Parts(text, o)
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// Parts cuts text into parts of at most o.Limit (raised to MinLimit) as the
// package comment describes. Windows line ends become "\n".
func Parts(text string, o Options) []Part {
	limit := max(o.Limit, MinLimit)
	rest := strings.ReplaceAll(text, "\r\n", "\n")
	var out []Part
	open := ""
	for rest != "" {
		room := limit - o.Measure.Len(open) - len(closeFence)
		taken, next := o.cut(rest, room, limit)
		rest = next
		p := Part{Open: open, Body: strings.Trim(taken, "\n")}
		if whole := open + taken; strings.Count(whole, Fence)%2 == 1 {
			p.Close = closeFence
			open = Fence + "\n"
			if o.KeepLanguage {
				open = Fence + openLanguage(whole) + "\n"
			}
		} else {
			open = ""
		}
		if strings.TrimSpace(strings.ReplaceAll(p.Open+p.Body, Fence, "")) == "" {
			continue // nothing to show; the fence state carries over
		}
		out = append(out, p)
	}
	return out
}

// cut takes at most room from s, preferring to end at a paragraph, a line
// or a word in the second half of what fits, and returns the taken text
// (without the separator it broke at) and the rest. It always makes
// progress.
func (o Options) cut(s string, room, limit int) (taken, rest string) {
	end := o.Measure.prefixLen(s, room)
	if end == len(s) {
		return s, ""
	}
	if o.Mrkdwn {
		if safe := safeCut(s, end, 3*limit); safe > 0 {
			end = safe
		}
	}
	w := s[:end]
	half := len(w) / 2
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := o.lastBreak(w, sep); i >= half && i > 0 {
			return w[:i], s[i+len(sep):]
		}
	}
	for _, sep := range []string{"\n", " "} {
		if i := o.lastBreak(w, sep); i > 0 {
			return w[:i], s[i+len(sep):]
		}
	}
	// A hard cut, but not inside a run of backticks, which would change
	// how many fences each side holds.
	at := len(w)
	for at > 0 && s[at-1] == '`' && s[at] == '`' {
		at--
	}
	if at == 0 {
		at = len(w)
	}
	if at == 0 {
		// room is smaller than the first rune: take it anyway.
		_, at = utf8.DecodeRuneInString(s)
	}
	return s[:at], s[at:]
}

// lastBreak is the last index of sep in w where a cut may fall: anywhere,
// or in mrkdwn outside <…> markup (a link label may hold spaces).
func (o Options) lastBreak(w, sep string) int {
	if !o.Mrkdwn || !strings.Contains(w, "<") {
		return strings.LastIndex(w, sep)
	}
	best, inside := -1, false
	for i := 0; i < len(w); i++ {
		switch w[i] {
		case '<':
			inside = true
		case '>':
			inside = false
		}
		if !inside && strings.HasPrefix(w[i:], sep) {
			best = i
		}
	}
	return best
}

// safeCut moves a cut position back out of a backtick run, an &entity; or
// a <link> (whose end is within window bytes), so the pieces on both
// sides keep their meaning.
func safeCut(s string, at, window int) int {
	if at >= len(s) {
		return at
	}
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

var langTag = regexp.MustCompile(`^[A-Za-z0-9_+#.-]{1,20}$`)

// openLanguage is the language tag of the code block left open at the end
// of text ("" if none or not a plain tag). Text after the opening fence is
// a tag only if a line break follows it.
func openLanguage(text string) string {
	i := strings.LastIndex(text, Fence)
	if i < 0 {
		return ""
	}
	line, _, ok := strings.Cut(text[i+len(Fence):], "\n")
	if ok && langTag.MatchString(line) {
		return line
	}
	return ""
}
