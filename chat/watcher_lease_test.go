package chat_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// A watcher that stood by while another replica held the watch lease and
// answered two turns, then got the lease, must not post those turns'
// answers again. The soak (400 turns, no faults) posted turns 109 and 152
// twice this way: the catch-up posted every turn but the previous one
// unclaimed. The scripted session answers claims as the workflow does: it
// keeps claims for the current and the previous turn only.
func TestStandbyWatcherDoesNotRepostAnsweredTurns(t *testing.T) {
	hist := []session.HistoryEntry{
		{Turn: 5, Msg: session.Message{Role: session.RoleUser, Content: "do it"}},
		{Turn: 5, Msg: session.Message{Role: session.RoleAssistant, Content: "turn five answer"}},
		{Turn: 6, Msg: session.Message{Role: session.RoleUser, Content: "more"}},
		{Turn: 6, Msg: session.Message{Role: session.RoleAssistant, Content: "turn six answer"}},
		{Turn: 7, Msg: session.Message{Role: session.RoleUser, Content: "again"}},
	}
	seven := running(7, 9)
	seven.Previous = &session.TurnEnd{Turn: 6, Status: session.StatusComplete, FinalText: "turn six answer", FinalRef: "m6", FinalClaim: "bot-b"}
	var mu sync.Mutex
	claims := 0
	f := &chattest.Sessions{
		SendFn:      sendTurn(5, false),
		TurnStateFn: (&script{states: []session.TurnState{running(5, 1), running(6, 5), seven}}).next,
		HistoryFn:   func(string, session.HistoryRequest) ([]session.HistoryEntry, error) { return hist, nil },
		// bot-b holds the lease for the first two claims (turns 5 and 6,
		// which it answers), then lets it go.
		WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			if req.Release {
				return session.ClaimWatchResponse{}, nil
			}
			if claims++; claims <= 2 {
				return session.ClaimWatchResponse{Holder: "bot-b"}, nil
			}
			return session.ClaimWatchResponse{Granted: true, Holder: req.Claimer}, nil
		},
		ClaimFn: func(_ string, req session.ClaimFinalRequest) (session.ClaimFinalResponse, error) {
			switch req.Turn {
			case 6:
				return session.ClaimFinalResponse{Posted: true, Holder: "bot-b"}, nil
			case 7:
				return session.ClaimFinalResponse{Granted: true}, nil
			}
			return session.ClaimFinalResponse{}, fmt.Errorf("turn %d is not the current turn (7)", req.Turn)
		},
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = "bot-a" })
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e5", "do it")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if got := texts(p); len(got) != 0 {
		t.Errorf("answers posted by the replica that stood by: %q; bot-b posted them", got)
	}
}

// A message that reaches a replica while its watcher is giving the watch
// lease up (the turn before was answered) must not leave a watcher that
// draws the new turn as the holder of a lease the release just cleared:
// another replica takes a lease nobody holds, and both draw the turn. The
// soak's bots logged "lost the watch lease; standing by" with no holder
// every few minutes. The scripted session keeps the lease as the workflow
// does (a claim by its holder renews it; a release by its holder clears
// it), and every card and answer must be drawn while bot-a holds it.
func TestMessageDuringLeaseReleaseKeepsOneHolder(t *testing.T) {
	var (
		mu        sync.Mutex
		holder    string
		sentNext  = make(chan struct{})
		releasing = make(chan struct{})
		once      sync.Once
		states    = &script{states: []session.TurnState{done(5, 3, "five")}}
	)
	claim := func(claimer string) session.ClaimWatchResponse {
		if holder != "" && holder != claimer {
			return session.ClaimWatchResponse{Holder: holder}
		}
		holder = claimer
		return session.ClaimWatchResponse{Granted: true, Holder: claimer}
	}
	f := &chattest.Sessions{
		SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			r := claim(req.Watch.Claimer)
			turn := 5
			if req.EventID == "e6" {
				turn = 6
				states.mu.Lock()
				states.states, states.polls = []session.TurnState{running(6, 10, "ls"), done(6, 11, "six")}, 0
				states.mu.Unlock()
			}
			return session.MessageResponse{Turn: turn, Watch: &r}, nil
		},
		TurnStateFn: states.next,
		WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
			if req.Release {
				// The first release waits until the next message was
				// sent (and granted the lease with it).
				once.Do(func() { close(releasing); <-sentNext })
				mu.Lock()
				defer mu.Unlock()
				if holder == req.Claimer {
					holder = ""
				}
				return session.ClaimWatchResponse{Holder: holder}, nil
			}
			mu.Lock()
			defer mu.Unlock()
			return claim(req.Claimer), nil
		},
	}
	var unheld []string
	check := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		if holder != "bot-a" {
			unheld = append(unheld, fmt.Sprintf("%s while the lease was held by %q", what, holder))
		}
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = "bot-a" })
	p := &recPoster{clock: clock, PostFn: func(c chat.Card) error { check("posted card " + c.Title); return nil }}
	p.EditFn = func(_ string, c chat.Card) error { check("edited card " + c.Title); return nil }
	if err := c.HandleMessage(context.Background(), p, msg("e5", "do it")); err != nil {
		t.Fatal(err)
	}
	<-releasing
	if err := c.HandleMessage(context.Background(), p, msg("e6", "more")); err != nil {
		t.Fatal(err)
	}
	close(sentNext)
	waitIdle(t, c, testThread)
	if got := texts(p); len(got) != 2 || got[1] != "six" {
		t.Errorf("answers = %q, want five and six", got)
	}
	if len(p.ops("post")) == 0 {
		t.Errorf("turn 6's card was never drawn: %+v", p.Events())
	}
	for _, u := range unheld {
		t.Error(u)
	}
}

