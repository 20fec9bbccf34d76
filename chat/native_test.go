package chat_test

import (
	"context"
	"sync"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// observingPoster is a recPoster with chat.TurnObserver: it records what
// it observed and ended, and takes the answer when take is set.
type observingPoster struct {
	*recPoster
	take bool

	mu       sync.Mutex
	observed []session.TurnState
	ends     []string // answers offered, one per EndTurn
}

var _ chat.TurnObserver = (*observingPoster)(nil)

func (p *observingPoster) ObserveTurn(_ chat.Thread, ts session.TurnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.observed = append(p.observed, ts)
}

func (p *observingPoster) EndTurn(_ context.Context, _ chat.Thread, ts session.TurnState, answer string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ends = append(p.ends, answer)
	if p.take && answer != "" {
		return "stream-1", true
	}
	return "", false
}

func runObserved(t *testing.T, take bool) (*observingPoster, *chattest.Sessions) {
	t.Helper()
	s := &script{states: []session.TurnState{{Turn: 0, Status: session.StatusIdle}, running(1, 1, "ls"), done(1, 2, "the answer")}}
	f := &chattest.Sessions{SendFn: sendTurn(1, false), TurnStateFn: s.next}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &observingPoster{recPoster: &recPoster{clock: clock}, take: take}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "list files")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	return p, f
}

// The watcher shows a platform's observer every state it renders and ends
// the turn once, offering the answer; an observer that does not take it
// leaves the core to post it.
func TestTurnObserverSeesTheTurn(t *testing.T) {
	p, _ := runObserved(t, false)
	if len(p.observed) < 2 || p.observed[0].Status != session.StatusThinking || p.observed[len(p.observed)-1].Status != session.StatusComplete {
		t.Fatalf("observed %+v, want the running state first and the done state last", p.observed)
	}
	if len(p.ends) != 1 || p.ends[0] != "the answer" {
		t.Fatalf("EndTurn offers = %q, want the answer once", p.ends)
	}
	if got := texts(p.recPoster); len(got) != 1 || got[0] != "the answer" {
		t.Fatalf("posted answers %q, want the answer posted by the core", got)
	}
}

// An observer that takes the answer (a streamed message) gets it instead
// of a post: nothing is posted twice, and the session records the stream
// as the turn's answer.
func TestTurnObserverTakesTheAnswer(t *testing.T) {
	p, f := runObserved(t, true)
	if got := texts(p.recPoster); len(got) != 0 {
		t.Fatalf("the core posted %q although the observer took the answer", got)
	}
	refs := f.Refs()
	if last := refs[len(refs)-1]; last.Kind != "final" || last.Ref != "stream-1" {
		t.Fatalf("recorded refs %+v, want the stream as the final answer", refs)
	}
	if len(p.ends) != 1 {
		t.Fatalf("EndTurn called %d times, want once", len(p.ends))
	}
}
