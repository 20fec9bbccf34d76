package fakediscord

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Budgets are Discord's own rate limits, which the fake keeps when
// Options.Budgets is set (by default it keeps none: tests inject 429s with
// RateLimitNext). Discord documents the mechanism, not the numbers
// (docs.discord.com/developers/topics/rate-limits: per-route buckets keyed
// by the top-level resource, channel_id for messages, announced in
// X-RateLimit-* headers; a global limit per bot); the numbers below are
// what bots observe and libraries hard-code (5 messages per 5 s per
// channel, 50 requests a second per bot).
type Budgets struct {
	// PerChannel requests on one message route (create, edit) in one
	// channel or thread per PerChannelWindow: 5 per 5 s when zero. Each
	// answer carries the bucket's X-RateLimit-* headers, as Discord's do,
	// so a client can pace itself.
	PerChannel       int
	PerChannelWindow time.Duration
	// Global requests of the bot in one second, over every bot route but
	// interaction callbacks and webhooks (Discord exempts those): 50 when
	// zero. Discord sends no headers for it until it answers 429.
	// GlobalWindow is its window (a second when zero; tests lengthen it).
	Global       int
	GlobalWindow time.Duration
}

func (b *Budgets) setDefaults() {
	if b.PerChannel <= 0 {
		b.PerChannel = 5
	}
	if b.PerChannelWindow <= 0 {
		b.PerChannelWindow = 5 * time.Second
	}
	if b.Global <= 0 {
		b.Global = 50
	}
	if b.GlobalWindow <= 0 {
		b.GlobalWindow = time.Second
	}
}

// Violation is a request over one of Discord's budgets: the fake answered
// it 429, as Discord does, and Discord counts it against the bot (enough
// of them in ten minutes get the bot's IP banned).
type Violation struct {
	At     time.Time
	Route  string
	Scope  string // "channel" or "global"
	Detail string
}

// window is a fixed-window bucket, as Discord's buckets are: it holds
// limit requests from its first until reset.
type window struct {
	start time.Time
	used  int
}

// budgeted are the routes Discord limits per channel.
var budgeted = map[string]bool{RouteCreateMessage: true, RouteEditMessage: true}

// takeBudget answers 429 and records a Violation when the request is over
// a budget; otherwise it counts it and sets the bucket's headers.
func (s *Server) takeBudget(w http.ResponseWriter, r *http.Request, route string, botRoute bool) bool {
	if s.opts.Budgets == nil || !botRoute {
		return false
	}
	b := s.opts.Budgets
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.budgetWin["global"]
	if g == nil || now.Sub(g.start) >= b.GlobalWindow {
		g = &window{start: now}
		s.budgetWin["global"] = g
	}
	if g.used >= b.Global {
		s.overBudget(w, route, "global", g.start.Add(b.GlobalWindow).Sub(now), fmt.Sprintf("%d requests within %s (limit %d)", g.used+1, b.GlobalWindow, b.Global))
		return true
	}
	var c *window
	key := route + " " + r.PathValue("channel")
	if budgeted[route] {
		c = s.budgetWin[key]
		if c == nil || now.Sub(c.start) >= b.PerChannelWindow {
			c = &window{start: now}
			s.budgetWin[key] = c
		}
		if c.used >= b.PerChannel {
			s.overBudget(w, route, "channel", c.start.Add(b.PerChannelWindow).Sub(now),
				fmt.Sprintf("%s in channel %s: %d within %s (limit %d)", route, r.PathValue("channel"), c.used+1, b.PerChannelWindow, b.PerChannel))
			return true
		}
		c.used++
		reset := c.start.Add(b.PerChannelWindow)
		h := w.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(b.PerChannel))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(b.PerChannel-c.used))
		h.Set("X-RateLimit-Reset", secondsUp(time.Duration(reset.UnixNano())))
		h.Set("X-RateLimit-Reset-After", secondsUp(reset.Sub(now)))
		h.Set("X-RateLimit-Bucket", key)
	}
	g.used++
	return false
}

// overBudget answers 429 as Discord does and records the violation.
// Callers hold s.mu.
func (s *Server) overBudget(w http.ResponseWriter, route, scope string, after time.Duration, detail string) {
	s.violations = append(s.violations, Violation{At: time.Now(), Route: route, Scope: scope, Detail: detail})
	secs := max(after, time.Millisecond).Seconds()
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(int(secs+0.999)))
	h.Set("X-RateLimit-Reset-After", secondsUp(after))
	h.Set("X-RateLimit-Scope", "user")
	if scope == "global" {
		h.Set("X-RateLimit-Global", "true")
		h.Set("X-RateLimit-Scope", "global")
	} else {
		h.Set("X-RateLimit-Remaining", "0")
	}
	writeJSON(w, http.StatusTooManyRequests, map[string]any{
		"message": "You are being rate limited.", "retry_after": secs, "global": scope == "global",
	})
}

// Violations are the requests the fake answered 429 for being over a
// budget (Options.Budgets), in order; injected 429s (RateLimitNext) are
// not among them.
func (s *Server) Violations() []Violation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Violation(nil), s.violations...)
}

// secondsUp formats d in seconds to the millisecond, as Discord's
// X-RateLimit-Reset(-After) headers are, rounded up (and at least 1 ms) so
// the fake never announces a bucket's reset before the bucket resets. A
// client that waits exactly what it was told is then never over: with
// %.3f's rounding to the nearest the announced reset could be up to half
// a millisecond early, and on loopback discordgo's next request arrived
// inside the old window (TestBudgetsPaceDiscordgo failed so in CI).
func secondsUp(d time.Duration) string {
	ms := (max(d, time.Millisecond) + time.Millisecond - 1) / time.Millisecond
	return fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
}