// awaitingCall is turn's state while its call call_x waits for approval.
func awaitingCall(turn int, v int64) session.TurnState {
	return session.TurnState{Turn: turn, Version: v, Status: session.StatusAwaitingApproval, Backend: "local",
		ToolCalls: []session.ToolCallState{{CallID: "call_x", Name: "shell", Commands: []string{"touch f"}, Status: session.CallAwaitingApproval}},
		Pending:   &session.PendingApproval{CallID: "call_x", Command: "touch f", Reason: "not read-only"}}
}

// A watcher whose last view of a turn is older than its end — it saw a
// call waiting for approval, then its next poll found the next turn
// running — must not draw that old view over the card. The long chaos run
// "lost" an approval this way: the user's click was decided and the call
// ran, another replica finished the turn (its card showed the decision)
// and answered it, and the first replica's watcher, polling again after a
// server restart, finalized the card from its last view: the call
// undecided, "ended between two updates".
func TestMissedTurnAnsweredElsewhereKeepsItsCard(t *testing.T) {
	six := running(6, 20)
	six.Previous = &session.TurnEnd{Turn: 5, Status: session.StatusComplete, FinalText: "five", FinalRef: "t9", FinalClaim: "bot-b"}
	f := &chattest.Sessions{
		SendFn:      sendTurn(5, false),
		TurnStateFn: (&script{states: []session.TurnState{awaitingCall(5, 3), six}}).next,
		WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
			return session.ClaimWatchResponse{Granted: !req.Release, Holder: req.Claimer}, nil
		},
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = "bot-a" })
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e5", "do it")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if len(p.ops("post")) != 1 {
		t.Fatalf("cards posted: %d, want the turn's one", len(p.ops("post")))
	}
	for _, e := range p.ops("edit") {
		t.Errorf("card %s edited from the old view after another replica finished the turn:\n%s", e.Ref, allText(e.Card))
	}
	if got := answers(p); len(got) != 0 {
		t.Errorf("answers posted: %q; bot-b posted it", got)
	}
}

// answers are the texts posted but approval notices.
func answers(p *recPoster) []string {
	var out []string
	for _, s := range texts(p) {
		if !strings.HasPrefix(s, "✋ ") {
			out = append(out, s)
		}
	}
	return out
}

