package discord_test

import (
	"context"
	"errors"
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

// TestClickAnsweredByAnotherReplicaGetsNoSecondReply: Discord delivers a
// click to every replica on the bot's token. The one whose decision
// reached the session acknowledges it; the other's decision is refused
// ("already decided"), and that refusal must not reach the user, who
// would otherwise read "already decided" after every click they made (the
// chaos suite's load mode: a reply after each of 282 clicks). The second
// replica replies only once the first has acknowledged, so the order is
// the test's, not the machine's.
func TestClickAnsweredByAnotherReplicaGetsNoSecondReply(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	clicked := make(chan string, 1)
	replied := make(chan struct{})
	deciding := &chattest.Core{} // its decision reaches the session
	refused := &chattest.Core{OnAction: func(ctx context.Context, _ chat.Poster, a chat.Action) error {
		id := <-clicked
		if err := f.Wait(ctx, "the other replica's ack", func() bool { in, _ := f.Interaction(id); return in.Acked }); err != nil {
			return err
		}
		_ = a.Reply(ctx, "already decided: approved by alice")
		close(replied)
		return nil
	}}
	a := start(t, config(f), deciding)
	// The refusing replica must not acknowledge at its bound while it
	// waits for the other's ack.
	slow := config(f)
	slow.AckWithin = time.Hour
	start(t, slow, refused)
	th := startSession(t, f, deciding)
	ref, ids := statusMessage(t, a, th)
	id, err := f.ClickButton(ref, alice, ids[chat.ActionApprove])
	if err != nil {
		t.Fatal(err)
	}
	clicked <- id
	select {
	case <-replied:
	case <-time.After(waitTimeout):
		t.Fatal("the second replica never handled the click")
	}
	for _, m := range f.Messages(th.Thread) {
		if strings.Contains(m.Content, "already decided") {
			t.Fatalf("the user got the second replica's refusal (%q, ephemeral %v) for a click the first one answered", m.Content, m.Ephemeral())
		}
	}
	if in := interaction(t, f, id); in.ResponseType != fakediscord.CallbackDeferUpdate || len(in.FollowUps) != 0 {
		t.Fatalf("interaction answered with type %d and %d follow-ups; want one deferred update", in.ResponseType, len(in.FollowUps))
	}
}

// TestMentionsInAChannelDoNotWaitForEachOther: each mention in a plain
// channel starts a session of its own, so one whose handoff is slow (its
// workflow starting on a loaded server) must not hold the next one back.
// The first session's handoff here lasts until the second mention has been
// handed on; with one queue per channel it would wait forever.
func TestMentionsInAChannelDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	second := make(chan struct{})
	firstDone := make(chan error, 1)
	rec := &chattest.Core{OnMessage: func(ctx context.Context, _ chat.Poster, m chat.Message) error {
		switch m.Text {
		case "first":
			select {
			case <-second:
				firstDone <- nil
			case <-time.After(waitTimeout):
				firstDone <- errors.New("the second mention was not handed on while the first one's handoff went on")
			}
		case "second":
			close(second)
		}
		return nil
	}}
	start(t, config(f), rec)
	for _, text := range []string{"first", "second"} {
		if _, err := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+text); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
}
