package slack

import (
	"strings"
	"testing"
	"unicode"
)

// stripForCompare drops what splitting may add or remove at a cut: white
// space and backticks (fences are closed and reopened).
func stripForCompare(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '`' {
			return -1
		}
		return r
	}, s)
}

// checkPieces asserts the splitter's contract for pieces cut from in
// (chat/internal/split tests it in depth).
func checkPieces(t *testing.T, in string, pieces []string, max int) {
	t.Helper()
	for i, p := range pieces {
		if n := TextLen(p); n > max {
			t.Fatalf("piece %d has %d characters, limit %d", i, n, max)
		}
		if strings.Count(p, fence)%2 != 0 {
			t.Fatalf("piece %d has unbalanced fences: %q", i, p)
		}
		if strings.TrimSpace(strings.ReplaceAll(p, fence, "")) == "" {
			t.Fatalf("piece %d is empty: %q", i, p)
		}
	}
	if got, want := stripForCompare(strings.Join(pieces, "")), stripForCompare(in); got != want {
		t.Fatalf("content changed by splitting:\n got %.200q\nwant %.200q", got, want)
	}
}

func TestSplitMessages(t *testing.T) {
	var b strings.Builder
	for i := range 300 {
		b.WriteString("Paragraph " + strings.Repeat("text ", i%30) + "\n")
		if i%50 == 0 {
			b.WriteString("```\n" + strings.Repeat("code line\n", 120) + "```\n")
		}
	}
	md := Mrkdwn(b.String())
	parts := SplitMessages(md, DefaultLimits)
	if len(parts) < 3 {
		t.Fatalf("%d characters gave %d parts", TextLen(md), len(parts))
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.Text
		checkPieces(t, p.Text, p.Sections, DefaultLimits.SectionChars)
		if len(p.Sections) > DefaultLimits.MaxBlocks {
			t.Fatalf("part %d has %d sections", i, len(p.Sections))
		}
	}
	checkPieces(t, md, texts, DefaultLimits.MessageChars)
}

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Limits{
		{SectionChars: 10, MessageChars: 4000, MaxBlocks: 50},
		{SectionChars: 100, MessageChars: 40000, MaxBlocks: 50},
	}
	for _, l := range bad {
		if err := l.Validate(); err == nil {
			t.Fatalf("%+v: want an error", l)
		}
	}
}

// FuzzSplitMessages checks messages and their sections; the splitter
// itself is fuzzed in chat/internal/split.
func FuzzSplitMessages(f *testing.F) {
	f.Add("hello **world**\n```go\ncode\n```\n")
	f.Add(strings.Repeat("```\nx\n", 30))
	f.Add(strings.Repeat("a&amp;<b|c>😀 ", 50))
	f.Add(strings.Repeat("`", 300))
	f.Fuzz(func(t *testing.T, in string) {
		md := Mrkdwn(in)
		var texts []string
		for _, p := range SplitMessages(md, DefaultLimits) {
			checkPieces(t, p.Text, p.Sections, DefaultLimits.SectionChars)
			if len(p.Sections) > DefaultLimits.MaxBlocks {
				t.Fatalf("%d sections in one message", len(p.Sections))
			}
			texts = append(texts, p.Text)
		}
		checkPieces(t, md, texts, DefaultLimits.MessageChars)
	})
}

// BenchmarkConvertAndSplit measures a large answer with many unmatched
// markers (minified JSON with "_id" keys, stray stars), the shape that made
// naive delimiter matching quadratic.
func BenchmarkConvertAndSplit(b *testing.B) {
	in := strings.Repeat(`{"_id":"a*b","items":[1,2,3],"note":"x < y && **z"}`, 20000) // ~1 MB, one line
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		SplitMessages(Mrkdwn(in), DefaultLimits)
	}
}
