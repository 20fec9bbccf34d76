package discord

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// plainText turns card Markdown into the text Discord should show where it
// renders no Markdown at all, such as an embed footer: code, bold, italic,
// underline, strike and spoiler marks go (their text stays), a link
// becomes "text (url)" (just the URL when the text is the URL), an
// autolink loses its angle brackets, backslash escapes are resolved, and
// line marks for headings, subtext and quotes go while list dashes become
// bullets. Marks that do not pair up, such as the underscores in
// snake_case or a lone "2 * 3", are kept as they are.
func plainText(md string) string {
	lines := strings.Split(md, "\n")
	for i, l := range lines {
		lines[i] = plainInline(plainLine(l))
	}
	return strings.Join(lines, "\n")
}

// plainLine removes a line's block mark: "# ", "-# ", "> ", ">>> ", and
// turns a "- " or "* " list item into "• ".
func plainLine(l string) string {
	for _, p := range []string{"### ", "## ", "# ", "-# ", ">>> ", "> "} {
		if rest, ok := strings.CutPrefix(l, p); ok {
			return rest
		}
	}
	for _, p := range []string{"- ", "* "} {
		if rest, ok := strings.CutPrefix(l, p); ok {
			return "• " + rest
		}
	}
	return l
}

// plainInline removes inline Markdown from one line.
func plainInline(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) && isMarkPunct(s[i+1]) {
				b.WriteByte(s[i+1])
				i += 2
				continue
			}
		case '`':
			n := runLen(s, i, '`')
			if end := closingTicks(s, i+n, n); end >= 0 {
				b.WriteString(codeText(s[i+n : end]))
				i = end + n
				continue
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		case '[':
			if text, url, end, ok := mdLink(s, i); ok {
				text = strings.TrimSpace(plainInline(text))
				switch {
				case url == "" || text == url:
					b.WriteString(text)
				case text == "":
					b.WriteString(url)
				default:
					b.WriteString(text + " (" + url + ")")
				}
				i = end
				continue
			}
		case '<':
			if j := strings.IndexByte(s[i:], '>'); j > 0 && isURL(s[i+1:i+j]) {
				b.WriteString(s[i+1 : i+j])
				i += j + 1
				continue
			}
		case '*', '_', '~', '|':
			n := runLen(s, i, c)
			if inner, end, ok := emphasis(s, i, n); ok {
				b.WriteString(plainInline(inner))
				i = end
				continue
			}
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String()
}

// emphasis reads the span opened by the run of n marks at s[i]: its inner
// text and where it ends. "*" and "_" pair in runs of one to three, "~"
// and "|" in runs of two; the closing run must be as long. An opening
// mark must be followed, and a closing one preceded, by non-space; "_"
// marks may not touch letters or digits outside the span (snake_case).
func emphasis(s string, i, n int) (inner string, end int, ok bool) {
	c := s[i]
	switch {
	case (c == '~' || c == '|') && n != 2:
		return "", 0, false
	case n > 3:
		return "", 0, false
	case i+n >= len(s) || isSpaceAt(s, i+n):
		return "", 0, false
	case c == '_' && i > 0 && isWordBefore(s, i):
		return "", 0, false
	}
	for j := i + n + 1; j < len(s); {
		switch s[j] {
		case '\\':
			j += 2
			continue
		case '`':
			m := runLen(s, j, '`')
			if e := closingTicks(s, j+m, m); e >= 0 {
				j = e + m
			} else {
				j += m
			}
			continue
		case c:
			m := runLen(s, j, c)
			if m == n && !isSpaceBefore(s, j) && (c != '_' || j+m == len(s) || !isWordAt(s, j+m)) {
				return s[i+n : j], j + m, true
			}
			j += m
			continue
		}
		j++
	}
	return "", 0, false
}

// mdLink reads "[text](url)" at s[i].
func mdLink(s string, i int) (text, url string, end int, ok bool) {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '[':
			depth++
		case ']':
			depth--
			if depth > 0 {
				continue
			}
			if j+1 >= len(s) || s[j+1] != '(' {
				return "", "", 0, false
			}
			k := strings.IndexByte(s[j+2:], ')')
			if k < 0 {
				return "", "", 0, false
			}
			dest := strings.TrimSpace(s[j+2 : j+2+k])
			if sp := strings.IndexAny(dest, " \t"); sp >= 0 {
				dest = dest[:sp] // drop a "title"
			}
			dest = strings.TrimSuffix(strings.TrimPrefix(dest, "<"), ">")
			return s[i+1 : j], dest, j + 3 + k, true
		}
	}
	return "", "", 0, false
}

// codeText is a code span's text: one space of padding on both sides is
// removed, as Markdown does.
func codeText(c string) string {
	if len(c) >= 2 && c[0] == ' ' && c[len(c)-1] == ' ' && strings.TrimSpace(c) != "" {
		return c[1 : len(c)-1]
	}
	return c
}

// closingTicks finds the next run of exactly n backticks from j, or -1.
func closingTicks(s string, j, n int) int {
	for j < len(s) {
		if s[j] != '`' {
			j++
			continue
		}
		m := runLen(s, j, '`')
		if m == n {
			return j
		}
		j += m
	}
	return -1
}

func runLen(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

func isURL(s string) bool {
	return (strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")) && !strings.ContainsAny(s, " \t<>")
}

// isMarkPunct reports whether c is ASCII punctuation a backslash escapes.
func isMarkPunct(c byte) bool {
	return c < utf8.RuneSelf && unicode.IsPunct(rune(c)) || strings.IndexByte("`*_~|<>[]()#-+=$^", c) >= 0
}

func isSpaceAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r)
}

func isSpaceBefore(s string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return unicode.IsSpace(r)
}

func isWordAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isWordBefore(s string, i int) bool {
	r, _ := utf8.DecodeLastRuneInString(s[:i])
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}
