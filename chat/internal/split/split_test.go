package split

import (
	"strings"
	"testing"
	"unicode"
)

// Option sets of the adapters.
var (
	slackLike   = Options{Measure: UTF16, Mrkdwn: true}
	discordLike = Options{Measure: UTF16, KeepLanguage: true}
)

func with(o Options, limit int) Options { o.Limit = limit; return o }

// stripForCompare drops what splitting may add or remove at a cut: white
// space and backticks (fences are closed and reopened, fence-only parts
// dropped).
func stripForCompare(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '`' {
			return -1
		}
		return r
	}, s)
}

// checkParts asserts the splitter's contract for one input and returns the
// parts: each within the limit, with balanced fences, not blank, reopening
// only with a fence (and tag), and together holding the input's content.
func checkParts(t *testing.T, text string, o Options) []Part {
	t.Helper()
	ps := Parts(text, o)
	var bodies strings.Builder
	for i, p := range ps {
		s := p.String()
		if n := o.Measure.Len(s); n > max(o.Limit, MinLimit) {
			t.Fatalf("part %d measures %d, limit %d", i, n, o.Limit)
		}
		if strings.Count(s, Fence)%2 != 0 {
			t.Fatalf("part %d has unbalanced fences:\n%s", i, s)
		}
		if strings.TrimSpace(strings.ReplaceAll(s, Fence, "")) == "" {
			t.Fatalf("part %d is blank: %q", i, s)
		}
		if p.Open != "" && (!strings.HasPrefix(p.Open, Fence) || !strings.HasSuffix(p.Open, "\n") || !o.KeepLanguage && p.Open != Fence+"\n") {
			t.Fatalf("part %d reopens with %q", i, p.Open)
		}
		bodies.WriteString(p.Body)
	}
	if got, want := stripForCompare(bodies.String()), stripForCompare(text); got != want {
		t.Fatalf("content changed by splitting:\n got %.200q\nwant %.200q", got, want)
	}
	return ps
}

func TestMeasure(t *testing.T) {
	for _, tt := range []struct {
		s             string
		points, units int
	}{{"", 0, 0}, {"abc", 3, 3}, {"é", 1, 1}, {"🙂", 1, 2}, {"a🙂b", 3, 4}} {
		if n := CodePoints.Len(tt.s); n != tt.points {
			t.Errorf("CodePoints.Len(%q) = %d, want %d", tt.s, n, tt.points)
		}
		if n := UTF16.Len(tt.s); n != tt.units {
			t.Errorf("UTF16.Len(%q) = %d, want %d", tt.s, n, tt.units)
		}
	}
	if got := UTF16.Prefix("ab🙂c", 3); got != "ab" {
		t.Errorf("Prefix cut inside a surrogate pair: %q", got)
	}
	if got := UTF16.Truncate("hello world", 6); got != "hello…" {
		t.Errorf("Truncate = %q", got)
	}
	if got := UTF16.Truncate("short", 6); got != "short" {
		t.Errorf("Truncate of a short text = %q", got)
	}
}

func TestShortTextIsOnePart(t *testing.T) {
	for _, o := range []Options{slackLike, discordLike} {
		if got := Markdown("hello\nworld", with(o, 100)); len(got) != 1 || got[0] != "hello\nworld" {
			t.Fatalf("Markdown = %q", got)
		}
		if got := Markdown("  \n\n \t", with(o, 100)); len(got) != 0 {
			t.Fatalf("blank input gave %q", got)
		}
	}
}

func TestPrefersParagraphsThenLines(t *testing.T) {
	para := strings.Repeat("word ", 15) // 75 characters
	in := para + "\n" + para + "\n\n" + para
	got := Markdown(in, with(slackLike, 160))
	checkParts(t, in, with(slackLike, 160))
	if len(got) != 2 || got[0] != para+"\n"+para || got[1] != para {
		t.Fatalf("Markdown = %q", got)
	}

	long := strings.Repeat("word ", 300) // 1500 characters
	text := long + "\n\n" + long + "\n\n" + long
	ps := checkParts(t, text, with(discordLike, 2000))
	if len(ps) != 3 {
		t.Fatalf("want 3 parts (one per paragraph), got %d", len(ps))
	}
	for i, p := range ps {
		if strings.TrimSpace(p.Body) != strings.TrimSpace(long) {
			t.Fatalf("part %d is not paragraph %d: %q…", i, i, p.Body[:40])
		}
	}
}

