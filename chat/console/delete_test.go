package console

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
)

// The terminal cannot take printed lines back: Delete says the card is
// void in one line and forgets it; a card it never printed is left alone.
func TestDeletePrintsTheCardVoid(t *testing.T) {
	var buf bytes.Buffer
	c := newConsole(&buf)
	th := c.thread()
	ref, _ := c.Post(context.Background(), th, chat.Card{Title: "⚙️ Running", Blocks: []chat.Block{{Kind: chat.BlockText, Text: "⏳ `make`"}}})
	buf.Reset()
	if err := c.Delete(context.Background(), th, ref); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "second copy") {
		t.Errorf("delete printed %q, want one line saying the card is void", got)
	}
	buf.Reset()
	if err := c.Delete(context.Background(), th, ref); err != nil || buf.Len() != 0 {
		t.Errorf("second delete: %v, printed %q; want nothing", err, buf.String())
	}
}
