package fakediscord

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

type rateRule struct {
	route      string
	left       int
	retryAfter time.Duration
	global     bool
}

// RateLimitNext makes the next n requests on route (one of the Route*
// patterns) answer 429 Too Many Requests, the way Discord does: a JSON
// body with retry_after in seconds and the X-RateLimit-* headers
// (X-RateLimit-Global and scope "global" when global is true). A client
// that honours them retries after retryAfter; the request itself is not
// applied.
func (s *Server) RateLimitNext(route string, n int, retryAfter time.Duration, global bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = append(s.limits, &rateRule{route: route, left: n, retryAfter: retryAfter, global: global})
}

// RateLimited counts 429 responses the fake sent.
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

// takeRateLimit answers 429 if an injected rule matches the route.
func (s *Server) takeRateLimit(w http.ResponseWriter, route string) bool {
	s.mu.Lock()
	var rule *rateRule
	for _, r := range s.limits {
		if r.route == route && r.left > 0 {
			r.left--
			rule = r
			break
		}
	}
	s.mu.Unlock()
	if rule == nil {
		return false
	}
	secs := rule.retryAfter.Seconds()
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(secs))))
	h.Set("X-RateLimit-Limit", "5")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset", fmt.Sprintf("%.3f", float64(time.Now().Add(rule.retryAfter).UnixMilli())/1000))
	h.Set("X-RateLimit-Reset-After", fmt.Sprintf("%.3f", secs))
	h.Set("X-RateLimit-Bucket", "fakebucket")
	scope := "user"
	if rule.global {
		h.Set("X-RateLimit-Global", "true")
		scope = "global"
	}
	h.Set("X-RateLimit-Scope", scope)
	writeJSON(w, http.StatusTooManyRequests, map[string]any{
		"message": "You are being rate limited.", "retry_after": secs, "global": rule.global,
	})
	return true
}
