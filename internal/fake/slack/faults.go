package fakeslack

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// InjectFault makes the next `times` calls of method fail with f, after
// authentication and before the method runs (so a failed chat.update changes
// nothing, as with Slack).
func (s *Server) InjectFault(method string, times int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range times {
		s.faults[method] = append(s.faults[method], f)
	}
}

// HoldNext makes the next call of method take effect (and be recorded) at
// once but hold its answer until release is called: Slack was slow to
// answer, so the caller learns the outcome late, after whatever the test
// does in between. release may be called more than once.
func (s *Server) HoldNext(method string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.holds[method] = append(s.holds[method], ch)
	s.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// RateLimit makes the next `times` calls of method answer HTTP 429 with
// Retry-After: retryAfter (seconds), as Slack does when a tier is exceeded.
func (s *Server) RateLimit(method string, retryAfter, times int) {
	s.InjectFault(method, times, Fault{Status: http.StatusTooManyRequests, RetryAfter: retryAfter})
}

// budget tracks chat.update calls for the rate budget checks.
type budget struct {
	window []time.Time // workspace-wide calls in the last minute
	// full is, per channel/ts, when that message's bucket of UpdateBurst
	// updates would be full again (a generic cell rate algorithm: each
	// update adds MinUpdateInterval to it).
	full map[string]time.Time
}

// budgetLocked accounts one chat.update on channel/ts. It records a
// violation when the workspace made more than UpdatesPerMinute updates in
// the last minute, or when the message had no update left in its bucket
// (more than UpdateBurst updates back to back, or more than one per
// MinUpdateInterval after them). With RateLimitOverBudget it
// answers 429 instead of accepting an over-budget call. A zero result means
// the call may proceed.
func (s *Server) budgetLocked(channel, ts string, now time.Time) result {
	b := &s.budget
	if r := s.perMinuteLocked(&b.window, "chat.update", s.opts.UpdatesPerMinute, channel, ts, now); r.status != 0 {
		return r
	}
	key := channel + "/" + ts
	if iv := s.opts.MinUpdateInterval; iv > 0 {
		full := b.full[key]
		// The bucket has a token when it is at most UpdateBurst-1
		// intervals from full.
		next := full.Add(-time.Duration(s.opts.UpdateBurst-1) * iv)
		if now.Before(next) {
			s.viols = append(s.viols, Violation{
				Kind: "per_message", Channel: channel, TS: ts, At: now,
				Detail: fmt.Sprintf("updated %v before the message had an update left (it may take %d back to back, then one per %v)",
					next.Sub(now), s.opts.UpdateBurst, iv),
			})
		}
		b.full[key] = later(full, now).Add(iv)
	}
	return result{}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
