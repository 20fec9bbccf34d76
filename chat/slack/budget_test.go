package slack

import (
	"context"
	"testing"
	"time"
)

// TestUpdateBudgetWindow checks the sliding window on a short window: no
// perMinute+1 calls ever start within one window, and a 429 pause holds
// every caller. Only lower bounds on time are asserted (they hold by
// construction, however slow the machine).
func TestUpdateBudgetWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const per, window = 3, 300 * time.Millisecond
	b := newUpdateBudget(per, window)
	// A call starts somewhere between entering acquire and its return, so
	// "call i started at least a window after call i-per" implies
	// returned[i] - entered[i-per] >= window.
	var entered, returned []time.Time
	for range 7 {
		entered = append(entered, time.Now())
		if err := b.acquire(ctx); err != nil {
			t.Fatal(err)
		}
		returned = append(returned, time.Now())
	}
	for i := per; i < len(returned); i++ {
		if gap := returned[i].Sub(entered[i-per]); gap < window {
			t.Fatalf("calls %d and %d started within %v; the window is %v for %d calls", i-per, i, gap, window, per)
		}
	}

	// Wait reports readiness without spending a call.
	b4 := newUpdateBudget(2, 200*time.Millisecond)
	first := time.Now() // before the window's first call
	for range 2 {
		if err := b4.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := b4.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	b4.mu.Lock()
	spent, delay := len(b4.starts), b4.delayLocked(b4.now())
	b4.mu.Unlock()
	if spent != 2 || delay > 0 {
		t.Fatalf("after Wait: %d calls counted (want 2), %v until the next may start (want none)", spent, delay)
	}
	if waited := time.Since(first); waited < 200*time.Millisecond {
		t.Fatalf("Wait returned after %v although the window was full", waited)
	}

	// A 429 pauses everyone for its Retry-After.
	b2 := newUpdateBudget(100, time.Minute)
	b2.pause(200 * time.Millisecond)
	start := time.Now()
	if err := b2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b2.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("a paused budget let a call through after %v", d)
	}

	// A cancelled caller gives up.
	b3 := newUpdateBudget(1, time.Hour)
	if err := b3.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := b3.acquire(cctx); err == nil {
		t.Fatal("acquire on an exhausted budget with a cancelled context succeeded")
	}
}

func TestEditPacer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := newEditPacer(100*time.Millisecond, 1)
	end, err := p.begin(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	// Another message is not held up by m1.
	end2, err := p.begin(ctx, "m2")
	if err != nil {
		t.Fatal(err)
	}
	end2()
	end()
	ended := time.Now()
	end, err = p.begin(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if gap := time.Since(ended); gap < 100*time.Millisecond {
		t.Fatalf("second edit of m1 began %v after the first ended", gap)
	}
	end()
}

// TestEditPacerBurst: a message takes up to burst edits back to back, then
// waits; other messages have buckets of their own; a message the adapter
// neither posted nor edited counts a whole burst spent at first sight,
// however long the adapter has run (the previous process, or the replica
// whose watch this one took over, may just have spent it). Intervals are an hour,
// and a cancelled context answers "not now" at once, so nothing depends
// on timing.
func TestEditPacerBurst(t *testing.T) {
	ctx := context.Background()
	now, cancel := context.WithCancel(ctx)
	cancel() // begin with it succeeds only if an edit may start now
	p := newEditPacer(time.Hour, 3)
	if _, err := p.begin(now, "fresh"); err == nil {
		t.Fatal("a message unseen since the start was edited at once; the previous process may have spent its burst")
	}
	p.posted("mine") // posted by this process: nobody else edited it
	for i := range 3 {
		end, err := p.begin(now, "mine")
		if err != nil {
			t.Fatalf("edit %d of a message this process posted: %v", i+1, err)
		}
		end()
	}
	if _, err := p.begin(now, "taken-over"); err == nil {
		t.Fatal("a message first seen long after the start was edited at once; the replica that watched it before may have spent its burst")
	}
	p.posted("m1")
	p.posted("m2")
	for i := range 3 {
		end, err := p.begin(now, "m1")
		if err != nil {
			t.Fatalf("edit %d of a burst of 3: %v", i+1, err)
		}
		end()
	}
	if _, err := p.begin(now, "m1"); err == nil {
		t.Fatal("a fourth edit went out within the interval after a burst of 3")
	}
	end, err := p.begin(now, "m2")
	if err != nil {
		t.Fatalf("another message waited for m1's bucket: %v", err)
	}
	// While m2's edit runs, a second edit of m2 waits for it, bucket or not.
	if _, err := p.begin(now, "m2"); err == nil {
		t.Fatal("two edits of one message ran at once")
	}
	end()
	// m1's bucket refilled long ago in this process's view (here: never
	// spent), but a watch taken over means another bot may have just
	// edited it: the next edit waits as for an unseen message.
	p.posted("m3")
	p.tookOver("m3")
	if _, err := p.begin(now, "m3"); err == nil {
		t.Fatal("a message taken over from another bot was edited at once; the old holder may have spent its burst")
	}
}
