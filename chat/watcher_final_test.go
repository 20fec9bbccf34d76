package chat_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// A finished turn's last card edit that fails is made again before the
// answer goes out: no later poll would make it, and the card would show
// the turn unfinished for good. The long chaos run of 2026-12-06 (seed
// 1796551543678679107) found a card still offering Approve for a call that
// was approved, run and answered: the final edit ran into its lease bound
// while the server restarted, and the watcher posted the answer and ended.
func TestFailedFinalCardEditIsMadeAgain(t *testing.T) {
	f := &chattest.Sessions{
		SendFn:      sendTurn(5, false),
		TurnStateFn: (&script{states: []session.TurnState{running(5, 1, "ls"), done(5, 2, "five")}}).next,
		WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
			return session.ClaimWatchResponse{Granted: !req.Release, Holder: req.Claimer}, nil
		},
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	var mu sync.Mutex
	failed := 0
	p := &recPoster{clock: clock, EditFn: func(_ string, card chat.Card) error {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(card.Title, "Done") && failed < 3 {
			failed++
			return errors.New("slack: chat.update: context deadline exceeded")
		}
		return nil
	}}
	if err := c.HandleMessage(context.Background(), p, msg("e5", "do it")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	ev := p.Events()
	final, answer := -1, -1
	for i, e := range ev {
		switch {
		case e.Op == "edit" && strings.Contains(e.Card.Title, "Done"):
			final = i
		case e.Op == "text" && e.Text == "five":
			answer = i
		}
	}
	if final < 0 {
		t.Fatalf("the turn's card never showed it done (%d failed edits); events: %+v", failed, ev)
	}
	if answer < 0 || answer < final {
		t.Errorf("answer at event %d, the card's last edit at %d: the card must be settled before the answer lets the next turn start", answer, final)
	}
}
