package slack

import (
	"regexp"
	"strings"

	"github.com/sandbot/sandbot/chat/internal/safetext"
)

// Mrkdwn converts the Markdown models write into Slack's mrkdwn:
//
//   - **bold** and __bold__ → *bold*; *it* and _it_ → _it_; ~~s~~ → ~s~
//   - [text](url) → <url|text>; <https://…> autolinks are kept
//   - headings → bold lines; - / * / + list items → •; task boxes → ☐ / ☑
//   - tables → a code block, so columns stay aligned
//   - fenced code blocks (``` or ~~~) → ``` blocks without the language
//     tag; inline code is kept (a backtick inside it shows as ˋ, because
//     Slack's inline code cannot hold one)
//   - &, < and > are escaped everywhere, so the text can never form a
//     Slack link, a user mention or an @channel broadcast.
//
// Inside code nothing else changes, except that a "```" within code gets a
// zero-width space so it cannot end Slack's block early. An unclosed fence
// is closed at the end, so the result's fences are always balanced.
//
// Controls, escape sequences and bidirectional overrides in md are shown
// as visible escapes first (chat/internal/safetext): model text cannot
// hide or reorder what a message shows.
func Mrkdwn(md string) string {
	md = safetext.Text(md)
	lines := strings.Split(md, "\n")
	out := make([]string, 0, len(lines))
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if f, ok := openFence(line); ok {
			out = append(out, fence)
			i++
			for ; i < len(lines); i++ {
				if f.closes(lines[i]) {
					break
				}
				out = append(out, codeLine(stripIndent(lines[i], f.indent)))
			}
			out = append(out, fence)
			continue
		}
		if isTableStart(lines, i) {
			out = append(out, fence)
			for ; i < len(lines) && isTableRow(lines[i]); i++ {
				out = append(out, codeLine(strings.TrimSpace(lines[i])))
			}
			i--
			out = append(out, fence)
			continue
		}
		// Neutralize "```" the line may have formed from escaped or
		// unmatched backticks: only our own fences may open code.
		out = append(out, neutralizeFences(blockLine(line)))
	}
	return strings.Join(out, "\n")
}

// fence is Slack's only code fence.
const fence = "```"

type fenceSpec struct {
	char   byte
	n      int
	indent int
}

// openFence reports whether line opens a fenced code block.
func openFence(line string) (fenceSpec, bool) {
	trimmed := strings.TrimLeft(line, " \t")
	indent := len(line) - len(trimmed)
	if len(trimmed) < 3 || (trimmed[0] != '`' && trimmed[0] != '~') {
		return fenceSpec{}, false
	}
	c := trimmed[0]
	n := 0
	for n < len(trimmed) && trimmed[n] == c {
		n++
	}
	if n < 3 {
		return fenceSpec{}, false
	}
	if c == '`' && strings.Contains(trimmed[n:], "`") {
		return fenceSpec{}, false // an inline code span, not a fence
	}
	return fenceSpec{char: c, n: n, indent: indent}, true
}

// closes reports whether line closes the block f opened.
func (f fenceSpec) closes(line string) bool {
	t := strings.TrimSpace(line)
	if len(t) < f.n {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] != f.char {
			return false
		}
	}
	return true
}

// stripIndent removes up to n leading spaces (the fence's own indentation,
// as in a list item).
func stripIndent(s string, n int) string {
	i := 0
	for i < n && i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return s[i:]
}

// codeLine escapes a line of code for Slack: only the three control
// characters (which Slack decodes for display, also inside code) and any
// "```" that would end the block.
func codeLine(s string) string {
	return neutralizeFences(escape(s))
}

// zwsp is a zero-width space; it breaks a run of backticks without showing.
const zwsp = "\u200b"

// neutralizeFences breaks every run of three or more backticks.
func neutralizeFences(s string) string {
	if !strings.Contains(s, fence) {
		return s
	}
	var b strings.Builder
	run := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			if run == 2 {
				b.WriteString(zwsp)
				run = 0
			}
			run++
		} else {
			run = 0
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape makes s literal text for Slack: &, < and > become entities.
func escape(s string) string { return escaper.Replace(s) }

var (
	headingRe = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)(\s+#+)?\s*$`)
	ruleRe    = regexp.MustCompile(`^\s{0,3}([-*_])(\s*[-*_]){2,}\s*$`)
	bulletRe  = regexp.MustCompile(`^(\s*)[-*+]\s+(.*)$`)
	orderedRe = regexp.MustCompile(`^(\s*)(\d{1,9})[.)]\s+(.*)$`)
	quoteRe   = regexp.MustCompile(`^\s{0,3}>\s?(.*)$`)
	taskRe    = regexp.MustCompile(`^\[([ xX])\]\s+(.*)$`)
	tableSep  = regexp.MustCompile(`^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$`)
)

func isTableRow(s string) bool {
	t := strings.TrimSpace(s)
	return len(t) > 1 && t[0] == '|'
}

// isTableStart reports whether lines[i] is a Markdown table header
// (a |-row followed by a |---| separator row).
func isTableStart(lines []string, i int) bool {
	return isTableRow(lines[i]) && i+1 < len(lines) && isTableRow(lines[i+1]) && tableSep.MatchString(lines[i+1])
}

// blockLine converts one line outside code.
func blockLine(line string) string {
	if strings.TrimSpace(line) == "" {
		return ""
	}
	if m := headingRe.FindStringSubmatch(line); m != nil {
		if m[1] == "" {
			return ""
		}
		return "*" + inline(m[1], true) + "*"
	}
	if ruleRe.MatchString(line) {
		return "──────────"
	}
	if m := quoteRe.FindStringSubmatch(line); m != nil {
		// A quote marker is the one '>' Slack must see unescaped.
		return "> " + blockLine(m[1])
	}
	if m := bulletRe.FindStringSubmatch(line); m != nil {
		item := m[2]
		if t := taskRe.FindStringSubmatch(item); t != nil {
			box := "☐"
			if t[1] != " " {
				box = "☑"
			}
			return m[1] + "• " + box + " " + inline(t[2], false)
		}
		return m[1] + "• " + inline(item, false)
	}
	if m := orderedRe.FindStringSubmatch(line); m != nil {
		return m[1] + m[2] + ". " + inline(m[3], false)
	}
	return inline(line, false)
}
