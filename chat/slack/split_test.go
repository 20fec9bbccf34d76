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

// checkPieces asserts the splitter's contract for pieces cut from in.
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

func TestChunkShortText(t *testing.T) {
	if got := Chunk("hello\nworld", 100); len(got) != 1 || got[0] != "hello\nworld" {
		t.Fatalf("Chunk = %q", got)
	}
	if got := Chunk("  \n\n ", 100); len(got) != 0 {
		t.Fatalf("whitespace-only input gave %q", got)
	}
}

func TestChunkPrefersParagraphsAndLines(t *testing.T) {
	para := strings.Repeat("word ", 15) // 75 chars
	in := para + "\n" + para + "\n\n" + para
	got := Chunk(in, 160)
	checkPieces(t, in, got, 160)
	if len(got) != 2 || got[0] != para+"\n"+para || got[1] != para {
		t.Fatalf("Chunk = %q", got)
	}
}

func TestChunkCodeBlockReopened(t *testing.T) {
	var b strings.Builder
	b.WriteString("Intro line.\n```\n")
	for i := range 200 {
		b.WriteString("line " + strings.Repeat("x", i%40) + "\n")
	}
	b.WriteString("```\nOutro.")
	in := b.String()
	got := Chunk(in, 1000)
	checkPieces(t, in, got, 1000)
	if len(got) < 3 {
		t.Fatalf("want several pieces, got %d", len(got))
	}
	for i := 0; i < len(got)-1; i++ {
		if !strings.HasSuffix(got[i], "\n```") {
			t.Fatalf("piece %d does not close its code block: ...%q", i, got[i][max(0, len(got[i])-20):])
		}
		if !strings.HasPrefix(got[i+1], "```\n") {
			t.Fatalf("piece %d does not reopen the code block: %q...", i+1, got[i+1][:20])
		}
	}
	if !strings.HasSuffix(got[len(got)-1], "```\nOutro.") {
		t.Fatalf("last piece = ...%q", got[len(got)-1])
	}
}

func TestChunkLongLines(t *testing.T) {
	// No spaces: a hard cut, but never inside a rune.
	in := strings.Repeat("é😀x", 500)
	got := Chunk(in, 100)
	checkPieces(t, in, got, 100)

	// Words: cut between words.
	in = strings.Repeat("abcdefghi ", 100)
	got = Chunk(in, 100)
	checkPieces(t, in, got, 100)
	for i, p := range got[:len(got)-1] {
		if !strings.HasSuffix(p, " ") && !strings.HasSuffix(p, "i") {
			t.Fatalf("piece %d cut inside a word: %q", i, p)
		}
	}

	// Entities and links are never cut.
	in = strings.Repeat("a&amp;b <https://example.com/some/path|label> ", 40)
	got = Chunk(strings.ReplaceAll(in, " ", ""), 100)
	for i, p := range got {
		if strings.Count(p, "&") != strings.Count(p, "&amp;") {
			t.Fatalf("piece %d splits an entity: %q", i, p)
		}
		if strings.Count(p, "<") != strings.Count(p, ">") {
			t.Fatalf("piece %d splits a link: %q", i, p)
		}
	}
}

func TestChunkUnclosedFence(t *testing.T) {
	in := "text\n```\ncode that never ends\nmore"
	got := Chunk(in, 100)
	checkPieces(t, in, got, 100)
	if !strings.HasSuffix(got[len(got)-1], "more\n```") {
		t.Fatalf("unclosed fence not closed: %q", got)
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

func FuzzSplit(f *testing.F) {
	f.Add("hello **world**\n```go\ncode\n```\n", uint16(64))
	f.Add(strings.Repeat("```\nx\n", 30), uint16(70))
	f.Add(strings.Repeat("a&amp;<b|c>😀 ", 50), uint16(64))
	f.Add(strings.Repeat("`", 300), uint16(64))
	f.Fuzz(func(t *testing.T, in string, size uint16) {
		max := 64 + int(size)%4000
		checkPieces(t, in, Chunk(in, max), max)

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
