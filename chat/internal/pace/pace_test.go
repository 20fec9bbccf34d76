package pace

import (
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestBucketStrictSpacing(t *testing.T) {
	b := NewBucket(time.Second, 1)
	if !b.Ready(t0) || b.Wait(t0) != 0 {
		t.Fatal("a new bucket must be full")
	}
	end := t0.Add(300 * time.Millisecond) // an edit that took 300 ms
	b.Spend(end)
	if got := b.Next(); !got.Equal(end.Add(time.Second)) {
		t.Fatalf("Next = %v, want a second after the end of the last event", got.Sub(t0))
	}
	if b.Ready(end.Add(999*time.Millisecond)) || !b.Ready(end.Add(time.Second)) {
		t.Fatal("Ready does not follow Next")
	}
	if b.Idle(end) || !b.Idle(end.Add(time.Second)) {
		t.Fatal("Idle does not follow the refill")
	}
}

func TestBucketBurstThenRate(t *testing.T) {
	b := NewBucket(time.Second, 5)
	now := t0
	for i := range 5 {
		if !b.Ready(now) {
			t.Fatalf("event %d of the burst held back", i)
		}
		b.Spend(now)
	}
	if b.Ready(now) {
		t.Fatal("a sixth event in the same instant was allowed")
	}
	if w := b.Wait(now); w != time.Second {
		t.Fatalf("Wait = %v, want one interval", w)
	}
	// Half an interval later, half a token is back: still not ready.
	if b.Ready(now.Add(500 * time.Millisecond)) {
		t.Fatal("ready before a whole token came back")
	}
	// After a long quiet spell the bucket is full again, not fuller.
	later := now.Add(time.Hour)
	for i := range 5 {
		if !b.Ready(later) {
			t.Fatalf("event %d after a quiet hour held back", i)
		}
		b.Spend(later)
	}
	if b.Ready(later) {
		t.Fatal("the bucket held more than its burst")
	}
}

func TestBucketSpendEarlyPushesOut(t *testing.T) {
	b := NewBucket(time.Second, 1)
	b.Spend(t0)
	b.Spend(t0) // not ready, spent anyway
	if got := b.Next().Sub(t0); got != 2*time.Second {
		t.Fatalf("Next = +%v, want +2s", got)
	}
}

// A spent bucket is what spending the whole burst at once leaves.
func TestNewSpentBucket(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	spent := NewSpentBucket(time.Second, 4, now)
	b := NewBucket(time.Second, 4)
	for range 4 {
		b.Spend(now)
	}
	if spent != b {
		t.Fatalf("NewSpentBucket = %+v, spending the burst gives %+v", spent, b)
	}
	if w := spent.Wait(now); w != time.Second {
		t.Fatalf("the next event waits %v, want one interval", w)
	}
}
