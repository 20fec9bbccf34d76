package chat_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

func running(turn int, v int64, cmds ...string) session.TurnState {
	ts := session.TurnState{Turn: turn, Version: v, Status: session.StatusThinking, Backend: "local"}
	for i, c := range cmds {
		st := session.CallCompleted
		if i == len(cmds)-1 {
			st = session.CallRunning
		}
		ts.ToolCalls = append(ts.ToolCalls, session.ToolCallState{CallID: fmt.Sprint("call_", i), Name: "shell", Commands: []string{c}, Status: st})
	}
	return ts
}

func done(turn int, v int64, final string) session.TurnState {
	return session.TurnState{Turn: turn, Version: v, Status: session.StatusComplete, Backend: "local", FinalText: final}
}

// sendTurn makes Send answer with turn.
func sendTurn(turn int, dup bool) func(session.SessionInput, session.MessageRequest) (session.MessageResponse, error) {
	return func(session.SessionInput, session.MessageRequest) (session.MessageResponse, error) {
		return session.MessageResponse{Turn: turn, Duplicate: dup}, nil
	}
}

func msg(id, text string) chat.Message {
	return chat.Message{EventID: id, Thread: testThread, User: chat.User{ID: "U1", Name: "ann"}, Text: text}
}

func texts(p *recPoster) []string {
	var out []string
	for _, e := range p.ops("text") {
		out = append(out, e.Text)
	}
	return out
}

func TestWatcherRendersOnlyOnVersionChange(t *testing.T) {
	states := []session.TurnState{{Turn: 0, Status: session.StatusIdle}, running(1, 1)}
	for range 8 { // same version, different content, for longer than the edit pace
		states = append(states, running(1, 1, "ls"))
	}
	for range 4 {
		states = append(states, running(1, 2, "ls"))
	}
	states = append(states, done(1, 3, "the answer"))
	s := &script{states: states}
	var lastVersion atomic.Int64
	f := &chattest.Sessions{SendFn: sendTurn(1, false), TurnStateFn: func(id string) (session.TurnState, error) {
		ts, err := s.next(id)
		lastVersion.Store(ts.Version)
		return ts, err
	}}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &recPoster{clock: clock, EditFn: func(string, chat.Card) error {
		if lastVersion.Load() == 1 {
			t.Error("edited while the version had not moved")
		}
		return nil
	}}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "list files")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)

	posts, edits := p.ops("post"), p.ops("edit")
	if len(posts) != 1 || posts[0].Card.Title != "💭 Thinking" {
		t.Fatalf("posts = %+v, want one Thinking card", posts)
	}
	if strings.Contains(cardText(posts[0].Card), "ls") {
		t.Errorf("content of an unchanged version was rendered: %s", cardText(posts[0].Card))
	}
	if len(edits) != 2 || edits[0].Card.Title != "⚙️ Running" || edits[1].Card.Title != "✅ Done" {
		t.Fatalf("edits = %+v, want Running then Done", edits)
	}
	for _, e := range edits {
		if e.Ref != posts[0].Ref {
			t.Errorf("edit of %q, want the status message %q", e.Ref, posts[0].Ref)
		}
	}
	if got := texts(p); !reflect.DeepEqual(got, []string{"the answer"}) {
		t.Errorf("final messages = %q", got)
	}
	refs := f.Refs()
	if len(refs) != 2 || refs[0] != (session.ChatRefRequest{Turn: 1, Kind: "status", Ref: "m1"}) || refs[1].Kind != "final" || refs[1].Ref != "t2" {
		t.Errorf("recorded refs = %+v", refs)
	}
	// Polling stopped with the turn.
	if n := f.Count("turn_state"); n != len(s.states) {
		t.Errorf("%d polls for a %d-state script: the watcher kept polling after the turn ended", n, len(s.states))
	}
}

