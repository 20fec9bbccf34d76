package chat_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// unseenSessions is a session at turn 6 whose turn 5 ended while no
// replica watched it, as prev says, with its transcript and the approval
// of its one call on record.
func unseenSessions(prev session.TurnEnd, histories *atomic.Int32) *chattest.Sessions {
	hist := []session.HistoryEntry{
		{Turn: 5, Msg: session.Message{Role: session.RoleUser, Content: "do it"}},
		{Turn: 5, Msg: session.Message{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{
			{ID: "c1", Name: "shell", Arguments: `{"commands":["make deploy"]}`},
			{ID: "c2", Name: "shell", Arguments: `{"commands":["make verify"]}`},
		}}},
		{Turn: 5, Msg: session.Message{Role: session.RoleTool, ToolCallID: "c1", Content: "deployed"}},
		{Turn: 5, Msg: session.Message{Role: session.RoleAssistant, Content: "turn five answer"}},
		{Turn: 6, Msg: session.Message{Role: session.RoleUser, Content: "more"}},
	}
	six, over := running(6, 4), done(6, 5, "turn six answer")
	six.Previous, over.Previous = &prev, &prev
	return &chattest.Sessions{
		SendFn:      sendTurn(6, false),
		TurnStateFn: (&script{states: []session.TurnState{six, over}}).next,
		HistoryFn: func(string, session.HistoryRequest) ([]session.HistoryEntry, error) {
			histories.Add(1)
			return hist, nil
		},
		InfoFn: func(string) (session.Info, error) {
			return session.Info{Decisions: []session.DecisionRecord{
				{CallID: "c1", Turn: 5, Decision: session.DecisionApprove, User: session.User{ID: "U1", Name: "ann"}},
			}}, nil
		},
	}
}

// TestWatcherFinishesATurnThatEndedUnwatched: the first poll of a new
// turn's watcher finds the turn before it ended with nobody's claim on its
// answer, so nobody made its card's last edit: the watcher makes it (the
// decision on record, the call that has no result shown as not finished,
// no buttons) and posts the answer.
func TestWatcherFinishesATurnThatEndedUnwatched(t *testing.T) {
	var histories atomic.Int32
	f := unseenSessions(session.TurnEnd{Turn: 5, Status: session.StatusComplete, FinalText: "turn five answer", StatusRef: "m0"}, &histories)
	p := answerOne(t, f, "e6", "more")
	var old []chat.Card
	for _, e := range p.ops("edit") {
		if e.Ref == "m0" {
			old = append(old, e.Card)
		}
	}
	if len(old) != 1 {
		t.Fatalf("turn 5's card was edited %d times, want once", len(old))
	}
	card := old[0]
	var text strings.Builder
	for _, b := range card.Blocks {
		text.WriteString(b.Text + "\n")
		if len(b.Buttons) > 0 && b.Buttons[0].ID == chat.ActionApprove {
			t.Errorf("the finished card still offers Approve")
		}
	}
	for _, want := range []string{"make deploy", "approved by", "make verify", "It did not finish.", "no bot was watching"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("turn 5's card lacks %q:\n%s", want, text.String())
		}
	}
	if card.Title != "✅ Done" {
		t.Errorf("title %q, want ✅ Done", card.Title)
	}
	// Posted after turn 6's message, the answer names its turn.
	if got := texts(p); len(got) != 2 || got[0] != "↩️ _Turn 5's answer:_\n\nturn five answer" || got[1] != "turn six answer" {
		t.Errorf("posted %q, want turn 5's answer once, naming its turn, then turn 6's", got)
	}
}

// TestLateFailureNamesItsTurn: the answer of a failed turn that ended
// while no bot watched it is posted after the next turn's message, so it
// must not read as that message's failure ("This turn failed"): it names
// the turn that failed (the chaos short run of seed 1796648807632877242,
// whose user took turn 3's late failure for its next message's and asked
// a third time).
func TestLateFailureNamesItsTurn(t *testing.T) {
	var histories atomic.Int32
	f := unseenSessions(session.TurnEnd{Turn: 5, Status: session.StatusFailed, Error: "model: 500 Internal Server Error", StatusRef: "m0"}, &histories)
	p := answerOne(t, f, "e6", "more")
	got := texts(p)
	if len(got) != 2 || got[0] != "⚠️ Turn 5 failed: model: 500 Internal Server Error" || got[1] != "turn six answer" {
		t.Errorf("posted %q, want turn 5's failure naming turn 5, then turn 6's answer", got)
	}
}

