package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/session"
)

// fakeSessions is a recording Sessions whose behaviour is set per test
// through function fields. A nil field answers with an error naming the
// unexpected call, except RecordChatRef, which records and succeeds.
type fakeSessions struct {
	mu    sync.Mutex
	calls []string
	refs  []session.ChatRefRequest

	SendFn       func(session.SessionInput, session.MessageRequest) (session.MessageResponse, error)
	TurnStateFn  func(id string) (session.TurnState, error)
	ApproveFn    func(id string, req session.ApproveRequest) (session.ApproveResponse, error)
	StopFn       func(id string) (session.StopResponse, error)
	PauseFn      func(id string) (session.PauseResponse, error)
	ResumeFn     func(id string) (session.PauseResponse, error)
	DestroyFn    func(id string) (session.DestroyResponse, error)
	SetBackendFn func(id string, req session.SetBackendRequest) (session.SetBackendResponse, error)
	ForkFn       func(id string, req session.ForkRequest) (session.ForkResponse, error)
	InfoFn       func(id string) (session.Info, error)
	HistoryFn    func(id string, req session.HistoryRequest) ([]session.HistoryEntry, error)
	ListFn       func(f ListFilter) ([]SessionSummary, error)
	RecordFn     func(id string, req session.ChatRefRequest) error
}

var _ Sessions = (*fakeSessions)(nil)

func (f *fakeSessions) record(call string) {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
}

// Calls returns the recorded calls ("send msg:e1", "turn_state", ...).
func (f *fakeSessions) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// count counts recorded calls starting with prefix.
func (f *fakeSessions) count(prefix string) int {
	n := 0
	for _, c := range f.Calls() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeSessions) Refs() []session.ChatRefRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.refs)
}

func unexpected(call string) error { return fmt.Errorf("fake: unexpected call %s", call) }

func (f *fakeSessions) Send(_ context.Context, in session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
	f.record("send " + req.EventID)
	if f.SendFn == nil {
		return session.MessageResponse{}, unexpected("send")
	}
	return f.SendFn(in, req)
}

func (f *fakeSessions) TurnState(_ context.Context, id string) (session.TurnState, error) {
	f.record("turn_state")
	if f.TurnStateFn == nil {
		return session.TurnState{}, unexpected("turn_state")
	}
	return f.TurnStateFn(id)
}

func (f *fakeSessions) Approve(_ context.Context, id string, req session.ApproveRequest) (session.ApproveResponse, error) {
	f.record(fmt.Sprintf("approve %s %s %s", req.CallID, req.Decision, req.User.ID))
	if f.ApproveFn == nil {
		return session.ApproveResponse{}, unexpected("approve")
	}
	return f.ApproveFn(id, req)
}

func (f *fakeSessions) Stop(_ context.Context, id string, _ session.StopRequest) (session.StopResponse, error) {
	f.record("stop")
	if f.StopFn == nil {
		return session.StopResponse{}, unexpected("stop")
	}
	return f.StopFn(id)
}

func (f *fakeSessions) Pause(_ context.Context, id string, _ session.PauseRequest) (session.PauseResponse, error) {
	f.record("pause")
	if f.PauseFn == nil {
		return session.PauseResponse{}, unexpected("pause")
	}
	return f.PauseFn(id)
}

func (f *fakeSessions) Resume(_ context.Context, id string, _ session.ResumeRequest) (session.PauseResponse, error) {
	f.record("resume")
	if f.ResumeFn == nil {
		return session.PauseResponse{}, unexpected("resume")
	}
	return f.ResumeFn(id)
}

func (f *fakeSessions) Destroy(_ context.Context, id string, _ session.DestroyRequest) (session.DestroyResponse, error) {
	f.record("destroy")
	if f.DestroyFn == nil {
		return session.DestroyResponse{}, unexpected("destroy")
	}
	return f.DestroyFn(id)
}

func (f *fakeSessions) SetBackend(_ context.Context, id string, req session.SetBackendRequest) (session.SetBackendResponse, error) {
	f.record("set_backend " + req.Backend)
	if f.SetBackendFn == nil {
		return session.SetBackendResponse{}, unexpected("set_backend")
	}
	return f.SetBackendFn(id, req)
}

func (f *fakeSessions) Fork(_ context.Context, id string, req session.ForkRequest) (session.ForkResponse, error) {
	f.record("fork")
	if f.ForkFn == nil {
		return session.ForkResponse{}, unexpected("fork")
	}
	return f.ForkFn(id, req)
}

func (f *fakeSessions) RecordChatRef(_ context.Context, id string, req session.ChatRefRequest) error {
	f.record("chat_ref " + req.Kind)
	f.mu.Lock()
	f.refs = append(f.refs, req)
	f.mu.Unlock()
	if f.RecordFn != nil {
		return f.RecordFn(id, req)
	}
	return nil
}