// A watcher that finishes a turn it last saw waiting for an approval (the
// next turn began between two polls, and no other replica answered it)
// shows the decision the session recorded since, not the call undecided.
func TestMissedTurnShowsDecisionsMadeSince(t *testing.T) {
	six := running(6, 20)
	six.Previous = &session.TurnEnd{Turn: 5, Status: session.StatusComplete, FinalText: "five"}
	ann := session.User{ID: "U1", Name: "ann"}
	f := &chattest.Sessions{
		SendFn:      sendTurn(5, false),
		TurnStateFn: (&script{states: []session.TurnState{awaitingCall(5, 3), six}}).next,
		WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
			return session.ClaimWatchResponse{Granted: !req.Release, Holder: req.Claimer}, nil
		},
		InfoFn: func(string) (session.Info, error) {
			return session.Info{Decisions: []session.DecisionRecord{
				{CallID: "call_x", Decision: session.DecisionReject, User: ann, Turn: 2}, // an earlier turn's call of the same ID
				{CallID: "call_x", Command: "touch f", Decision: session.DecisionApprove, User: ann, Turn: 5},
			}}, nil
		},
		HistoryFn: func(string, session.HistoryRequest) ([]session.HistoryEntry, error) {
			return []session.HistoryEntry{{Turn: 5, Msg: session.Message{Role: session.RoleAssistant, Content: "five"}}}, nil
		},
		ClaimFn: func(string, session.ClaimFinalRequest) (session.ClaimFinalResponse, error) {
			return session.ClaimFinalResponse{Granted: true}, nil
		},
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = "bot-a" })
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e5", "do it")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	edits := p.ops("edit")
	if len(edits) == 0 {
		t.Fatal("the card was never finalized")
	}
	last := allText(edits[len(edits)-1].Card)
	if !strings.Contains(last, "approved by") || strings.Contains(last, "rejected by") {
		t.Errorf("final card does not show the turn's decision (approved by ann):\n%s", last)
	}
	for _, bl := range edits[len(edits)-1].Card.Blocks {
		for _, b := range bl.Buttons {
			if b.ID == chat.ActionApprove {
				t.Errorf("final card still offers Approve:\n%s", last)
			}
		}
	}
	if got := answers(p); len(got) != 1 || got[0] != "↩️ _Turn 5's answer:_\n\nfive" {
		t.Errorf("answers posted: %q, want [five], naming turn 5", got)
	}
}

// handoffPoster is a recPoster that records, among its events, what the
// core tells it of taken-over messages and threads ("took", Ref "" for a
// thread).
type handoffPoster struct{ *recPoster }

func (p handoffPoster) TookOver(_ chat.Thread, ref string) {
	p.add(posterEvent{Op: "took", Ref: ref})
}

// handoffBudget is a platform whose edit window a thread shares across
// replicas (Discord's 5 edits per 5 s per channel).
func handoffBudget(cfg *chat.CoreConfig) {
	cfg.ReplicaID = "bot-a"
	cfg.Budgets["test"] = chat.Budget{MinEditInterval: time.Second, EditBurst: 5, HandoffWindow: 5 * time.Second}
}

// A replica that starts holding a session's watch lease may follow
// another replica that drew the session until a moment ago and filled the
// thread's edit window, which every replica on the token shares: it tells
// the adapter before its first edit, whatever card that edit is for. A
// takeover of a recorded card did so already; a new card did not, and the
// chaos suite's load mode counted 12 Discord rate-limit violations (6
// edits within 5 s) around such handoffs.
func TestStartingToHoldTheWatchWaitsOutTheSharedWindow(t *testing.T) {
	s := &script{states: []session.TurnState{running(1, 1, "ls"), running(1, 2, "ls", "make"), done(1, 3, "ok")}}
	f := &chattest.Sessions{SendFn: sendTurn(1, false), TurnStateFn: s.next}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, handoffBudget)
	p := handoffPoster{&recPoster{clock: clock}}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "build")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	took := -1
	for i, e := range p.Events() {
		switch {
		case e.Op == "took" && e.Ref == "" && took < 0:
			took = i
		case e.Op == "edit" && took < 0:
			t.Fatalf("edited %s before the adapter was told the thread was taken up: %+v", e.Ref, p.Events())
		}
	}
	if took < 0 || len(p.ops("edit")) == 0 {
		t.Fatalf("events %+v; want the thread taken up, then the card's edits", p.Events())
	}
}

