package fakediscord_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// TestBudgetsPerChannel: with Budgets set, a sixth message in one channel
// within the window is answered 429 and recorded as a violation, while
// another channel has a bucket of its own. The window is an hour, so the
// test does not depend on how fast the machine is.
func TestBudgetsPerChannel(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{Budgets: &fakediscord.Budgets{PerChannelWindow: time.Hour}})
	other := "5000000000000000777"
	f.AddChannel(fakediscord.Channel{ID: other, Type: fakediscord.ChannelText, GuildID: fakediscord.DefaultGuildID, Name: "other"})
	post := func(channel string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", f.URL()+"/api/v9/channels/"+channel+"/messages", strings.NewReader(`{"content":"hi"}`))
		req.Header.Set("Authorization", "Bot "+f.Token())
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := range 5 {
		resp := post(fakediscord.DefaultChannelID)
		if resp.StatusCode != 200 {
			t.Fatalf("message %d: %s", i+1, resp.Status)
		}
		if got, want := resp.Header.Get("X-RateLimit-Remaining"), string(rune('0'+4-i)); got != want {
			t.Fatalf("message %d: X-RateLimit-Remaining %q, want %q", i+1, got, want)
		}
	}
	if resp := post(fakediscord.DefaultChannelID); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("sixth message: %s (Retry-After %q), want 429 with Retry-After", resp.Status, resp.Header.Get("Retry-After"))
	}
	if resp := post(other); resp.StatusCode != 200 {
		t.Fatalf("another channel: %s, want 200", resp.Status)
	}
	v := f.Violations()
	if len(v) != 1 || v[0].Scope != "channel" || v[0].Route != fakediscord.RouteCreateMessage {
		t.Fatalf("violations %+v, want one per-channel on create", v)
	}
	if n := len(f.Messages(fakediscord.DefaultChannelID)); n != 5 {
		t.Fatalf("%d messages stored, want 5 (the refused one is not)", n)
	}
}

// TestBudgetsGlobal: requests past the global budget within its window
// are answered 429 with X-RateLimit-Global, whatever their route. (The
// window is an hour, so the test does not depend on the machine's speed.)
func TestBudgetsGlobal(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{Budgets: &fakediscord.Budgets{Global: 3, GlobalWindow: time.Hour}})
	get := func(path string) *http.Response {
		req, _ := http.NewRequest("GET", f.URL()+path, nil)
		req.Header.Set("Authorization", "Bot "+f.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := range 3 {
		if resp := get("/api/v9/users/@me"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %s", i+1, resp.Status)
		}
	}
	last := get("/api/v9/channels/" + fakediscord.DefaultChannelID)
	if last.StatusCode != http.StatusTooManyRequests || last.Header.Get("X-RateLimit-Global") != "true" {
		t.Fatalf("fourth request: %s (global %q), want 429 global", last.Status, last.Header.Get("X-RateLimit-Global"))
	}
	if v := f.Violations(); len(v) != 1 || v[0].Scope != "global" {
		t.Fatalf("violations %+v, want one global", v)
	}
}

// TestBudgetsPaceDiscordgo: discordgo reads the bucket's headers and waits
// for its reset instead of going over, so a client that honours them never
// causes a violation.
func TestBudgetsPaceDiscordgo(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{Budgets: &fakediscord.Budgets{PerChannelWindow: 300 * time.Millisecond}})
	s := session(t, f, 0)
	for i := range 12 {
		if _, err := s.ChannelMessageSend(fakediscord.DefaultChannelID, "m"); err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
	}
	if v := f.Violations(); len(v) != 0 {
		t.Fatalf("violations %+v, want none: discordgo paces itself by the headers", v)
	}
}
