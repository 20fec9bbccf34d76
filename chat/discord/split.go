package discord

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// fence opens and closes a Discord code block.
const fence = "```"

// closeFence ends a code block a split left open.
const closeFence = "\n" + fence

// minSplitLimit is the smallest limit splitParts works with: room for a
// reopened fence with a language tag, a close and some text.
const minSplitLimit = 64

// textLen counts UTF-16 code units, the most conservative reading of
// Discord's character limits (never less than the number of code points).
func textLen(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	return n
}

// cutUnits returns the longest prefix of s, ending on a rune boundary, of
// at most n UTF-16 units.
func cutUnits(s string, n int) string {
	units := 0
	for i, r := range s {
		w := 1
		if r > 0xFFFF {
			w = 2
		}
		if units+w > n {
			return s[:i]
		}
		units += w
	}
	return s
}

// SplitMarkdown splits a Markdown answer into messages of at most limit
// characters (MaxContent for Discord). It breaks at paragraph ends, then
// line ends, then spaces, and never inside a run of backticks. A part that
// ends inside a code block closes it, and the next part reopens it with the
// same language tag, so every part renders on its own; an unclosed block at
// the end is closed. Parts that would be blank are left out.
func SplitMarkdown(text string, limit int) []string {
	return splitParts(text, limit)
}

func splitParts(text string, limit int) []string {
	ps := splitPieces(text, limit)
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.pre + p.body + p.post
	}
	return out
}

// piece is one part: pre reopens a code block, body is the text taken from
// the input, post closes a block left open.
type piece struct{ pre, body, post string }

func splitPieces(text string, limit int) []piece {
	limit = max(limit, minSplitLimit)
	rest := strings.ReplaceAll(text, "\r\n", "\n")
	var out []piece
	reopen := ""
	for rest != "" {
		budget := limit - textLen(reopen) - len(closeFence)
		body, next := breakAt(rest, budget)
		rest = next
		p := piece{pre: reopen, body: body}
		part := p.pre + p.body
		if strings.Count(part, fence)%2 == 1 {
			p.post = closeFence
			reopen = fence + lastLang(part) + "\n"
		} else {
			reopen = ""
		}
		if strings.TrimSpace(p.body) == "" {
			// Nothing to show; the fence state carries over unchanged
			// because a blank body holds no fence.
			reopen = p.pre
			continue
		}
		out = append(out, p)
	}
	return out
}

// breakAt takes at most budget units from s, preferring to end at a
// paragraph, a line or a word, and returns the taken text (without the
// separator it broke at) and the rest.
func breakAt(s string, budget int) (string, string) {
	w := cutUnits(s, budget)
	if len(w) == len(s) {
		return s, ""
	}
	half := len(w) / 2
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(w, sep); i >= half && i > 0 {
			return w[:i], s[i+len(sep):]
		}
	}
	for _, sep := range []string{"\n", " "} {
		if i := strings.LastIndex(w, sep); i > 0 {
			return w[:i], s[i+len(sep):]
		}
	}
	// Hard cut, but not inside a run of backticks, which would change how
	// many fences each side holds.
	cut := len(w)
	for cut > 0 && s[cut-1] == '`' && s[cut] == '`' {
		cut--
	}
	if cut == 0 {
		cut = len(w)
	}
	if cut == 0 {
		// budget smaller than the first rune: take it anyway.
		_, size := utf8.DecodeRuneInString(s)
		cut = size
	}
	return s[:cut], s[cut:]
}

var langTag = regexp.MustCompile(`^[A-Za-z0-9_+#.-]{1,20}$`)

// lastLang is the language tag of the code block left open at the end of
// part ("" if none or not a plain tag).
func lastLang(part string) string {
	i := strings.LastIndex(part, fence)
	if i < 0 {
		return ""
	}
	line, _, _ := strings.Cut(part[i+len(fence):], "\n")
	if !strings.Contains(part[i+len(fence):], "\n") {
		// The block was opened on the part's last line: whatever follows
		// the fence is a tag only if a line break came after it.
		return ""
	}
	if langTag.MatchString(line) {
		return line
	}
	return ""
}