// The same replica drawing the session's next turn right after it gave
// the lease up waits nothing: no other replica can have edited since its
// hold ended, as each waits a window from its own grant.
func TestHoldingTheWatchAgainAtOnceWaitsNothing(t *testing.T) {
	states := &script{states: []session.TurnState{running(1, 1, "ls"), done(1, 2, "one")}}
	turn := 0
	f := &chattest.Sessions{
		SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
			turn++
			return session.MessageResponse{Turn: turn, Watch: &session.ClaimWatchResponse{Granted: true, Holder: req.Watch.Claimer}}, nil
		},
		TurnStateFn: states.next,
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, handoffBudget)
	p := handoffPoster{&recPoster{clock: clock}}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "one")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	states.mu.Lock()
	states.states, states.polls = []session.TurnState{running(2, 3, "make"), done(2, 4, "two")}, 0
	states.mu.Unlock()
	if err := c.HandleMessage(context.Background(), p, msg("e2", "two")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	n := 0
	for _, e := range p.Events() {
		if e.Op == "took" && e.Ref == "" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the thread was taken up %d times; want once, for the first grant only: %+v", n, p.Events())
	}
	if got := texts(p.recPoster); len(got) != 2 {
		t.Errorf("answers %q; want both turns'", got)
	}
}

// TestRedeliveredMessageGrantsNoLeaseToItsSecondSender: Slack delivers an
// event to both replicas, and both send it. Temporal answers the second
// send (the same update ID) with the first one's outcome, whose lease was
// granted to the first sender; the second must not take that grant for its
// own. It did, and both replicas drew the turn as the lease's holder: the
// chaos suite saw two writers on one card, past Slack's per-message pace
// (14 violations), and a call shown on two status cards.
func TestRedeliveredMessageGrantsNoLeaseToItsSecondSender(t *testing.T) {
	var (
		mu     sync.Mutex
		holder string
		first  = map[string]session.MessageResponse{}
	)
	// The turn runs for the first 40 polls (of either replica), so both
	// see it running; once it is done, the answer's record shows in the
	// turn state as the session's would, which is what ends the standby
	// replica's watch. (Without it the standby polled on until the
	// holder's release, every poll a virtual wait, and when the holder's
	// goroutine was slow to run it used up the test clock's waits: 4 of
	// 300 runs hung.)
	polls := 0
	var f *chattest.Sessions
	turnState := func(string) (session.TurnState, error) {
		mu.Lock()
		polls++
		n := polls
		mu.Unlock()
		if n <= 40 {
			return running(5, 10, "ls"), nil
		}
		ts := done(5, 12, "five")
		for _, r := range f.Refs() {
			if r.Kind == "final" && r.Turn == 5 {
				ts.FinalRef = r.Ref
			}
		}
		return ts, nil
	}
	f = &chattest.Sessions{
		SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			if r, ok := first[req.EventID]; ok {
				return r, nil // Temporal: a repeated update ID gets the first outcome
			}
			if holder == "" {
				holder = req.Watch.Claimer
			}
			r := session.MessageResponse{Turn: 5, Watch: &session.ClaimWatchResponse{Granted: holder == req.Watch.Claimer, Holder: holder}}
			first[req.EventID] = r
			return r, nil
		},
		TurnStateFn: turnState,
		WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			if req.Release {
				if holder == req.Claimer {
					holder = ""
				}
				return session.ClaimWatchResponse{Holder: holder}, nil
			}
			if holder != "" && holder != req.Claimer {
				return session.ClaimWatchResponse{Holder: holder}, nil
			}
			holder = req.Claimer
			return session.ClaimWatchResponse{Granted: true, Holder: holder}, nil
		},
	}
	clock := newAutoClock()
	// A long lease: a grant taken for its own is not renewed (and so not
	// found out) for a third of it, while the turn runs.
	a := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID, cfg.WatchLease = "bot-a", time.Hour })
	b := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID, cfg.WatchLease = "bot-b", time.Hour })
	// Every write to the thread is made by the lease's holder.
	var wrong []string
	poster := func(replica string) *recPoster {
		check := func(what string) error {
			mu.Lock()
			defer mu.Unlock()
			if holder != replica {
				wrong = append(wrong, fmt.Sprintf("%s %s while the lease was %q's", replica, what, holder))
			}
			return nil
		}
		p := &recPoster{clock: clock, PostFn: func(c chat.Card) error { return check("posted card " + c.Title) }}
		p.EditFn = func(_ string, c chat.Card) error { return check("edited card " + c.Title) }
		return p
	}
	pa, pb := poster("bot-a"), poster("bot-b")
	if err := a.HandleMessage(context.Background(), pa, msg("e5", "do it")); err != nil {
		t.Fatal(err)
	}
	if err := b.HandleMessage(context.Background(), pb, msg("e5", "do it")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, a, testThread)
	waitIdle(t, b, testThread)
	if len(pa.Events())+len(pb.Events()) == 0 {
		t.Fatal("nobody drew the turn")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, w := range wrong {
		t.Error(w)
	}
}

