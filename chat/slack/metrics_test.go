package slack_test

import (
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/internal/metrics/metricstest"
)

// The adapter reports whether it is connected (for /readyz), and counts its
// Web API calls, their failures and the waits a 429 asked for. Other tests
// of the package count too, so only increases are checked.
func TestConnectedAndCounted(t *testing.T) {
	ctx := testCtx(t)
	reg := metrics.NewRegistry()
	env := slacktest.New(t, slacktest.Options{})
	if err := env.Adapter.Connected(); err == nil || !strings.Contains(err.Error(), "not connected yet") {
		t.Errorf("before Run: Connected() = %v", err)
	}
	before := metricstest.Gather(t, reg)
	env.Run(newRecCore())
	if err := env.Adapter.Connected(); err != nil {
		t.Errorf("after Ready: Connected() = %v", err)
	}
	root := env.Fake.Say(fakeslack.UserMessage{Text: env.Fake.Mention() + " go"}).Message
	th := chat.Thread{Platform: slack.Platform, Workspace: "T0001", Channel: "C0001", Thread: root.TS}
	ref, err := env.Adapter.Post(ctx, th, chat.Card{Title: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	env.Fake.RateLimit("chat.update", 1, 1)
	if err := env.Adapter.Edit(ctx, th, ref, chat.Card{Title: "v2"}); err != nil {
		t.Fatal(err)
	}
	after := metricstest.Gather(t, reg)
	moved := func(what string, min float64, name string, labels ...string) {
		t.Helper()
		if d := after.Value(name, labels...) - before.Value(name, labels...); d < min {
			t.Errorf("%s moved by %v, want at least %v", what, d, min)
		}
	}
	moved("auth.test calls", 1, "sandbot_chat_api_calls_total", "platform", "slack", "call", "auth.test")
	moved("chat.postMessage calls", 1, "sandbot_chat_api_calls_total", "platform", "slack", "call", "chat.postMessage")
	moved("chat.update calls (the 429 and the retry)", 2, "sandbot_chat_api_calls_total", "platform", "slack", "call", "chat.update")
	moved("chat.update errors", 1, "sandbot_chat_api_errors_total", "platform", "slack", "call", "chat.update")
	moved("429s", 1, "sandbot_chat_rate_limited_total", "platform", "slack")
	moved("Retry-After seconds", 1, "sandbot_chat_rate_limit_wait_seconds_total", "platform", "slack", "kind", metrics.WaitRetryAfter)

	env.Stop()
	if err := env.Adapter.Connected(); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("after Run returned: Connected() = %v", err)
	}
}
