package chat

import (
	"context"
	"sync"
	"time"

	"github.com/sandbot/sandbot/internal/metrics"
)

// watchers keeps at most one watcher per session and runs each on its own
// goroutine, detached from the context of the event that started it (an
// HTTP handler's context ends when it returns), until its turns are done
// or close is called. It is safe for concurrent use.
type watchers struct {
	// newWatcher builds the watcher of a thread with the core's settings.
	newWatcher func(p Poster, th Thread) *watcher

	ctx    context.Context // every watcher's lifetime
	cancel context.CancelFunc
	wg     sync.WaitGroup // watchers
	loops  sync.WaitGroup // spawned loops, which end only with close

	mu     sync.Mutex
	m      map[string]*watcher // by workflow ID
	closed bool
	// unsettled are the unrecorded cards of ended watchers, handed to the
	// session's next watcher (under mu).
	unsettled *unsettledCards
}

func newWatchers(newWatcher func(p Poster, th Thread) *watcher) *watchers {
	ctx, cancel := context.WithCancel(context.Background())
	return &watchers{newWatcher: newWatcher, ctx: ctx, cancel: cancel, m: map[string]*watcher{}, unsettled: newUnsettledCards()}
}

// watch makes sure a watcher follows th's session up to turn. It is
// idempotent: a running watcher only raises its goal.
func (ws *watchers) watch(p Poster, th Thread, turn int) {
	ws.watchHeld(p, th, turn, time.Time{}, time.Time{})
}

// watchHeld is watch by a replica that was granted the session's watch
// lease with the message that asked for turn (asked is when it asked, so
// its view of the lease never outlasts the workflow's; zero: not granted;
// granted is the hold's end as the workflow granted it). A new watcher
// starts out holding it instead of claiming it again; a running one keeps
// its own view and renews on its schedule, and names the message's grant
// when it releases.
func (ws *watchers) watchHeld(p Poster, th Thread, turn int, asked, granted time.Time) {
	id := th.ID()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return
	}
	if w := ws.m[id]; w != nil {
		w.raise(turn)
		if !asked.IsZero() {
			w.renewedWith(granted)
		}
		w.poke()
		return
	}
	w := ws.newWatcher(p, th)
	// Before the goroutine starts, which owns them from then on.
	w.unrecorded = ws.unsettled.take(id)
	w.raise(turn)
	if !asked.IsZero() {
		// Before the goroutine starts, which owns these from then on.
		w.held, w.until, w.renewAt, w.granted = true, asked.Add(w.cfg.Lease), asked.Add(w.cfg.Lease/3), granted
		// Granted with the message that starts the turn: nobody can have
		// shown it yet.
		w.lookFirst = false
		w.startsHolding(asked)
	}
	ws.m[id] = w
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		defer close(w.done)
		metrics.WatchersActive.Inc()
		defer metrics.WatchersActive.Dec()
		w.run(ws.ctx, turn, ws.release)
	}()
}

// release ends w unless a later turn than last was asked for meanwhile
// (and w did not give up), in which case it says which one to follow.
// Holding ws.mu makes "no more turns" and "gone from the map" one step, so
// a watch racing the end starts a new watcher instead of being lost.
//
// w gives its watch lease up while it is still the session's watcher here:
// a message this replica sends meanwhile raises w's goal, and w goes on,
// claiming the lease again. Were w gone from the map first, that message
// would start a second watcher, granted the lease with the message (a
// renewal: the same replica holds it), which w's release then cleared: the
// new watcher went on as the holder of a lease nobody held, another replica
// took it, and both drew the turn (the soak's bots logged "lost the watch
// lease; standing by" with no holder every few minutes).
func (ws *watchers) release(w *watcher, last int, ok bool) (next int, more bool) {
	ws.mu.Lock()
	goal := w.goal()
	if ok && goal > last && !ws.closed {
		ws.mu.Unlock()
		return goal, true
	}
	ws.mu.Unlock()
	w.releaseLease(ws.ctx)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if g := w.goal(); g > goal && !ws.closed {
		return g, true
	}
	// The goroutine is done with them: the next watcher settles them.
	ws.unsettled.put(w.id, w.unrecorded)
	delete(ws.m, w.id)
	return 0, false
}

// spawn runs fn on its own goroutine for the watchers' lifetime: close
// cancels its context and waits for it.
func (ws *watchers) spawn(fn func(ctx context.Context)) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return
	}
	ws.loops.Add(1)
	go func() {
		defer ws.loops.Done()
		fn(ws.ctx)
	}()
}

// poke makes the watcher of session id poll now and reports whether there
// is one.
func (ws *watchers) poke(id string) bool {
	ws.mu.Lock()
	w := ws.m[id]
	ws.mu.Unlock()
	if w == nil {
		return false
	}
	w.poke()
	return true
}

// waitThread blocks until no watcher runs for session id, or ctx ends.
func (ws *watchers) waitThread(ctx context.Context, id string) error {
	for {
		ws.mu.Lock()
		w := ws.m[id]
		ws.mu.Unlock()
		if w == nil {
			return nil
		}
		select {
		case <-w.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// close stops every watcher and waits for them; later watch calls start
// nothing.
func (ws *watchers) close() {
	ws.mu.Lock()
	ws.closed = true
	ws.mu.Unlock()
	ws.cancel()
	ws.wg.Wait()
	ws.loops.Wait()
}

// wait blocks until no watcher runs.
func (ws *watchers) wait() { ws.wg.Wait() }