func (f *fakeSessions) Info(_ context.Context, id string) (session.Info, error) {
	f.record("info")
	if f.InfoFn == nil {
		return session.Info{}, unexpected("info")
	}
	return f.InfoFn(id)
}

func (f *fakeSessions) History(_ context.Context, id string, req session.HistoryRequest) ([]session.HistoryEntry, error) {
	f.record("history")
	if f.HistoryFn == nil {
		return nil, unexpected("history")
	}
	return f.HistoryFn(id, req)
}

func (f *fakeSessions) List(_ context.Context, fl ListFilter) ([]SessionSummary, error) {
	f.record("list")
	if f.ListFn == nil {
		return nil, unexpected("list")
	}
	return f.ListFn(fl)
}

// script answers TurnState polls with states in order, repeating the last.
type script struct {
	mu     sync.Mutex
	states []session.TurnState
	polls  int
}

func (s *script) next(string) (session.TurnState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.polls, len(s.states)-1)
	s.polls++
	return s.states[i], nil
}

// posterEvent is one call on recPoster.
type posterEvent struct {
	Op   string // "post", "edit", "text"
	Ref  string
	Card Card
	Text string
	At   time.Time
}

// recPoster records what the core shows. Hooks may fail or block calls.
type recPoster struct {
	mu     sync.Mutex
	events []posterEvent
	n      int
	clock  Clock

	PostFn func(c Card) error
	EditFn func(ref string, c Card) error
}

var _ Poster = (*recPoster)(nil)

func (p *recPoster) now() time.Time {
	if p.clock == nil {
		return time.Time{}
	}
	return p.clock.Now()
}

func (p *recPoster) add(e posterEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.At = p.now()
	p.events = append(p.events, e)
}

func (p *recPoster) Post(_ context.Context, _ Thread, c Card) (string, error) {
	if p.PostFn != nil {
		if err := p.PostFn(c); err != nil {
			return "", err
		}
	}
	p.mu.Lock()
	p.n++
	ref := fmt.Sprintf("m%d", p.n)
	p.mu.Unlock()
	p.add(posterEvent{Op: "post", Ref: ref, Card: c})
	return ref, nil
}

func (p *recPoster) Edit(_ context.Context, _ Thread, ref string, c Card) error {
	if p.EditFn != nil {
		if err := p.EditFn(ref, c); err != nil {
			return err
		}
	}
	p.add(posterEvent{Op: "edit", Ref: ref, Card: c})
	return nil
}

func (p *recPoster) PostText(_ context.Context, _ Thread, md string) (string, error) {
	p.mu.Lock()
	p.n++
	ref := fmt.Sprintf("t%d", p.n)
	p.mu.Unlock()
	p.add(posterEvent{Op: "text", Ref: ref, Text: md})
	return ref, nil
}

func (p *recPoster) Events() []posterEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// ops returns the events of one kind.
func (p *recPoster) ops(op string) []posterEvent {
	var out []posterEvent
	for _, e := range p.Events() {
		if e.Op == op {
			out = append(out, e)
		}
	}
	return out
}

// autoClock is virtual time that moves forward by d whenever someone waits
// for d, so watchers run through a script at full speed, deterministically.
// It stops firing after limit waits so a runaway watcher shows up as a
// test timeout instead of a hot loop.
type autoClock struct {
	mu     sync.Mutex
	now    time.Time
	waits  []time.Duration
	limit  int
	exceed bool
}

func newAutoClock() *autoClock {
	return &autoClock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), limit: 5000}
}

func (c *autoClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *autoClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waits) >= c.limit {
		c.exceed = true
		return nil
	}
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *autoClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}

// testThread is where test sessions live.
var testThread = Thread{Platform: "test", Workspace: "W1", Channel: "C1", Thread: "T1"}

// newTestCore returns a Core on virtual time with a 1 s edit interval.
func newTestCore(t testing.TB, s Sessions, clock Clock, mod func(*CoreConfig)) *Core {
	t.Helper()
	cfg := CoreConfig{
		Clock:          clock,
		Budgets:        map[string]Budget{"test": {MinEditInterval: time.Second}},
		TemporalUIBase: "http://ui.test",
	}
	if mod != nil {
		mod(&cfg)
	}
	c := NewCore(cfg, s, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(c.Close)
	return c
}

// waitIdle waits (with a generous deadline) until no watcher runs for th.
func waitIdle(t testing.TB, c *Core, th Thread) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitThread(ctx, th); err != nil {
		t.Fatalf("watcher for %s did not finish: %v", th.ID(), err)
	}
}

// waitFor polls cond until it holds or a generous deadline passes. It is
// for conditions reached by other goroutines, not for timing.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var errBoom = errors.New("boom")
