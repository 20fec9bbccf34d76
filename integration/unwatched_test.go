package integration

import (
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/internal/botapp"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// TestTurnEndedUnwatchedIsFinishedByTheNextTurn is the long chaos run's
// stale card (seed 1796607650757124012): the bot that showed a turn's
// approval dies just after the click, the turn runs on and ends while no
// bot watches it, and the next message reaches a bot that never scanned
// for it. That bot's watcher, drawing the new turn, finishes the old one:
// its card shows the decision and no buttons, and its answer is posted,
// once. Before, the card kept offering Approve for a call that had been
// approved and run, and the answer was never posted.
func TestTurnEndedUnwatchedIsFinishedByTheNextTurn(t *testing.T) {
	e := newThreadEnv(t, false)
	platform := "unwatched"
	th := chat.Thread{Platform: platform, Channel: e.channel, Thread: "unwatched"}
	first, second := "the first turn's answer, posted late", "the second turn's answer"
	e.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch approved.txt")), fakeopenai.FinalStep(first), fakeopenai.FinalStep(second))

	bot := func(id string) (*botapp.Bot, tclient.Client) {
		c, err := srv.NewClient(e.ctx, tclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		// No Resume: this bot never scans for sessions that need one.
		b, err := botapp.New(e.ctx, c, e.cfg, botapp.Options{Settings: settingsHook, ReplicaID: id,
			WatchLease: 2 * time.Second, PollMax: 200 * time.Millisecond}, e.log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return b, c
	}
	a, ac := bot("replica-a")
	if err := a.Core.HandleMessage(e.ctx, e.p, chatMessage(th, "unwatched-1", "go")); err != nil {
		t.Fatal(err)
	}
	ts := e.waitState(th, "the approval shown", func(ts session.TurnState) bool { return ts.Pending != nil && ts.StatusRef != "" })
	card := ts.StatusRef
	e.waitCard(t, card, "the Approve button on the card", func(c chat.Card) bool { return hasButton(c, chat.ActionApprove) })

	// The bot dies; the click it acknowledged reaches the session.
	ac.Close()
	a.Close()
	if err := e.approve(th, ts.Pending.CallID, session.DecisionApprove, alice, ""); err != nil {
		t.Fatal(err)
	}
	e.waitState(th, "the first turn over, its answer unposted", func(ts session.TurnState) bool {
		return ts.Turn == 1 && ts.Status == session.StatusComplete && ts.AwaitingPost
	})

	b, _ := bot("replica-b")
	if err := b.Core.HandleMessage(e.ctx, e.p, chatMessage(th, "unwatched-2", "and now?")); err != nil {
		t.Fatal(err)
	}
	e.waitState(th, "the second turn answered", func(ts session.TurnState) bool { return ts.Turn == 2 && ts.FinalRef != "" })
	if err := b.Core.WaitThread(e.ctx, th); err != nil {
		t.Fatal(err)
	}

	last := e.lastCard(t, card)
	text := cardText(last)
	if hasButton(last, chat.ActionApprove) || !strings.Contains(text, "approved by") || last.Title != "✅ Done" {
		t.Errorf("the first turn's card after the second turn: title %q, approve button %v, text:\n%s\nwant it done, showing the decision, with no buttons",
			last.Title, hasButton(last, chat.ActionApprove), text)
	}
	if n := e.finalPosts(th, first); n != 1 {
		t.Errorf("the first turn's answer was posted %d times, want once", n)
	}
	if n := e.finalPosts(th, second); n != 1 {
		t.Errorf("the second turn's answer was posted %d times, want once", n)
	}
}

// hasButton reports whether c offers a button of action id.
func hasButton(c chat.Card, id string) bool {
	for _, b := range c.Blocks {
		for _, btn := range b.Buttons {
			if btn.ID == id {
				return true
			}
		}
	}
	return false
}

// lastCard is the latest version of the card posted as ref.
func (e *threadEnv) lastCard(t *testing.T, ref string) chat.Card {
	t.Helper()
	ps, _ := e.p.snapshot()
	for _, p := range ps {
		if p.Ref == ref {
			return p.Cards[len(p.Cards)-1]
		}
	}
	t.Fatalf("no card %s was posted", ref)
	return chat.Card{}
}

// waitCard waits until the latest version of card ref satisfies cond.
func (e *threadEnv) waitCard(t *testing.T, ref, what string, cond func(chat.Card) bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		e.p.recPoster.mu.Lock()
		changed := e.p.changed
		e.p.recPoster.mu.Unlock()
		ps, _ := e.p.snapshot()
		for _, p := range ps {
			if p.Ref == ref && cond(p.Cards[len(p.Cards)-1]) {
				return
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
