package discord

import (
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
)

// TestToMessageNeutralisesCode: controls and bidi overrides are escaped,
// and backticks in a command cannot close its code block nor be replaced
// by lookalikes (the shown command must be the one that runs).
func TestToMessageNeutralisesCode(t *testing.T) {
	cmd := "touch PWNED.txt #\r\x1b[2Kls ``` done\n```\n@everyone \u202eexe"
	m, err := ToMessage(chat.Card{Title: "t", Blocks: []chat.Block{
		{Kind: chat.BlockCode, Text: cmd, Keep: true},
		{Kind: chat.BlockText, Text: "model says \x1b[2J\u2066"},
		{Kind: chat.BlockContext, Text: "ctx \r"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := m.Embeds[0].Description
	for _, bad := range []string{"\r", "\x1b", "\u202e", "\u2066", "ˋ"} {
		if strings.Contains(d, bad) {
			t.Errorf("description holds %q: %q", bad, d)
		}
	}
	if n := strings.Count(d, "```"); n != 2 {
		t.Errorf("description has %d live fences, want the block's own 2: %q", n, d)
	}
	if got := strings.ReplaceAll(d, "\u200b", ""); !strings.Contains(got, "ls ``` done\n```\n@everyone") {
		t.Errorf("the backticks do not read as they run: %q", d)
	}
	if !strings.Contains(d, `#\r\x1b[2Kls`) || !strings.Contains(d, `\u202eexe`) {
		t.Errorf("escapes not visible: %q", d)
	}
	if am := m.Send().AllowedMentions; am == nil || len(am.Parse) != 0 {
		t.Errorf("a card may ping: %+v", am)
	}
}
