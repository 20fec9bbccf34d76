package slack

import "time"

// SetNameClock makes a's display-name cache read the time from now, so
// tests can expire entries without waiting. Call it before Run.
func SetNameClock(a *Adapter, now func() time.Time) { a.names.now = now }