func TestWatcherCoalescesAndPaces(t *testing.T) {
	var states []session.TurnState
	cmds := []string{}
	for v := int64(1); v <= 25; v++ {
		cmds = append(cmds, fmt.Sprint("step ", v))
		states = append(states, running(1, v, cmds...))
	}
	states = append(states, done(1, 26, "ok"))
	s := &script{states: states}
	var lastPolled atomic.Value
	f := &chattest.Sessions{SendFn: sendTurn(1, false), TurnStateFn: func(id string) (session.TurnState, error) {
		ts, err := s.next(id)
		lastPolled.Store(ts)
		return ts, err
	}}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &recPoster{clock: clock}
	opts := chat.RenderOptions{WorkflowID: testThread.ID(), MaxChars: 3500}
	p.EditFn = func(_ string, card chat.Card) error {
		// Only the latest state is ever sent: intermediate ones were dropped.
		if want := chat.RenderTurn(lastPolled.Load().(session.TurnState), opts); !reflect.DeepEqual(card, want) {
			t.Errorf("edit shows %q, but the latest state polled renders %q", cardText(card), cardText(want))
		}
		return nil
	}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)

	ev := append(p.ops("post"), p.ops("edit")...)
	if n := len(p.ops("post")); n != 1 {
		t.Fatalf("%d status messages for one turn, want 1", n)
	}
	edits := p.ops("edit")
	if len(edits) >= len(states)-1 {
		t.Errorf("%d edits for %d versions: nothing was coalesced", len(edits), len(states))
	}
	for i := 1; i < len(ev); i++ {
		if gap := ev[i].At.Sub(ev[i-1].At); gap < time.Second {
			t.Errorf("edit %d came %v after the previous one; the minimum is 1s", i, gap)
		}
	}
	if last := edits[len(edits)-1].Card; last.Title != "✅ Done" {
		t.Errorf("last edit is %q, want the final Done card", last.Title)
	}
}

func TestWatcherPollIntervalsBackOff(t *testing.T) {
	states := []session.TurnState{running(1, 1)}
	for range 12 {
		states = append(states, running(1, 1))
	}
	states = append(states, done(1, 2, "ok"))
	s := &script{states: states}
	f := &chattest.Sessions{SendFn: sendTurn(1, false), TurnStateFn: s.next}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.Budgets["test"] = chat.Budget{MinEditInterval: time.Millisecond} })
	if err := c.HandleMessage(context.Background(), &recPoster{clock: clock}, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	waits := clock.Waits()
	if len(waits) < 8 || waits[0] != 150*time.Millisecond || waits[1] != 225*time.Millisecond {
		t.Fatalf("waits = %v, want 150ms, 225ms, ...", waits)
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] < waits[i-1] || waits[i] > time.Second {
			t.Errorf("wait %d is %v after %v: want a growing interval capped at 1s", i, waits[i], waits[i-1])
		}
	}
	if waits[len(waits)-1] != time.Second {
		t.Errorf("interval never reached 1s: %v", waits)
	}
}

func TestWatcherIgnoresEarlierTurnsComplete(t *testing.T) {
	s := &script{states: []session.TurnState{
		done(4, 10, "old answer"), done(4, 10, "old answer"), done(4, 10, "old answer"),
		running(5, 11), done(5, 12, "new answer"),
	}}
	f := &chattest.Sessions{SendFn: sendTurn(5, false), TurnStateFn: s.next}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e5", "next")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if got := texts(p); !reflect.DeepEqual(got, []string{"new answer"}) {
		t.Errorf("final messages = %q, want only turn 5's", got)
	}
	for _, r := range f.Refs() {
		if r.Turn != 5 {
			t.Errorf("recorded a ref for turn %d", r.Turn)
		}
	}
}