func TestCodeBlockReopenedWithoutLanguage(t *testing.T) {
	var b strings.Builder
	b.WriteString("Intro line.\n```\n")
	for i := range 200 {
		b.WriteString("line " + strings.Repeat("x", i%40) + "\n")
	}
	b.WriteString("```\nOutro.")
	in := b.String()
	got := Markdown(in, with(slackLike, 1000))
	checkParts(t, in, with(slackLike, 1000))
	if len(got) < 3 {
		t.Fatalf("want several parts, got %d", len(got))
	}
	for i := 0; i < len(got)-1; i++ {
		if !strings.HasSuffix(got[i], "\n```") {
			t.Fatalf("part %d does not close its code block: ...%q", i, got[i][max(0, len(got[i])-20):])
		}
		if !strings.HasPrefix(got[i+1], "```\n") {
			t.Fatalf("part %d does not reopen the code block: %q...", i+1, got[i+1][:20])
		}
	}
	if !strings.HasSuffix(got[len(got)-1], "```\nOutro.") {
		t.Fatalf("last part = ...%q", got[len(got)-1])
	}
}

func TestCodeBlockReopenedWithLanguage(t *testing.T) {
	var code strings.Builder
	for i := 0; i < 200; i++ {
		code.WriteString("fmt.Println(\"line number " + strings.Repeat("x", i%7) + "\")\n")
	}
	text := "Here is the fix:\n\n```go\n" + code.String() + "```\n\nThat is all."
	ps := checkParts(t, text, with(discordLike, 2000))
	if len(ps) < 3 {
		t.Fatalf("want the code block split over several parts, got %d", len(ps))
	}
	if ps[0].Close != closeFence || ps[1].Open != "```go\n" {
		t.Fatalf("first cut must close the block and reopen it as go: close %q, open %q", ps[0].Close, ps[1].Open)
	}
	last := ps[len(ps)-1]
	if !strings.Contains(last.Body, "That is all.") || last.Close != "" {
		t.Fatalf("last part = %+v", last)
	}
}

func TestUnclosedFenceIsClosed(t *testing.T) {
	in := "text\n```\ncode that never ends\nmore"
	got := Markdown(in, with(slackLike, 100))
	checkParts(t, in, with(slackLike, 100))
	if !strings.HasSuffix(got[len(got)-1], "more\n```") {
		t.Fatalf("unclosed fence not closed: %q", got)
	}
	ps := checkParts(t, "output:\n```\nstill running", with(discordLike, 2000))
	if len(ps) != 1 || ps[0].Close != closeFence {
		t.Fatalf("got %+v", ps)
	}
}

func TestLongLinesAndWideRunes(t *testing.T) {
	// No spaces: a hard cut, but never inside a rune.
	checkParts(t, strings.Repeat("é😀x", 500), with(slackLike, 100))
	checkParts(t, strings.Repeat("🙂", 3000), with(discordLike, 2000))
	checkParts(t, strings.Repeat("a", 5000), with(discordLike, 2000))
	// A run of backticks longer than a part.
	checkParts(t, strings.Repeat("`", 4100)+"x", with(discordLike, 2000))
	checkParts(t, "a\r\nb"+strings.Repeat("c\r\n", 1500), with(discordLike, 2000))

	// Words: cut between words.
	in := strings.Repeat("abcdefghi ", 100)
	got := Markdown(in, with(slackLike, 100))
	checkParts(t, in, with(slackLike, 100))
	for i, p := range got[:len(got)-1] {
		if !strings.HasSuffix(p, " ") && !strings.HasSuffix(p, "i") {
			t.Fatalf("part %d cut inside a word: %q", i, p)
		}
	}
}

func TestMrkdwnMarkupIsNeverCut(t *testing.T) {
	in := strings.Repeat("a&amp;b <https://example.com/some/path|label> ", 40)
	for _, text := range []string{strings.ReplaceAll(in, " ", ""), in, strings.Repeat("x <https://example.com|a label with many spaces in it> ", 30)} {
		for i, p := range Markdown(text, with(slackLike, 100)) {
			if strings.Count(p, "&") != strings.Count(p, "&amp;") {
				t.Fatalf("part %d splits an entity: %q", i, p)
			}
			if strings.Count(p, "<") != strings.Count(p, ">") {
				t.Fatalf("part %d splits a link: %q", i, p)
			}
		}
	}
}

// FuzzSplit checks the contract with Slack's options.
func FuzzSplit(f *testing.F) {
	f.Add("hello **world**\n```go\ncode\n```\n", uint16(64))
	f.Add(strings.Repeat("```\nx\n", 30), uint16(70))
	f.Add(strings.Repeat("a&amp;<b|c>😀 ", 50), uint16(64))
	f.Add(strings.Repeat("`", 300), uint16(64))
	f.Fuzz(func(t *testing.T, in string, size uint16) {
		checkParts(t, in, with(slackLike, 64+int(size)%4000))
	})
}

// FuzzSplitMarkdown checks the contract with Discord's options, including
// limits below MinLimit.
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
		checkParts(t, text, with(discordLike, limit%2001+1))
	})
}

// BenchmarkLongLine is one ~1 MB line of minified JSON, the shape that
// must stay linear.
func BenchmarkLongLine(b *testing.B) {
	in := strings.Repeat(`{"_id":"a*b","items":[1,2,3],"note":"x &lt; y &amp;&amp; *z"}`, 16000)
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		Parts(in, with(slackLike, 4000))
	}
}
