package safetext

import (
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "ls -la /tmp", "ls -la /tmp"},
		{"newline and tab kept", "a\n\tb", "a\n\tb"},
		{"crlf folds", "a\r\nb", "a\nb"},
		{"carriage return overprint", "touch PWNED.txt #\r\x1b[2Kls -la", `touch PWNED.txt #\r\x1b[2Kls -la`},
		{"clear screen", "\x1b[2Jhello", `\x1b[2Jhello`},
		{"osc title", "\x1b]0;owned\x07x", `\x1b]0;owned\x07x`},
		{"nul and bell", "a\x00b\x07", `a\x00b\x07`},
		{"backspace", "rm -rf /\b\b\b\bls", `rm -rf /\x08\x08\x08\x08ls`},
		{"del", "a\x7fb", `a\x7fb`},
		{"c1 csi", "a\u009b2Jb", `a\u009b2Jb`},
		{"c1 nel", "a\u0085b", `a\u0085b`},
		{"raw 8-bit csi byte", "a\x9b2Jb", `a\x9b2Jb`},
		{"rlo override", "echo \u202etxt.exe", `echo \u202etxt.exe`},
		{"all embeddings and overrides", "\u202a\u202b\u202c\u202d\u202e", `\u202a\u202b\u202c\u202d\u202e`},
		{"isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
		{"marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		{"zero width space", "r\u200bm", `r\u200bm`},
		{"word joiner and bom", "a\u2060b\ufeff", `a\u2060b\ufeff`},
		{"soft hyphen", "a\u00adb", `a\u00adb`},
		{"line separator", "a\u2028b\u2029", `a\u2028b\u2029`},
		{"tag characters", "a\U000e0041", `a\U000e0041`},
		{"zwj emoji kept", "👨\u200d👩", "👨\u200d👩"},
		{"unicode text kept", "héllo wörld — ✅ 日本", "héllo wörld — ✅ 日本"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Text(c.in)
			if got != c.want {
				t.Fatalf("Text(%q) = %q, want %q", c.in, got, c.want)
			}
			for _, r := range got {
				if Hidden(r) && r != '\n' && r != '\t' {
					t.Fatalf("Text(%q) = %q still holds %U", c.in, got, r)
				}
			}
		})
	}
}

func TestLineEscapesLineBreaks(t *testing.T) {
	if got, want := Line("a\nb\tc\r\nd"), `a\nb\tc\r\nd`; got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
}

// TestEveryControlIsVisible checks each C0, DEL and C1 code point one by
// one, so no class is forgotten.
func TestEveryControlIsVisible(t *testing.T) {
	for r := rune(0); r <= 0x9f; r++ {
		if r >= 0x20 && r < 0x7f {
			continue
		}
		s := string(r)
		if r == '\n' || r == '\t' {
			if Text(s) != s {
				t.Errorf("Text(%q) changed a kept line character", s)
			}
			continue
		}
		got := Line(s)
		if strings.ContainsRune(got, r) || !strings.HasPrefix(got, `\`) {
			t.Errorf("Line(%q) = %q: not visibly escaped", s, got)
		}
	}
}

func TestClean(t *testing.T) {
	if !Clean("echo ok\n") || Clean("echo \x1b[31m") {
		t.Fatal("Clean misjudges")
	}
}