func TestWatcherFinalNotRepostedAfterRestart(t *testing.T) {
	// Turn ended and both messages were recorded: a redelivered event
	// watches again but changes nothing.
	ended := done(3, 9, "answer")
	ended.StatusRef, ended.FinalRef = "m1", "t1"
	f := &chattest.Sessions{SendFn: sendTurn(3, true), TurnStateFn: (&script{states: []session.TurnState{ended}}).next}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e3", "again")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if ev := p.Events(); len(ev) != 0 {
		t.Errorf("a finalized turn was shown again: %+v", ev)
	}
	if n := f.Count("chat_ref"); n != 0 {
		t.Errorf("%d chat refs recorded for a finalized turn", n)
	}

	// Ended after its status message, before its answer (the bot died in
	// between): Resume edits the same message and posts the answer once.
	half := done(3, 9, "answer")
	half.StatusRef = "m1"
	sum := chat.SessionSummary{WorkflowID: testThread.ID(), Location: testThread, Running: true}
	f2 := &chattest.Sessions{
		ListFn: func(chat.ListFilter) ([]chat.SessionSummary, error) { return []chat.SessionSummary{sum}, nil },
	}
	// Like the workflow, the turn state shows the answer's ref once it is
	// recorded, so the core's later scans find nothing left to do.
	f2.TurnStateFn = func(string) (session.TurnState, error) {
		ts := half
		if f2.Count("chat_ref final") > 0 {
			ts.FinalRef = "t1"
		}
		return ts, nil
	}
	c2 := newTestCore(t, f2, clock, nil)
	p2 := &recPoster{clock: clock}
	if err := c2.Resume(context.Background(), p2, "test"); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c2, testThread)
	if len(p2.ops("post")) != 0 || len(p2.ops("edit")) != 1 || p2.ops("edit")[0].Ref != "m1" {
		t.Errorf("events = %+v, want one edit of m1 and no new status message", p2.Events())
	}
	if got := texts(p2); !reflect.DeepEqual(got, []string{"answer"}) {
		t.Errorf("final messages = %q", got)
	}
	if refs := f2.Refs(); len(refs) != 1 || refs[0].Kind != "final" {
		t.Errorf("refs = %+v, want the final one", refs)
	}
}

func TestWatcherSkipsAnswerPostedElsewhere(t *testing.T) {
	// Another bot replica posted the answer while this one watched: the
	// card still gets its last edit, the answer is not posted again.
	end := done(1, 2, "answer")
	end.StatusRef, end.FinalRef = "m1", "elsewhere"
	f := &chattest.Sessions{SendFn: sendTurn(1, false), TurnStateFn: (&script{states: []session.TurnState{running(1, 1), end}}).next}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if edits := p.ops("edit"); len(edits) != 1 || edits[0].Card.Title != "✅ Done" {
		t.Errorf("edits = %+v, want the final edit", edits)
	}
	if got := texts(p); len(got) != 0 {
		t.Errorf("answer posted again: %q", got)
	}
}

// TestResumeScansOnAfterAFailedFirstListing: a bot that starts while the
// Temporal server restarts fails its first listing. Resume says so, and
// scans again every ScanEvery all the same: it used to return without its
// periodic scan, and that bot never took over a session whose watcher
// died, nor drew a turn nobody else watched.
func TestResumeScansOnAfterAFailedFirstListing(t *testing.T) {
	var lists atomic.Int32
	scanned, hold := make(chan struct{}), make(chan struct{})
	f := &chattest.Sessions{
		ListFn: func(chat.ListFilter) ([]chat.SessionSummary, error) {
			switch lists.Add(1) {
			case 1:
				return nil, errBoom
			case 2:
				return []chat.SessionSummary{{WorkflowID: testThread.ID(), Location: testThread}}, nil
			case 3:
				close(scanned) // the second scan is over: its watcher started
			}
			<-hold
			return nil, nil
		},
		TurnStateFn: (&script{states: []session.TurnState{running(7, 1, "make"), running(7, 1, "make"), done(7, 2, "built")}}).next,
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ScanEvery = 7 * time.Second })
	t.Cleanup(func() { close(hold) }) // before the core's Close, which waits for the scan loop
	p := &recPoster{clock: clock}
	if err := c.Resume(context.Background(), p, "test"); !errors.Is(err, errBoom) {
		t.Fatalf("Resume = %v, want the first listing's error", err)
	}
	select {
	case <-scanned:
	case <-time.After(30 * time.Second): // real time: only for a failure to report
		t.Fatalf("no scan after the failed first listing (%d listings)", lists.Load())
	}
	waitIdle(t, c, testThread)
	if got := texts(p); !reflect.DeepEqual(got, []string{"built"}) {
		t.Errorf("answers posted %q, want the running turn drawn and answered after the second scan", got)
	}
}

