package slack

import (
	"encoding/json"
	"strings"
	"testing"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
)

// sectionTexts are the mrkdwn texts of the section blocks.
func sectionTexts(bs []slackgo.Block) []string {
	var out []string
	for _, b := range bs {
		if s, ok := b.(*slackgo.SectionBlock); ok && s.Text != nil {
			out = append(out, s.Text.Text)
		}
	}
	return out
}

// TestToBlocksNeutralisesCode: a command in a code block shows its
// controls escaped, cannot close the fence, and cannot form a mention or
// a broadcast.
func TestToBlocksNeutralisesCode(t *testing.T) {
	cmd := "touch PWNED.txt #\r\x1b[2Kls ```\n<!channel> <@U1> \u202eexe"
	bs, fb := ToBlocks(chat.Card{Title: "t", Blocks: []chat.Block{{Kind: chat.BlockCode, Text: cmd, Keep: true}, {Kind: chat.BlockText, Text: "answer \x1b[2J <!here>"}}})
	raw, _ := json.Marshal(bs)
	all := strings.Join(sectionTexts(bs), "\n") + fb
	for _, bad := range []string{"\r", "\x1b", "\u202e", "<!channel>", "<@U1>", "<!here>"} {
		if strings.Contains(all, bad) {
			t.Errorf("blocks hold %q: %s", bad, raw)
		}
	}
	code := sectionTexts(bs)[1]
	if n := strings.Count(code, "```"); n != 2 {
		t.Errorf("the code section has %d fences, want its own 2: %q", n, code)
	}
	for _, want := range []string{`\r\x1b[2Kls`, `\u202eexe`, "&lt;!channel&gt;"} {
		if !strings.Contains(code, want) {
			t.Errorf("code section lacks %q: %q", want, code)
		}
	}
}

// TestToBlocksNeverCutsAKeptBlock: a Keep block longer than a section is
// split over sections, all of it shown; other code keeps its tail.
func TestToBlocksNeverCutsAKeptBlock(t *testing.T) {
	var lines []string
	for i := range 200 {
		lines = append(lines, strings.Repeat("x", 30)+" line "+strings.Repeat("&", i%5))
	}
	lines = append(lines, "touch LONGTAIL.txt", strings.Repeat("y", 4000)+"END")
	text := strings.Join(lines, "\n")
	bs, _ := ToBlocks(chat.Card{Blocks: []chat.Block{{Kind: chat.BlockCode, Text: text, Keep: true}}})
	var got []string
	for _, s := range sectionTexts(bs) {
		if TextLen(s) > maxSectionText {
			t.Fatalf("section of %d characters", TextLen(s))
		}
		body := strings.TrimSuffix(strings.TrimPrefix(s, fenceOpen), fenceClose)
		got = append(got, strings.ReplaceAll(strings.ReplaceAll(body, "&amp;", "&"), "\n", ""))
	}
	if want := strings.ReplaceAll(text, "\n", ""); strings.Join(got, "") != want {
		t.Fatalf("the kept block lost text: got %d characters, want %d", len(strings.Join(got, "")), len(want))
	}
	if CodeLen("a&b") != len("a&amp;b") {
		t.Errorf("CodeLen does not count entities: %d", CodeLen("a&b"))
	}
}
