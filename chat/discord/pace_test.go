package discord_test

import (
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat/chattest"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// The adapter keeps under Discord's global limit per bot on its own
// (RequestsPerSecond): discordgo paces each route by its bucket's headers
// but learns of the global limit only from a 429, which Discord counts
// against the token. Here the fake keeps a global budget of 10 requests a
// second and the adapter may send 5: a burst of posts across channels
// (each channel's own bucket far from full) is spread out, and the fake
// answers none of them 429. Without the pacer the posts go at once and
// the fake records violations. The margin (6 a second at most against
// 10) keeps the test from depending on the machine's speed.
func TestRequestsStayUnderTheGlobalLimit(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{Budgets: &fakediscord.Budgets{PerChannel: 1000, PerChannelWindow: time.Hour, Global: 10, GlobalWindow: time.Second}})
	cfg := config(f)
	cfg.RequestsPerSecond = 5
	rec := &chattest.Core{}
	a := start(t, cfg, rec)
	th := startSession(t, f, rec)
	for i := range 16 {
		if _, err := a.PostText(t.Context(), th, "note"); err != nil {
			t.Fatalf("post %d: %v", i+1, err)
		}
	}
	if v := f.Violations(); len(v) != 0 {
		t.Errorf("%d requests over the global limit, want none: %+v", len(v), v[0])
	}
}