func TestResumeEditsExistingStatusMessage(t *testing.T) {
	active := running(7, 5, "make")
	active.StatusRef = "m42"
	idle := done(2, 3, "x")
	idle.StatusRef, idle.FinalRef = "m1", "t1"
	other := chat.Thread{Platform: "test", Channel: "C1", Thread: "T9"}
	sessions := map[string]*script{
		testThread.ID(): {states: []session.TurnState{active, active, active, done(7, 6, "built")}},
		other.ID():      {states: []session.TurnState{idle}},
	}
	f := &chattest.Sessions{
		ListFn: func(fl chat.ListFilter) ([]chat.SessionSummary, error) {
			if fl.Platform != "test" || !fl.ActiveOnly || !fl.TurnActive {
				t.Errorf("list filter = %+v", fl)
			}
			return []chat.SessionSummary{{WorkflowID: testThread.ID(), Location: testThread}, {WorkflowID: other.ID(), Location: other}}, nil
		},
		TurnStateFn: func(id string) (session.TurnState, error) { return sessions[id].next(id) },
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &recPoster{clock: clock}
	if err := c.Resume(context.Background(), p, "test"); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	waitIdle(t, c, other)
	if n := len(p.ops("post")); n != 0 {
		t.Errorf("%d new status messages after a restart, want 0", n)
	}
	// The first edit of a message another process may have just edited
	// waits one interval (TestTakeoverWaitsBeforeItsFirstEdit), so the
	// running card may be replaced by the final one before it shows.
	edits := p.ops("edit")
	if len(edits) == 0 || edits[len(edits)-1].Card.Title != "✅ Done" {
		t.Errorf("edits = %+v, want m42 edited to Done at last", edits)
	}
	for _, e := range edits {
		if e.Ref != "m42" {
			t.Errorf("edit of %s, want only m42's", e.Ref)
		}
	}
	if got := texts(p); !reflect.DeepEqual(got, []string{"built"}) {
		t.Errorf("final messages = %q", got)
	}
	// The idle session got no watcher: nothing was posted or edited for it
	// (the edits above are all of m42). Later scans still look at it.
}

func TestWatcherMissedTurnEnd(t *testing.T) {
	hist := []session.HistoryEntry{
		{Turn: 5, Msg: session.Message{Role: session.RoleUser, Content: "do it"}},
		{Turn: 5, Msg: session.Message{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{{ID: "c", Name: "shell"}}}},
		{Turn: 5, Msg: session.Message{Role: session.RoleAssistant, Content: "turn five answer"}},
		{Turn: 6, Msg: session.Message{Role: session.RoleUser, Content: "more"}},
	}
	f := &chattest.Sessions{
		SendFn:      sendTurn(5, false),
		TurnStateFn: (&script{states: []session.TurnState{running(5, 1), running(5, 2, "ls"), running(6, 4)}}).next,
		HistoryFn:   func(string, session.HistoryRequest) ([]session.HistoryEntry, error) { return hist, nil },
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e5", "do it")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	edits := p.ops("edit")
	if len(edits) == 0 || edits[len(edits)-1].Card.Title != "✅ Done" {
		t.Fatalf("edits = %+v, want the card closed as Done", edits)
	}
	// Turn 6 had begun: the answer names its turn (lateAnswer).
	if got := texts(p); !reflect.DeepEqual(got, []string{"↩️ _Turn 5's answer:_\n\nturn five answer"}) {
		t.Errorf("final messages = %q, want turn 5's answer from the transcript, naming its turn", got)
	}
	if n := len(p.ops("post")); n != 1 {
		t.Errorf("%d status messages: turn 6 was not asked for and must not be shown", n)
	}

	// The turn ended before the first poll: its answer still comes (a
	// session where nobody had posted it: the claim is granted).
	six := running(6, 4)
	six.Previous = &session.TurnEnd{Turn: 5, Status: session.StatusComplete, FinalText: "turn five answer"}
	f.TurnStateFn = (&script{states: []session.TurnState{six}}).next
	f.ClaimFn = func(string, session.ClaimFinalRequest) (session.ClaimFinalResponse, error) {
		return session.ClaimFinalResponse{Granted: true}, nil
	}
	p = &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e5b", "do it")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if got := texts(p); !reflect.DeepEqual(got, []string{"↩️ _Turn 5's answer:_\n\nturn five answer"}) || len(p.ops("post")) != 0 {
		t.Errorf("events = %+v, want only turn 5's answer", p.Events())
	}
}

func TestWatcherDedupesConcurrentWatches(t *testing.T) {
	release := make(chan struct{})
	posting := make(chan struct{}, 1)
	f := &chattest.Sessions{TurnStateFn: (&script{states: []session.TurnState{running(1, 1), done(1, 2, "ok")}}).next}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &recPoster{clock: clock, PostFn: func(chat.Card) error {
		posting <- struct{}{}
		<-release
		return nil
	}}
	f.SendFn = sendTurn(1, false)
	if err := c.HandleMessage(context.Background(), p, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	<-posting // the watcher is inside Post
	f.SendFn = sendTurn(1, true)
	if err := c.HandleMessage(context.Background(), p, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitIdle(t, c, testThread)
	if n := f.Count("send"); n != 2 {
		t.Fatalf("%d sends, want 2", n)
	}
	if n := len(p.ops("post")); n != 1 {
		t.Errorf("%d status messages, want 1", n)
	}
	if got := texts(p); len(got) != 1 {
		t.Errorf("final messages = %q, want one", got)
	}
}

func TestWatcherSurvivesFailedEditAndUsesLimiter(t *testing.T) {
	var fails atomic.Int32
	var waits atomic.Int32
	f := &chattest.Sessions{SendFn: sendTurn(1, false),
		TurnStateFn: (&script{states: []session.TurnState{running(1, 1), running(1, 2, "a"), running(1, 2, "a"), running(1, 2, "a"), running(1, 2, "a"), running(1, 2, "a"), running(1, 3, "a", "b"), done(1, 4, "fin")}}).next}
	clock := newAutoClock()
	lim := limiterFunc(func(context.Context) error { waits.Add(1); return nil })
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) {
		cfg.Budgets["test"] = chat.Budget{MinEditInterval: time.Second, Limiter: lim}
	})
	p := &recPoster{clock: clock, EditFn: func(string, chat.Card) error {
		if fails.Add(1) == 1 {
			return errBoom
		}
		return nil
	}}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	edits := p.ops("edit")
	if len(edits) == 0 || edits[len(edits)-1].Card.Title != "✅ Done" {
		t.Fatalf("edits = %+v, want the watcher to go on after a failed edit", edits)
	}
	if got := texts(p); !reflect.DeepEqual(got, []string{"fin"}) {
		t.Errorf("final messages = %q", got)
	}
	calls := int32(len(p.Events())) + fails.Load() - int32(len(edits)) // failed edits also waited
	if waits.Load() != calls {
		t.Errorf("limiter waited %d times for %d platform calls", waits.Load(), calls)
	}
}

type limiterFunc func(context.Context) error

func (f limiterFunc) Wait(ctx context.Context) error { return f(ctx) }

func TestWatcherStopsWhenSessionPaused(t *testing.T) {
	paused := session.TurnState{Turn: 4, Version: 8, Status: session.StatusComplete, Paused: true}
	f := &chattest.Sessions{SendFn: sendTurn(5, false), TurnStateFn: (&script{states: []session.TurnState{paused}}).next}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if n := f.Count("turn_state"); n != 1 || len(p.Events()) != 0 {
		t.Errorf("paused session: %d polls, events %+v", n, p.Events())
	}
}

func TestWatcherEditBurstStaysWithinTheBucket(t *testing.T) {
	var states []session.TurnState
	cmds := []string{}
	for v := int64(1); v <= 40; v++ {
		cmds = append(cmds, fmt.Sprint("step ", v))
		states = append(states, running(1, v, cmds...))
	}
	states = append(states, done(1, 41, "ok"))
	s := &script{states: states}
	f := &chattest.Sessions{SendFn: sendTurn(1, false), TurnStateFn: s.next}
	clock := newAutoClock()
	const burst = 5
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) {
		cfg.Budgets = map[string]chat.Budget{"test": {MinEditInterval: time.Second, EditBurst: burst}}
	})
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	ops := append(p.ops("post"), p.ops("edit")...)
	if len(ops) < 3 {
		t.Fatalf("only %d posts and edits", len(ops))
	}
	// A burst goes out faster than the steady pace...
	if gap := ops[1].At.Sub(ops[0].At); gap >= time.Second {
		t.Errorf("the first edit waited %v after the post; a full bucket should let it go at the next poll", gap)
	}
	// ...but no window ever holds more than the bucket allows.
	for i := range ops {
		for j := i + 1; j < len(ops); j++ {
			allowed := burst + int(ops[j].At.Sub(ops[i].At)/time.Second)
			if n := j - i + 1; n > allowed {
				t.Fatalf("%d edits between %v and %v; a bucket of %d refilled at 1/s allows %d", n, ops[i].At, ops[j].At, burst, allowed)
			}
		}
	}
	if last := p.ops("edit"); last[len(last)-1].Card.Title != "✅ Done" {
		t.Errorf("last edit is %q, want the final Done card", last[len(last)-1].Card.Title)
	}
}

