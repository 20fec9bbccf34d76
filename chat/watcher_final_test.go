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

// answerPoster is a recPoster that implements chat.AnswerFinder over
// answers another replica posted (by text), recording each lookup.
type answerPoster struct {
	*recPoster
	mu      sync.Mutex
	others  map[string]string // text → ref, posted by another replica
	lookups [][3]string       // markdown, after, before
}

func (p *answerPoster) FindAnswer(_ context.Context, _ chat.Thread, md, after, before string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lookups = append(p.lookups, [3]string{md, after, before})
	return p.others[md], nil
}

// A replica that takes a turn's answer claim over from another
// (ClaimFinalResponse.Earlier) looks in the thread first: the other may
// have posted the answer and died before recording it. Found, its post is
// recorded and nothing is posted again (the soak under faults' fork f05:
// an answer posted twice); not found, the answer is posted. A claim
// nobody held costs no lookup, and so does a turn with neither a message
// nor a card to look from: an equal answer of an older turn anywhere in
// the thread would be taken for its own, and the answer lost.
func TestTakenOverClaimLooksForTheEarlierHoldersAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, earlier string
		posted        string // by the earlier holder
		unanchored    bool   // the turn has no message ref and no card
		wantPosts     int
		wantLookups   int
		wantFinal     string // "": the ref of this replica's post
	}{
		{"posted by the claim's earlier holder", "bot-1", "turn five answer", false, 0, 1, "m-bot-1"},
		// A replica that finished the turn late (finishUnseen) posted it
		// naming its turn: the second form looked for.
		{"posted late by the claim's earlier holder", "bot-1", "↩️ _Turn 5's answer:_\n\nturn five answer", false, 0, 2, "m-bot-1"},
		{"claimed and never posted by the earlier holder", "bot-1", "", false, 1, 2, ""},
		{"a claim nobody held", "", "turn five answer", false, 1, 0, ""},
		{"a turn with nothing to look from", "bot-1", "turn five answer", true, 1, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var finals []string
			five := done(5, 2, "turn five answer")
			states := []session.TurnState{running(5, 1, "ls"), five}
			if tc.unanchored {
				states = states[1:] // answered at once: no card
			} else {
				five.MessageRefs = []string{"u5"}
				states[1] = five
			}
			f := &chattest.Sessions{
				SendFn:      sendTurn(5, false),
				TurnStateFn: (&script{states: states}).next,
				ClaimFn: func(_ string, req session.ClaimFinalRequest) (session.ClaimFinalResponse, error) {
					return session.ClaimFinalResponse{Granted: true, Earlier: tc.earlier}, nil
				},
				RecordFn: func(_ string, req session.ChatRefRequest) error {
					if req.Kind == "final" {
						mu.Lock()
						finals = append(finals, req.Ref)
						mu.Unlock()
					}
					return nil
				},
			}
			clock := newAutoClock()
			c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = "bot-2" })
			p := &answerPoster{recPoster: &recPoster{clock: clock}, others: map[string]string{}}
			if tc.posted != "" {
				p.others[tc.posted] = "m-bot-1"
			}
			if err := c.HandleMessage(context.Background(), p, msg("e5", "do it")); err != nil {
				t.Fatal(err)
			}
			waitIdle(t, c, testThread)
			if got := texts(p.recPoster); len(got) != tc.wantPosts {
				t.Errorf("posted %q; want the answer posted %d times", got, tc.wantPosts)
			}
			p.mu.Lock()
			lookups := p.lookups
			p.mu.Unlock()
			if len(lookups) != tc.wantLookups {
				t.Errorf("looked in the thread %d times, want %d", len(lookups), tc.wantLookups)
			} else if len(lookups) > 0 && lookups[0] != [3]string{"turn five answer", "u5", ""} {
				t.Errorf("looked for %q; want the answer after the turn's first message u5", lookups[0])
			}
			want := tc.wantFinal
			if posts := p.ops("text"); want == "" && len(posts) > 0 {
				want = posts[0].Ref
			}
			mu.Lock()
			defer mu.Unlock()
			if len(finals) != 1 || finals[0] != want {
				t.Errorf("recorded the answer as %q, want %q", finals, want)
			}
		})
	}
}