// TestAnswerAfterQueuedMessagesNamesItsTurn: a turn that ends with
// messages already waiting for the next one posts its answer after them,
// so the answer names its turn; with none waiting it is posted as it is.
func TestAnswerAfterQueuedMessagesNamesItsTurn(t *testing.T) {
	for queued, want := range map[int]string{0: "turn five answer", 2: "↩️ _Turn 5's answer:_\n\nturn five answer"} {
		five := done(5, 2, "turn five answer")
		five.Queued = queued
		f := &chattest.Sessions{SendFn: sendTurn(5, false), TurnStateFn: (&script{states: []session.TurnState{running(5, 1, "ls"), five}}).next}
		p := answerOne(t, f, "e5", "do it")
		if got := texts(p); len(got) != 1 || got[0] != want {
			t.Errorf("%d queued: posted %q, want %q", queued, got, want)
		}
	}
}

// TestFailedTurnAnswerNamesItsTurn: a failed turn's answer names the turn
// ("⚠️ Turn 5 failed: …"), never "this turn": a post held back by rate
// limits can land after the user's next message (a chaos short run's user
// took turn 9's failure, posted so, for its next message's).
func TestFailedTurnAnswerNamesItsTurn(t *testing.T) {
	failed := session.TurnState{Turn: 5, Version: 2, Status: session.StatusFailed, Backend: "local", Error: "model: 401 Unauthorized"}
	f := &chattest.Sessions{SendFn: sendTurn(5, false), TurnStateFn: (&script{states: []session.TurnState{running(5, 1, "ls"), failed}}).next}
	p := answerOne(t, f, "e5", "do it")
	if got := texts(p); len(got) != 1 || got[0] != "⚠️ Turn 5 failed: model: 401 Unauthorized" {
		t.Errorf("posted %q, want the failure naming turn 5", got)
	}
}

// TestWatcherLeavesATurnAnotherReplicaFinished: a turn whose answer
// another replica claimed (it made the card's last edit before it
// claimed) or posted is not touched, and its transcript not even read.
func TestWatcherLeavesATurnAnotherReplicaFinished(t *testing.T) {
	for name, prev := range map[string]session.TurnEnd{
		"claimed": {Turn: 5, Status: session.StatusComplete, FinalText: "turn five answer", StatusRef: "m0", FinalClaim: "other-replica"},
		"posted":  {Turn: 5, Status: session.StatusComplete, FinalText: "turn five answer", StatusRef: "m0", FinalRef: "t9"},
	} {
		t.Run(name, func(t *testing.T) {
			var histories atomic.Int32
			f := unseenSessions(prev, &histories)
			p := answerOne(t, f, "e6", "more")
			for _, e := range p.ops("edit") {
				if e.Ref == "m0" {
					t.Errorf("turn 5's card was edited: %+v", e.Card)
				}
			}
			if got := texts(p); len(got) != 1 || got[0] != "turn six answer" {
				t.Errorf("posted %q, want turn 6's answer only: the other replica posts turn 5's", got)
			}
			if n := histories.Load(); n != 0 {
				t.Errorf("the transcript was read %d times for a turn already finished", n)
			}
		})
	}
}

// TestWatcherDoesNotAnswerAgainWhenItsRecordWasLost: this bot posted turn
// 5's answer and its record did not reach the session (a server restart),
// so turn 6's first poll finds turn 5 claimed by this very replica with no
// answer on record, a claim the session grants it again. The bot
// remembers that it posted, and does not post a second time.
func TestWatcherDoesNotAnswerAgainWhenItsRecordWasLost(t *testing.T) {
	var histories atomic.Int32
	prev := session.TurnEnd{Turn: 5, Status: session.StatusComplete, FinalText: "turn five answer", StatusRef: "m1", FinalClaim: "bot-1"}
	f := unseenSessions(prev, &histories)
	f.SendFn = sendTurn(5, false)
	five := running(5, 1, "ls")
	f.TurnStateFn = (&script{states: []session.TurnState{five, done(5, 2, "turn five answer")}}).next
	f.ClaimFn = func(string, session.ClaimFinalRequest) (session.ClaimFinalResponse, error) {
		return session.ClaimFinalResponse{Granted: true}, nil
	}
	f.RecordFn = func(_ string, req session.ChatRefRequest) error {
		if req.Kind == "final" {
			return errBoom
		}
		return nil
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = "bot-1" })
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e5", "do it")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if got := texts(p); len(got) != 1 {
		t.Fatalf("turn 5: posted %q, want its answer", got)
	}

	six, over := running(6, 4), done(6, 5, "turn six answer")
	six.Previous, over.Previous = &prev, &prev
	f.SendFn = sendTurn(6, false)
	f.TurnStateFn = (&script{states: []session.TurnState{six, over}}).next
	if err := c.HandleMessage(context.Background(), p, msg("e6", "more")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if got := texts(p); len(got) != 2 || got[0] != "turn five answer" || got[1] != "turn six answer" {
		t.Errorf("posted %q, want turn 5's answer once, then turn 6's", got)
	}
}