// Two bot replicas resume the same finished-but-unposted turn (both were
// started while it ran): the session grants one of them the answer, so it
// is posted once.
func TestTwoReplicasPostTheAnswerOnce(t *testing.T) {
	half := done(4, 7, "the answer")
	half.StatusRef = "m1"
	sum := chat.SessionSummary{WorkflowID: testThread.ID(), Location: testThread, Running: true}
	f := &chattest.Sessions{
		ListFn:      func(chat.ListFilter) ([]chat.SessionSummary, error) { return []chat.SessionSummary{sum}, nil },
		TurnStateFn: (&script{states: []session.TurnState{half}}).next,
	}
	clock := newAutoClock()
	var posters []*recPoster
	for _, id := range []string{"bot-a", "bot-b"} {
		c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = id })
		p := &recPoster{clock: clock}
		posters = append(posters, p)
		if err := c.Resume(context.Background(), p, "test"); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, c, testThread)
	}
	var all []string
	for _, p := range posters {
		all = append(all, texts(p)...)
	}
	if !reflect.DeepEqual(all, []string{"the answer"}) {
		t.Errorf("answers posted by the two replicas: %q, want it once", all)
	}
	// Both asked (the scripted session never records the post, so later
	// scans may ask again); the session granted one.
	if f.Count("claim_final bot-a") == 0 || f.Count("claim_final bot-b") == 0 {
		t.Errorf("claims: bot-a %d, bot-b %d; want both to have asked", f.Count("claim_final bot-a"), f.Count("claim_final bot-b"))
	}
}

