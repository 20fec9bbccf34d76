package agent_test

import (
	"context"
	"testing"

	"github.com/sandbot/sandbot/agent"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/internal/metrics/metricstest"
	"github.com/sandbot/sandbot/session"
)

// Every model call is counted with its outcome (ok or the error class) and
// timed; the tokens it reports are added up.
func TestModelCallsAreCounted(t *testing.T) {
	reg := metrics.NewRegistry()
	a, f := newAgent(t, nil)
	f.Push(fakeopenai.FinalStep("hello"), fakeopenai.ErrorStep(429, "Rate limit reached").WithRetryAfter("1"))
	before := metricstest.Gather(t, reg)
	req := agent.ModelRequest{Messages: []session.Message{userMsg("hi")}}
	if _, err := a.Complete(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Complete(testCtx(t), req); err == nil {
		t.Fatal("the 429 was not an error")
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	_, _ = a.Complete(ctx, req)
	after := metricstest.Gather(t, reg)
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"sandbot_model_calls_total", []string{"outcome", metrics.ModelOK}},
		{"sandbot_model_calls_total", []string{"outcome", agent.ErrTypeModelRateLimited}},
		{"sandbot_model_calls_total", []string{"outcome", "canceled"}},
		{"sandbot_model_call_duration_seconds", []string{"result", "ok"}},
	} {
		if d := after.Value(c.name, c.labels...) - before.Value(c.name, c.labels...); d < 1 {
			t.Errorf("%s%v moved by %v", c.name, c.labels, d)
		}
	}
	if d := after.Value("sandbot_model_call_duration_seconds", "result", "error") - before.Value("sandbot_model_call_duration_seconds", "result", "error"); d < 2 {
		t.Errorf("errored calls timed: %v, want 2", d)
	}
	if d := after.Value("sandbot_model_tokens_total", "kind", "prompt") - before.Value("sandbot_model_tokens_total", "kind", "prompt"); d < 1 {
		t.Errorf("prompt tokens moved by %v", d)
	}
}
