package slack

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// budgetWindow is the sliding window of the workspace chat.update budget:
// a minute plus a margin, so that network jitter between our clock and
// Slack's can never squeeze budget+1 calls into Slack's minute.
const budgetWindow = 61 * time.Second

// updateBudget paces chat.update across the workspace: at most perMinute
// calls start in any budgetWindow, spread out by a token bucket (so a
// burst does not spend the minute's budget in a second and then freeze
// every status message), and none start while Slack has asked us to back
// off (a 429's Retry-After). It is safe for concurrent use.
type updateBudget struct {
	perMinute int
	window    time.Duration
	smooth    *rate.Limiter
	now       func() time.Time

	mu     sync.Mutex
	starts []time.Time // start times of the last perMinute calls, oldest first
	paused time.Time   // no calls before this
}

func newUpdateBudget(perMinute int, window time.Duration) *updateBudget {
	burst := max(1, perMinute/10)
	return &updateBudget{
		perMinute: perMinute,
		window:    window,
		smooth:    rate.NewLimiter(rate.Limit(float64(perMinute)/window.Seconds()), burst),
		now:       time.Now,
	}
}

// delayLocked is how long until the window and any pause allow a call.
func (b *updateBudget) delayLocked(now time.Time) time.Duration {
	d := b.paused.Sub(now)
	if len(b.starts) >= b.perMinute {
		if w := b.starts[len(b.starts)-b.perMinute].Add(b.window).Sub(now); w > d {
			d = w
		}
	}
	return d
}

// acquire blocks until one more chat.update may start, and counts it.
func (b *updateBudget) acquire(ctx context.Context) error {
	if err := b.smooth.Wait(ctx); err != nil {
		return err
	}
	for {
		b.mu.Lock()
		now := b.now()
		d := b.delayLocked(now)
		if d <= 0 {
			b.starts = append(b.starts, now)
			if len(b.starts) > b.perMinute {
				b.starts = append(b.starts[:0], b.starts[len(b.starts)-b.perMinute:]...)
			}
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
}

// Wait blocks until a chat.update could start now, without counting one.
// It is the chat.Limiter handed to the core's turn watcher: the watcher
// waits here, then renders the newest state, so a busy workspace coalesces
// intermediate states instead of queueing stale ones inside Edit.
func (b *updateBudget) Wait(ctx context.Context) error {
	for {
		b.mu.Lock()
		now := b.now()
		d := b.delayLocked(now)
		b.mu.Unlock()
		if t := b.smooth.TokensAt(now); t < 1 {
			if rd := time.Duration((1 - t) / float64(b.smooth.Limit()) * float64(time.Second)); rd > d {
				d = rd
			}
		}
		if d <= 0 {
			return nil
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
}

// pause stops all calls until d from now (Slack's Retry-After).
func (b *updateBudget) pause(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.now().Add(d); t.After(b.paused) {
		b.paused = t
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// editPacer keeps edits of one message at least interval apart, measured
// from the end of one edit to the start of the next, as Slack sees them.
type editPacer struct {
	interval time.Duration
	// started is when this adapter started. A message it has not edited yet
	// may have been edited by the previous bot process just before a
	// restart, so the pacer counts the start as that message's last edit.
	started time.Time
	mu      sync.Mutex
	last    map[string]time.Time // message key → end of its last edit
	busy    map[string]chan struct{}
}

func newEditPacer(interval time.Duration) *editPacer {
	return &editPacer{interval: interval, started: time.Now(), last: map[string]time.Time{}, busy: map[string]chan struct{}{}}
}

// begin waits until key may be edited and marks it busy; the returned
// function, called when the edit returns, records its end and frees it.
func (p *editPacer) begin(ctx context.Context, key string) (end func(), err error) {
	for {
		p.mu.Lock()
		if ch, ok := p.busy[key]; ok { // another edit of the same message is in flight
			p.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		last, ok := p.last[key]
		if !ok {
			last = p.started
		}
		wait := time.Until(last.Add(p.interval))
		if wait <= 0 {
			ch := make(chan struct{})
			p.busy[key] = ch
			p.gcLocked()
			p.mu.Unlock()
			return func() {
				p.mu.Lock()
				p.last[key] = time.Now()
				delete(p.busy, key)
				close(ch)
				p.mu.Unlock()
			}, nil
		}
		p.mu.Unlock()
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// gcLocked forgets messages whose last edit no longer constrains anything.
func (p *editPacer) gcLocked() {
	if len(p.last) < 1024 {
		return
	}
	cut := time.Now().Add(-p.interval)
	for k, t := range p.last {
		if t.Before(cut) {
			delete(p.last, k)
		}
	}
}