// A watcher's release names the hold it gives up, as the workflow granted
// it (with the message, or by a claim), so the workflow can refuse it
// when that hold was renewed since (session.ClaimWatchRequest.Held).
func TestReleaseNamesTheHoldItGivesUp(t *testing.T) {
	granted := time.Date(2025, 1, 2, 3, 4, 20, 123456789, time.UTC)
	claimed := granted.Add(time.Minute)
	for _, withMessage := range []bool{true, false} {
		var mu sync.Mutex
		var released []session.ClaimWatchRequest
		f := &chattest.Sessions{
			SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
				if !withMessage {
					return session.MessageResponse{Turn: 1}, nil
				}
				return session.MessageResponse{Turn: 1, Watch: &session.ClaimWatchResponse{Granted: true, Holder: req.Watch.Claimer, Until: granted}}, nil
			},
			TurnStateFn: (&script{states: []session.TurnState{running(1, 1, "ls"), done(1, 2, "ok")}}).next,
			WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
				mu.Lock()
				defer mu.Unlock()
				if req.Release {
					released = append(released, req)
					return session.ClaimWatchResponse{}, nil
				}
				return session.ClaimWatchResponse{Granted: true, Holder: req.Claimer, Until: claimed}, nil
			},
		}
		clock := newAutoClock()
		c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = "bot-a" })
		if err := c.HandleMessage(context.Background(), &recPoster{clock: clock}, msg("e1", "hi")); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, c, testThread)
		want := claimed
		if withMessage {
			want = granted
		}
		mu.Lock()
		if len(released) != 1 || !released[0].Held.Equal(want) {
			t.Errorf("granted with the message %v: releases %+v, want one naming the hold that ends %v", withMessage, released, want)
		}
		mu.Unlock()
	}
}

// A message this replica sends while its watcher runs renews the lease
// (the workflow grants it with the message): the watcher's release then
// names that renewed hold, not its own older grant, which the workflow
// would refuse as stale and leave the lease to run out with nobody
// watching.
func TestReleaseNamesAHoldRenewedByAMessage(t *testing.T) {
	first := time.Date(2025, 1, 2, 3, 4, 20, 0, time.UTC)
	second := first.Add(3 * time.Second)
	var mu sync.Mutex
	grants := []time.Time{first, second}
	var released []session.ClaimWatchRequest
	sent := make(chan struct{})
	s := &script{states: []session.TurnState{running(1, 1, "ls"), done(1, 2, "one"), running(2, 3, "make"), done(2, 4, "two")}}
	f := &chattest.Sessions{
		SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			until := grants[0]
			grants = grants[1:]
			return session.MessageResponse{Turn: 2 - len(grants), Watch: &session.ClaimWatchResponse{Granted: true, Holder: req.Watch.Claimer, Until: until}}, nil
		},
		TurnStateFn: func(id string) (session.TurnState, error) {
			<-sent // the second message is sent while the first turn's watcher runs
			return s.next(id)
		},
		WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			if req.Release {
				released = append(released, req)
				return session.ClaimWatchResponse{}, nil
			}
			return session.ClaimWatchResponse{Granted: true, Holder: req.Claimer, Until: first}, nil
		},
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = "bot-a" })
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "one")); err != nil {
		t.Fatal(err)
	}
	if err := c.HandleMessage(context.Background(), p, msg("e2", "two")); err != nil {
		t.Fatal(err)
	}
	close(sent)
	waitIdle(t, c, testThread)
	mu.Lock()
	defer mu.Unlock()
	if len(released) != 1 || !released[0].Held.Equal(second) {
		t.Errorf("releases %+v, want one naming the hold the second message renewed (%v)", released, second)
	}
	if got := texts(p); len(got) != 2 {
		t.Errorf("answers %q, want both turns'", got)
	}
}
