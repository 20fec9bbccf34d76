package discord

import (
	"strings"
	"testing"
	"unicode"
)

// whitespaceFree drops all white space, to compare content across splits.
func whitespaceFree(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// checkParts asserts the splitter's contract for one input.
func checkParts(t *testing.T, text string, limit int) []piece {
	t.Helper()
	ps := splitPieces(text, limit)
	var bodies strings.Builder
	for i, p := range ps {
		part := p.pre + p.body + p.post
		if n := textLen(part); n > max(limit, minSplitLimit) {
			t.Fatalf("part %d is %d units, limit %d", i, n, limit)
		}
		if strings.Count(part, fence)%2 != 0 {
			t.Fatalf("part %d has unbalanced fences:\n%s", i, part)
		}
		if strings.TrimSpace(p.body) == "" {
			t.Fatalf("part %d is blank", i)
		}
		bodies.WriteString(p.body)
	}
	want := whitespaceFree(strings.ReplaceAll(text, "\r\n", "\n"))
	if got := whitespaceFree(bodies.String()); got != want {
		t.Fatalf("content changed by splitting:\n got %q\nwant %q", got, want)
	}
	return ps
}

func TestSplitShortTextIsOnePart(t *testing.T) {
	got := SplitMarkdown("All tests pass.", MaxContent)
	if len(got) != 1 || got[0] != "All tests pass." {
		t.Fatalf("got %q", got)
	}
	if got := SplitMarkdown(" \n\t", MaxContent); len(got) != 0 {
		t.Fatalf("blank text gave parts %q", got)
	}
}

func TestSplitPrefersParagraphsThenLines(t *testing.T) {
	para := strings.Repeat("word ", 300) // 1500 chars
	text := para + "\n\n" + para + "\n\n" + para
	ps := checkParts(t, text, MaxContent)
	if len(ps) != 3 {
		t.Fatalf("want 3 parts (one per paragraph), got %d", len(ps))
	}
	for i, p := range ps {
		if strings.TrimSpace(p.body) != strings.TrimSpace(para) {
			t.Fatalf("part %d is not paragraph %d: %q…", i, i, p.body[:40])
		}
	}
}

func TestSplitClosesAndReopensCodeBlocks(t *testing.T) {
	var code strings.Builder
	for i := 0; i < 200; i++ {
		code.WriteString("fmt.Println(\"line number ")
		code.WriteString(strings.Repeat("x", i%7))
		code.WriteString("\")\n")
	}
	text := "Here is the fix:\n\n```go\n" + code.String() + "```\n\nThat is all."
	ps := checkParts(t, text, MaxContent)
	if len(ps) < 3 {
		t.Fatalf("want the code block split over several parts, got %d", len(ps))
	}
	if ps[0].post != closeFence || ps[1].pre != "```go\n" {
		t.Fatalf("first split must close the block and reopen it as go: post %q, pre %q", ps[0].post, ps[1].pre)
	}
	last := ps[len(ps)-1]
	if !strings.Contains(last.body, "That is all.") || last.post != "" {
		t.Fatalf("last part = %+v", last)
	}
}

func TestSplitClosesAnUnclosedBlock(t *testing.T) {
	ps := checkParts(t, "output:\n```\nstill running", MaxContent)
	if len(ps) != 1 || ps[0].post != closeFence {
		t.Fatalf("got %+v", ps)
	}
}

func TestSplitLongLinesAndWideRunes(t *testing.T) {
	// No spaces or newlines: hard cuts. Emoji count two UTF-16 units.
	checkParts(t, strings.Repeat("🙂", 3000), MaxContent)
	checkParts(t, strings.Repeat("a", 5000), MaxContent)
	// A run of backticks longer than a part.
	checkParts(t, strings.Repeat("`", 4100)+"x", MaxContent)
	checkParts(t, "a\r\nb"+strings.Repeat("c\r\n", 1500), MaxContent)
}

func FuzzSplitMarkdown(f *testing.F) {
	f.Add("hello", 2000)
	f.Add("```go\nfunc main() {}\n```\n"+strings.Repeat("x ", 1500), 100)
	f.Add(strings.Repeat("```\n", 50)+strings.Repeat("y", 300), 64)
	f.Add("text ```inline``` more ```open\n"+strings.Repeat("z\n", 400), 200)
	f.Add(strings.Repeat("🙂`", 700), 90)
	f.Fuzz(func(t *testing.T, text string, limit int) {
		if limit < 0 {
			limit = -limit
		}
		limit = limit%(MaxContent+1) + 1
		checkParts(t, text, limit)
	})
}
