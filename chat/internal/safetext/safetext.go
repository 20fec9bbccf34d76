// Package safetext makes untrusted text (agent commands, command output,
// model answers) safe to show to a person: every character that a terminal,
// Slack or Discord would interpret rather than print, or that would hide or
// reorder the text around it, is replaced by a visible escape such as \x1b,
// \r or \u202e. What the approver reads is then what will run: a carriage
// return cannot overprint a command, an ANSI sequence cannot clear the
// screen, a bidirectional override cannot reorder it (Trojan Source).
//
// It is a leaf: it imports nothing of sandbot, so every renderer can use it.
package safetext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text neutralises s for a renderer that keeps lines: newlines and tabs
// stay, a CRLF pair becomes a newline, and everything else that is not
// plain printable text is escaped (see Hidden).
func Text(s string) string { return escape(s, true) }

// Line neutralises s for one line of text: like Text, but newlines and
// tabs are escaped too (\n, \t).
func Line(s string) string { return escape(s, false) }

// Clean reports whether s holds nothing Text would change.
func Clean(s string) bool { return Text(s) == s }

// Hidden reports whether r is neutralised: C0 controls, DEL, C1 controls,
// line and paragraph separators, and the invisible format characters
// (Unicode category Cf: bidirectional embeddings, overrides, isolates and
// marks, zero-width spaces and joiners' relatives, the byte-order mark,
// tag characters, soft hyphens). The zero-width joiner is kept: it only
// glues emoji sequences and hides nothing.
func Hidden(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == '\u2028', r == '\u2029':
		return true
	case r == '\u200d':
		return false
	}
	return unicode.Is(unicode.Cf, r)
}

func escape(s string, keepLines bool) string {
	if keepLines {
		s = strings.ReplaceAll(s, "\r\n", "\n")
	}
	if clean(s, keepLines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			// Invalid UTF-8: show the byte, never pass it on (a lone 0x9b
			// is CSI to an 8-bit terminal).
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case Hidden(r):
			b.WriteString(name(r))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// clean is the fast path: nothing to escape.
func clean(s string, keepLines bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !(keepLines && (c == '\n' || c == '\t')) {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || Hidden(r) {
			return false
		}
		i += n
	}
	return true
}

// name is the visible escape of a neutralised rune.
func name(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x80 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	if r > 0xffff {
		return fmt.Sprintf(`\U%08x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}
