package discord_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/internal/metrics/metricstest"
)

// The adapter reports whether its gateway is connected (for /readyz), and
// counts its REST calls by method and resource, their failures and the
// waits a 429 asked for. Other tests of the package count too, so only
// increases are checked.
func TestConnectedAndCounted(t *testing.T) {
	f := fakediscord.Start(t, fakediscord.Options{})
	reg := metrics.NewRegistry()
	before := metricstest.Gather(t, reg)
	a, err := discord.New(config(f), testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connected(); err == nil || !strings.Contains(err.Error(), "not connected yet") {
		t.Errorf("before Run: Connected() = %v", err)
	}
	rec := &chattest.Core{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, rec) }()
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("adapter not ready")
	}
	if err := a.Connected(); err != nil {
		t.Errorf("after Ready: Connected() = %v", err)
	}
	th := startSession(t, f, rec)
	ref, err := a.Post(t.Context(), th, chat.Card{Title: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	f.RateLimitNext(fakediscord.RouteEditMessage, 1, 1500*time.Millisecond, false)
	if err := a.Edit(t.Context(), th, ref, chat.Card{Title: "v2"}); err != nil {
		t.Fatal(err)
	}
	after := metricstest.Gather(t, reg)
	moved := func(what string, min float64, name string, labels ...string) {
		t.Helper()
		if d := after.Value(name, labels...) - before.Value(name, labels...); d < min {
			t.Errorf("%s moved by %v, want at least %v", what, d, min)
		}
	}
	moved("command registration", 1, "sandbot_chat_api_calls_total", "platform", "discord", "call", "PUT applications")
	moved("message posts", 1, "sandbot_chat_api_calls_total", "platform", "discord", "call", "POST channels")
	moved("edits (the 429 and the retry)", 2, "sandbot_chat_api_calls_total", "platform", "discord", "call", "PATCH channels")
	moved("edit errors", 1, "sandbot_chat_api_errors_total", "platform", "discord", "call", "PATCH channels")
	moved("429s", 1, "sandbot_chat_rate_limited_total", "platform", "discord")
	moved("Retry-After seconds", 1, "sandbot_chat_rate_limit_wait_seconds_total", "platform", "discord", "kind", metrics.WaitRetryAfter)
	for name := range after {
		for _, m := range after[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "call" && strings.ContainsAny(l.GetValue(), "0123456789") {
					t.Errorf("%s has a call label with an ID in it: %q", name, l.GetValue())
				}
			}
		}
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := a.Connected(); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("after Run returned: Connected() = %v", err)
	}
}
