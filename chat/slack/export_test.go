package slack

import (
	"context"
	"time"
)

// SetNameClock makes a's display-name cache read the time from now, so
// tests can expire entries without waiting. Call it before Run.
func SetNameClock(a *Adapter, now func() time.Time) { a.names.now = now }

// WaitSignals blocks until a's native-signal and stream senders are done
// (none runs: nothing is left to send, and no working status waits for
// its refresh).
func WaitSignals(ctx context.Context, a *Adapter) error { return a.signals.wait(ctx) }

// SpendStreamStarts spends a's chat.startStream/stopStream budget, as a
// busy workspace would.
func SpendStreamStarts(ctx context.Context, a *Adapter) error {
	for a.streams.starts.wouldWait() == 0 {
		if err := a.streams.starts.acquire(ctx); err != nil {
			return err
		}
	}
	return nil
}