// A turn that ended between two polls whose answer another replica already
// posted (and recorded on the next turn's Previous after that turn began)
// is not posted again; nor is one whose claim another replica holds. Found
// by the chaos suite: answers were posted twice when the next message came
// quickly.
func TestWatcherMissedTurnEndPostedElsewhere(t *testing.T) {
	hist := []session.HistoryEntry{
		{Turn: 5, Msg: session.Message{Role: session.RoleUser, Content: "do it"}},
		{Turn: 5, Msg: session.Message{Role: session.RoleAssistant, Content: "turn five answer"}},
		{Turn: 6, Msg: session.Message{Role: session.RoleUser, Content: "more"}},
	}
	for _, tc := range []struct {
		name  string
		prev  session.TurnEnd
		claim func(string, session.ClaimFinalRequest) (session.ClaimFinalResponse, error)
	}{
		{"recorded", session.TurnEnd{Turn: 5, Status: session.StatusComplete, FinalText: "turn five answer", FinalRef: "m5"}, nil},
		{"claimed", session.TurnEnd{Turn: 5, Status: session.StatusComplete, FinalText: "turn five answer"},
			func(string, session.ClaimFinalRequest) (session.ClaimFinalResponse, error) {
				return session.ClaimFinalResponse{Holder: "other-replica"}, nil
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := running(6, 4)
			next.Previous = &tc.prev
			f := &chattest.Sessions{
				SendFn:      sendTurn(5, false),
				TurnStateFn: (&script{states: []session.TurnState{running(5, 1), next}}).next,
				HistoryFn:   func(string, session.HistoryRequest) ([]session.HistoryEntry, error) { return hist, nil },
				ClaimFn:     tc.claim,
			}
			clock := newAutoClock()
			c := newTestCore(t, f, clock, nil)
			p := &recPoster{clock: clock}
			if err := c.HandleMessage(context.Background(), p, msg("e5", "do it")); err != nil {
				t.Fatal(err)
			}
			waitIdle(t, c, testThread)
			if got := texts(p); len(got) != 0 {
				t.Errorf("the answer was posted again: %q", got)
			}
		})
	}
}
