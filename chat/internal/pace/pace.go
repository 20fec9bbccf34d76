// Package pace is the one edit pacer of the chat front ends: a token
// bucket on explicit times. The core's turn watcher paces each status
// message with it (on its own, possibly virtual, clock), and the Slack
// adapter paces edits per message and chat.update calls per workspace.
package pace

import "time"

// Bucket holds up to burst tokens and gets one back every interval; each
// event spends one. It is kept as the time the bucket would be full again
// (a generic cell rate algorithm), so it is exact in integer time and
// costs nothing while idle. A new Bucket is full.
//
// Callers pass the times: whoever counts an event from its end (an edit
// that must not start until interval after the previous one returned)
// spends at the end. A Bucket is a value without locking; callers that
// share one guard it.
type Bucket struct {
	interval time.Duration
	burst    int
	full     time.Time // when every token is back; zero: full now
}

// NewBucket returns a full bucket of burst tokens (at least one), one
// coming back every interval.
func NewBucket(interval time.Duration, burst int) Bucket {
	return Bucket{interval: interval, burst: max(burst, 1)}
}

// NewSpentBucket returns a bucket whose every token was spent at now: for
// a message someone else may have just edited, burst and all, so the
// next event waits one interval and the burst comes back as it refills.
func NewSpentBucket(interval time.Duration, burst int, now time.Time) Bucket {
	b := NewBucket(interval, burst)
	b.full = now.Add(time.Duration(b.burst) * b.interval)
	return b
}

// Next is the earliest time the next event may happen: when at least one
// token is back. It is the zero time for a full bucket.
func (b *Bucket) Next() time.Time {
	if b.full.IsZero() {
		return time.Time{}
	}
	return b.full.Add(-time.Duration(b.burst-1) * b.interval)
}

// Ready reports whether an event may happen at now.
func (b *Bucket) Ready(now time.Time) bool { return !now.Before(b.Next()) }

// Wait is how long from now until an event may happen (0 if it may now).
func (b *Bucket) Wait(now time.Time) time.Duration { return max(b.Next().Sub(now), 0) }

// Spend takes one token for an event at at. Spending early (before Next)
// is allowed and pushes Next further out, so a caller that cannot wait
// still slows down the ones after it.
func (b *Bucket) Spend(at time.Time) {
	if b.full.Before(at) {
		b.full = at
	}
	b.full = b.full.Add(b.interval)
}

// Idle reports whether the bucket is full again at now, so a caller
// keeping many buckets may forget it.
func (b *Bucket) Idle(now time.Time) bool { return !b.full.After(now) }
