package slack

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Mention tokens: Adapter.Mention wraps a user ID in these private-use
// characters, and Mrkdwn turns exactly that shape into <@ID>. Every other
// '<' is escaped, so text from a model can never mention or broadcast.
const (
	mentionOpen  = "\ue000"
	mentionClose = "\ue001"
	// timeOpen and timeClose wrap "UNIX|fallback" (Adapter.FormatTime),
	// which Mrkdwn turns into <!date^UNIX^{time}|fallback>: each reader
	// sees their own local time.
	timeOpen  = "\ue002"
	timeClose = "\ue003"
)

// isUserID reports whether id looks like a Slack user ID (U… or W…).
func isUserID(id string) bool {
	if len(id) < 3 || len(id) > 20 || (id[0] != 'U' && id[0] != 'W') {
		return false
	}
	return strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == ""
}

// maxNesting bounds emphasis and link nesting; deeper markers are shown
// as they are. It keeps conversion near-linear on adversarial input.
const maxNesting = 6

// inline converts emphasis, links and code spans in one line. With
// noBold, bold markers are dropped (the caller makes the whole line bold).
func inline(s string, noBold bool) string {
	return (&scanner{s: s}).convert(noBold, 0)
}

// scanner converts one line. Searches for closing markers remember where
// they failed, and searches for single bytes remember their last answer,
// so a line full of unmatched markers costs linear, not quadratic, time.
type scanner struct {
	s      string
	failed map[string]int // marker → searches starting at or after this find no closer
	next   map[byte][2]int
}

// index returns the next index of b at or after from, or -1.
func (sc *scanner) index(b byte, from int) int {
	if sc.next == nil {
		sc.next = map[byte][2]int{}
	}
	if c, ok := sc.next[b]; ok && c[0] <= from && (from <= c[1] || c[1] < 0) {
		if c[1] < 0 {
			return -1
		}
		return c[1]
	}
	r := strings.IndexByte(sc.s[from:], b)
	if r >= 0 {
		r += from
	}
	sc.next[b] = [2]int{from, r}
	return r
}

func (sc *scanner) hasFailed(marker string, from int) bool {
	f, ok := sc.failed[marker]
	return ok && from >= f
}

func (sc *scanner) fail(marker string, from int) int {
	if sc.failed == nil {
		sc.failed = map[string]int{}
	}
	if f, ok := sc.failed[marker]; !ok || from < f {
		sc.failed[marker] = from
	}
	return -1
}

func (sc *scanner) convert(noBold bool, depth int) string {
	s := sc.s
	var b strings.Builder
	nested := func(inner string) string {
		return (&scanner{s: inner}).convert(noBold, depth+1)
	}
	deep := depth >= maxNesting
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && isPunct(s[i+1]):
			b.WriteString(escape(s[i+1 : i+2]))
			i += 2
			continue
		case c == '`':
			n := runLen(s, i, '`')
			if end := sc.findRun(i+n, n); end >= 0 {
				code := strings.Trim(s[i+n:end], " ")
				if code == "" {
					code = s[i+n : end]
				}
				b.WriteString("`" + neutralizeFences(escape(strings.ReplaceAll(code, "`", "ˋ"))) + "`")
				i = end + n
				continue
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		case c == '[' && !deep:
			if text, url, end, ok := sc.parseLink(i); ok {
				url = strings.TrimSuffix(strings.TrimPrefix(url, "<"), ">")
				if isWebURL(url) {
					b.WriteString("<" + linkURL(url) + "|" + linkText(text) + ">")
				} else { // relative or odd scheme: show, do not link
					b.WriteString(linkText(text) + " (" + escape(url) + ")")
				}
				i = end
				continue
			}
		case c == mentionOpen[0] && strings.HasPrefix(s[i:], mentionOpen):
			rest := s[i+len(mentionOpen):]
			if end := strings.Index(rest[:min(len(rest), 40)], mentionClose); end >= 0 && isUserID(rest[:end]) {
				b.WriteString("<@" + rest[:end] + ">")
				i += len(mentionOpen) + end + len(mentionClose)
			} else {
				i += len(mentionOpen) // a stray marker shows nothing
			}
			continue
		case c == mentionClose[0] && strings.HasPrefix(s[i:], mentionClose):
			i += len(mentionClose)
			continue
		case c == timeOpen[0] && strings.HasPrefix(s[i:], timeOpen):
			rest := s[i+len(timeOpen):]
			end := strings.Index(rest[:min(len(rest), 80)], timeClose)
			unix, fallback, ok := "", "", false
			if end >= 0 {
				unix, fallback, ok = strings.Cut(rest[:end], "|")
			}
			if ok && unix != "" && strings.Trim(unix, "0123456789") == "" {
				b.WriteString("<!date^" + unix + "^{date_short_pretty} {time}|" + linkText(fallback) + ">")
				i += len(timeOpen) + end + len(timeClose)
			} else {
				i += len(timeOpen) // a stray marker shows nothing
			}
			continue
		case c == timeClose[0] && strings.HasPrefix(s[i:], timeClose):
			i += len(timeClose)
			continue
		case c == '<':
			if end := sc.index('>', i); end > i && isAutolink(s[i+1:end]) {
				b.WriteString("<" + linkURL(s[i+1:end]) + ">")
				i = end + 1
				continue
			}
		case (c == '*' || c == '_') && i+1 < len(s) && s[i+1] == c && !deep:
			if end := sc.closeDouble(i+2, s[i:i+2]); end >= 0 {
				inner := nested(s[i+2 : end])
				if noBold {
					b.WriteString(inner)
				} else {
					b.WriteString("*" + inner + "*")
				}
				i = end + 2
				continue
			}
		case c == '~' && i+1 < len(s) && s[i+1] == '~' && !deep:
			if end := sc.closeDouble(i+2, "~~"); end >= 0 {
				b.WriteString("~" + nested(s[i+2:end]) + "~")
				i = end + 2
				continue
			}
		case (c == '*' || c == '_') && !deep:
			if canOpen(s, i) {
				if end := sc.closeSingle(i+1, c); end >= 0 {
					b.WriteString("_" + nested(s[i+1:end]) + "_")
					i = end + 1
					continue
				}
			}
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		b.WriteString(escape(s[i : i+size]))
		i += size
	}
	return b.String()
}

