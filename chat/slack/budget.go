package slack

import (
	"context"
	"sync"
	"time"

	"github.com/sandbot/sandbot/chat/internal/pace"
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
	now       func() time.Time

	mu     sync.Mutex
	smooth pace.Bucket // perMinute per window, in bursts of a tenth
	starts []time.Time // start times of the last perMinute calls, oldest first
	paused time.Time   // no calls before this
}

func newUpdateBudget(perMinute int, window time.Duration) *updateBudget {
	return &updateBudget{
		perMinute: perMinute,
		window:    window,
		smooth:    pace.NewBucket(window/time.Duration(max(perMinute, 1)), perMinute/10),
		now:       time.Now,
	}
}

// delayLocked is how long until the smoothing, the window and any pause
// allow a call.
func (b *updateBudget) delayLocked(now time.Time) time.Duration {
	d := max(b.paused.Sub(now), b.smooth.Wait(now))
	if len(b.starts) >= b.perMinute {
		if w := b.starts[len(b.starts)-b.perMinute].Add(b.window).Sub(now); w > d {
			d = w
		}
	}
	return d
}

// acquire blocks until one more chat.update may start, and counts it.
func (b *updateBudget) acquire(ctx context.Context) error {
	for {
		b.mu.Lock()
		now := b.now()
		d := b.delayLocked(now)
		if d <= 0 {
			b.smooth.Spend(now)
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

// editPacer paces the edits of each message with a token bucket of burst
// edits, refilled one per interval and spent when an edit returns (so the
// interval is measured from the end of one edit to the start of the next,
// as Slack sees them), and never runs two edits of one message at once.
type editPacer struct {
	interval time.Duration
	burst    int
	mu       sync.Mutex
	paces    map[string]pace.Bucket // message key → its edits, spent at their ends
	busy     map[string]chan struct{}
}

func newEditPacer(interval time.Duration, burst int) *editPacer {
	return &editPacer{interval: interval, burst: max(burst, 1), paces: map[string]pace.Bucket{}, busy: map[string]chan struct{}{}}
}

// bucketLocked is key's pace. A message this adapter neither posted nor
// edited yet may have been edited just now by another bot, burst and all:
// the process before a restart, or the replica that watched the turn
// until this one took the watch over (the chaos suite caught a takeover
// by a long-running replica bursting right after the old holder's edits).
// So it is counted as having spent its whole burst at first sight: the
// first edit waits one interval, and the burst comes back as it refills.
func (p *editPacer) bucketLocked(key string) pace.Bucket {
	b, ok := p.paces[key]
	if !ok {
		b = pace.NewSpentBucket(p.interval, p.burst, time.Now())
		p.paces[key] = b
	}
	return b
}

// tookOver forgets what this adapter knows of message key's edits: another
// bot may have edited it since (see chat.TakeoverPacer), so the next edit
// waits as for a message never seen. An edit in flight keeps its slot.
func (p *editPacer) tookOver(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.paces, key)
}

// posted records that this adapter posted message key, so nobody else can
// have edited it: its bucket starts full.
func (p *editPacer) posted(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.paces[key]; !ok {
		p.paces[key] = pace.NewBucket(p.interval, p.burst)
		p.gcLocked()
	}
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
		b := p.bucketLocked(key)
		wait := b.Wait(time.Now())
		if wait <= 0 {
			ch := make(chan struct{})
			p.busy[key] = ch
			p.gcLocked()
			p.mu.Unlock()
			return func() {
				p.mu.Lock()
				b := p.bucketLocked(key)
				b.Spend(time.Now())
				p.paces[key] = b
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
	if len(p.paces) < 1024 {
		return
	}
	now := time.Now()
	for k, b := range p.paces {
		if b.Idle(now) {
			delete(p.paces, k)
		}
	}
}
