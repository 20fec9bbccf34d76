package chat_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

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
	Card chat.Card
	Text string
	At   time.Time
}

// recPoster records what the core shows. Hooks may fail or block calls.
type recPoster struct {
	mu     sync.Mutex
	events []posterEvent
	n      int
	clock  chat.Clock

	PostFn func(c chat.Card) error
	EditFn func(ref string, c chat.Card) error
}

var _ chat.Poster = (*recPoster)(nil)

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

func (p *recPoster) Post(_ context.Context, _ chat.Thread, c chat.Card) (string, error) {
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

func (p *recPoster) Edit(_ context.Context, _ chat.Thread, ref string, c chat.Card) error {
	if p.EditFn != nil {
		if err := p.EditFn(ref, c); err != nil {
			return err
		}
	}
	p.add(posterEvent{Op: "edit", Ref: ref, Card: c})
	return nil
}

func (p *recPoster) PostText(_ context.Context, _ chat.Thread, md string) (string, error) {
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

// noRescan is the test cores' ScanEvery: an autoClock never fires it.
// Otherwise each core's rescan loop would spin on the clock, which fires
// every wait at once, using up its waits (and pushing its time ahead)
// as fast as the machine goes, racing the watchers a test follows.
const noRescan = 1000 * time.Hour

func (c *autoClock) After(d time.Duration) <-chan time.Time {
	if d == noRescan {
		return nil // blocks; the loop ends with its context
	}
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
var testThread = chat.Thread{Platform: "test", Workspace: "W1", Channel: "C1", Thread: "T1"}

// newTestCore returns a Core on virtual time with a 1 s edit interval.
func newTestCore(t testing.TB, s chat.Sessions, clock chat.Clock, mod func(*chat.CoreConfig)) *chat.Core {
	t.Helper()
	cfg := chat.CoreConfig{
		Clock:          clock,
		Budgets:        map[string]chat.Budget{"test": {MinEditInterval: time.Second}},
		TemporalUIBase: "http://ui.test",
		ScanEvery:      noRescan,
	}
	if mod != nil {
		mod(&cfg)
	}
	c := chat.NewCore(cfg, s, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(c.Close)
	return c
}

// waitIdle waits (with a generous deadline) until no watcher runs for th.
func waitIdle(t testing.TB, c *chat.Core, th chat.Thread) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitThread(ctx, th); err != nil {
		t.Fatalf("watcher for %s did not finish: %v", th.ID(), err)
	}
}

// answerOne has a test core on an auto clock handle one message (event
// id, text) in testThread and waits until its watcher is done; it returns
// what the core showed.
func answerOne(t testing.TB, f chat.Sessions, id, text string) *recPoster {
	t.Helper()
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg(id, text)); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	return p
}

var errBoom = errors.New("boom")