// isPunct reports whether a backslash before c escapes it (CommonMark: any
// ASCII punctuation).
func isPunct(c byte) bool { return strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) >= 0 }

// runLen counts c repeated from s[i].
func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// findRun finds a run of exactly n backticks at or after from.
func (sc *scanner) findRun(from, n int) int {
	key := "`" + strconv.Itoa(n)
	if sc.hasFailed(key, from) {
		return -1
	}
	for j := from; j < len(sc.s); {
		k := sc.index('`', j)
		if k < 0 {
			break
		}
		m := runLen(sc.s, k, '`')
		if m == n {
			return k
		}
		j = k + m
	}
	return sc.fail(key, from)
}

// skipCode returns the end of a code span opening at j, or j if none.
func (sc *scanner) skipCode(j int) int {
	n := runLen(sc.s, j, '`')
	if end := sc.findRun(j+n, n); end >= 0 {
		return end + n - 1
	}
	return j + n - 1
}

// closeDouble finds the closing two-character marker d for content starting
// at from: the content must not start or end with a space.
func (sc *scanner) closeDouble(from int, d string) int {
	s := sc.s
	if from >= len(s) || s[from] == ' ' {
		return -1
	}
	if sc.hasFailed(d, from) {
		return -1
	}
	for j := from + 1; j+len(d) <= len(s); j++ {
		if s[j] == '`' {
			j = sc.skipCode(j)
			continue
		}
		if s[j:j+len(d)] == d && s[j-1] != ' ' && s[j-1] != '\\' {
			return j
		}
	}
	return sc.fail(d, from)
}

// canOpen reports whether a single * or _ at i may open emphasis: not
// followed by a space, and for _ not inside a word (snake_case stays).
func canOpen(s string, i int) bool {
	if i+1 >= len(s) || s[i+1] == ' ' || s[i+1] == s[i] {
		return false
	}
	if s[i] == '_' && i > 0 && isWordByte(s[i-1]) {
		return false
	}
	return true
}

// closeSingle finds the closing single marker c.
func (sc *scanner) closeSingle(from int, c byte) int {
	s := sc.s
	key := string(c)
	if sc.hasFailed(key, from) {
		return -1
	}
	for j := from; j < len(s); j++ {
		switch s[j] {
		case '`':
			j = sc.skipCode(j)
		case c:
			if j+1 < len(s) && s[j+1] == c { // part of a double marker
				j++
				continue
			}
			if s[j-1] == ' ' {
				continue
			}
			if c == '_' && j+1 < len(s) && isWordByte(s[j+1]) {
				continue
			}
			return j
		}
	}
	return sc.fail(key, from)
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= utf8.RuneSelf
}

// parseLink parses [text](url) at s[i] and returns the index after it.
// The text ends at the first ']' (nested brackets are not links).
func (sc *scanner) parseLink(i int) (text, url string, end int, ok bool) {
	s := sc.s
	j := sc.index(']', i)
	if j < 0 || j+1 >= len(s) || s[j+1] != '(' {
		return "", "", 0, false
	}
	k := sc.index(')', j+2)
	if k < 0 {
		return "", "", 0, false
	}
	url = strings.TrimSpace(s[j+2 : k])
	if t, _, found := strings.Cut(url, " \""); found { // [a](url "title")
		url = t
	}
	if url == "" || strings.ContainsAny(url, " \n") {
		return "", "", 0, false
	}
	return s[i+1 : j], url, k + 1, true
}

func isAutolink(s string) bool {
	return isWebURL(s) && !strings.ContainsAny(s, " <>|\n")
}

// isWebURL reports whether u may become a Slack link: only web and mail
// links, so a link can never turn into a mention or a broadcast.
func isWebURL(u string) bool {
	l := strings.ToLower(u)
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "mailto:")
}

// linkURL makes a URL safe inside <url|text>: the characters that would end
// or split the link are percent-encoded, and & is escaped.
func linkURL(u string) string {
	if scheme, rest, ok := strings.Cut(u, ":"); ok {
		u = strings.ToLower(scheme) + ":" + rest
	}
	u = strings.NewReplacer("|", "%7C", ">", "%3E", "<", "%3C", " ", "%20", "`", "%60").Replace(u)
	return strings.ReplaceAll(u, "&", "&amp;")
}

// linkText is a link's label: Markdown markers removed, escaped, and
// without the | and > that would end it.
func linkText(t string) string {
	t = strings.NewReplacer("**", "", "__", "", "`", "", "|", "¦").Replace(t)
	if strings.TrimSpace(t) == "" {
		t = "link"
	}
	return escape(t)
}
