package discord_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// TestTakeoverWaitsOutTheOtherReplicasWindow: two replicas on one bot
// token share Discord's edit bucket of a channel, but each one's discordgo
// paces by its own requests only. A replica that takes a card over
// (chat.TakeoverPacer) must not edit while the old holder's edits still
// fill the window: the fake keeps Discord's budget and records a 429 as a
// violation. Without TookOver's wait, the new replica's first edit is the
// sixth within the window (the chaos suite's load mode found it).
func TestTakeoverWaitsOutTheOtherReplicasWindow(t *testing.T) {
	window := 2 * time.Second
	f := fakediscord.Start(t, fakediscord.Options{Budgets: &fakediscord.Budgets{PerChannelWindow: window}})
	cfg := config(f)
	cfg.TakeoverWait = window
	rec := &chattest.Core{}
	old := start(t, cfg, rec)
	taker := start(t, cfg, &chattest.Core{})
	th := startSession(t, f, rec)
	card := func(i int) chat.Card {
		return chat.Card{Title: "⚙️ Running", Blocks: []chat.Block{{Kind: chat.BlockText, Text: fmt.Sprintf("⏳ `step %d`", i)}}}
	}
	ref, err := old.Post(t.Context(), th, card(0))
	if err != nil {
		t.Fatal(err)
	}
	// The old holder spends the channel's window: 5 edits.
	for i := 1; i <= 5; i++ {
		if err := old.Edit(t.Context(), th, ref, card(i)); err != nil {
			t.Fatal(err)
		}
	}
	taker.TookOver(th, ref)
	if err := taker.Edit(t.Context(), th, ref, card(6)); err != nil {
		t.Fatal(err)
	}
	if v := f.Violations(); len(v) != 0 {
		t.Fatalf("violations %+v; want none: the taker's first edit waits out the window", v)
	}
	if m, _ := f.Message(ref); !strings.Contains(m.Content+m.EmbedText(), "step 6") {
		t.Fatalf("the taker's edit did not land: %q", m.EmbedText())
	}
}
