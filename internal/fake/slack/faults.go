package fakeslack

import (
	"fmt"
	"net/http"
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

// RateLimit makes the next `times` calls of method answer HTTP 429 with
// Retry-After: retryAfter (seconds), as Slack does when a tier is exceeded.
func (s *Server) RateLimit(method string, retryAfter, times int) {
	s.InjectFault(method, times, Fault{Status: http.StatusTooManyRequests, RetryAfter: retryAfter})
}

// budget tracks chat.update calls for the rate budget checks.
type budget struct {
	window []time.Time          // workspace-wide calls in the last minute
	last   map[string]time.Time // channel/ts → last update
}

// budgetLocked accounts one chat.update on channel/ts. It records a
// violation when the workspace made more than UpdatesPerMinute updates in
// the last minute, or when the message was updated sooner than
// MinUpdateInterval after its previous update. With RateLimitOverBudget it
// answers 429 instead of accepting an over-budget call. A zero result means
// the call may proceed.
func (s *Server) budgetLocked(channel, ts string, now time.Time) result {
	b := &s.budget
	cut := now.Add(-time.Minute)
	keep := b.window[:0]
	for _, t := range b.window {
		if t.After(cut) {
			keep = append(keep, t)
		}
	}
	b.window = keep
	if len(b.window) >= s.opts.UpdatesPerMinute {
		if s.opts.RateLimitOverBudget {
			wait := b.window[0].Add(time.Minute).Sub(now)
			return result{status: http.StatusTooManyRequests, retryAfter: int(wait/time.Second) + 1}
		}
		s.viols = append(s.viols, Violation{
			Kind: "per_minute", Channel: channel, TS: ts, At: now,
			Detail: fmt.Sprintf("%d chat.update calls within one minute (budget %d)", len(b.window)+1, s.opts.UpdatesPerMinute),
		})
	}
	b.window = append(b.window, now)
	key := channel + "/" + ts
	if last, ok := b.last[key]; ok && s.opts.MinUpdateInterval > 0 {
		if gap := now.Sub(last); gap < s.opts.MinUpdateInterval {
			s.viols = append(s.viols, Violation{
				Kind: "per_message", Channel: channel, TS: ts, At: now,
				Detail: fmt.Sprintf("updated %v after the previous update (minimum %v)", gap, s.opts.MinUpdateInterval),
			})
		}
	}
	b.last[key] = now
	return result{}
}
