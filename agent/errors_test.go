package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sandbot/sandbot/agent"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// assertAppErr checks err is an ApplicationError of the given type and
// retryability, and that no part of it carries the test key.
func assertAppErr(t *testing.T, err error, typ string, retryable bool) *temporal.ApplicationError {
	t.Helper()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("want *temporal.ApplicationError, got %T: %v", err, err)
	}
	if appErr.Type() != typ || appErr.NonRetryable() == retryable {
		t.Fatalf("type %q retryable %v, want %q retryable %v (%v)", appErr.Type(), !appErr.NonRetryable(), typ, retryable, err)
	}
	if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), testKey[:12]) {
		t.Fatalf("API key leaked: %v", err)
	}
	return appErr
}

func complete(t *testing.T, a *agent.Activities) error {
	t.Helper()
	_, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: []session.Message{userMsg("hi")}})
	if err == nil {
		t.Fatal("want an error")
	}
	return err
}

func TestClassify401WrongKey(t *testing.T) {
	// The fake answers a wrong key like the real service: 401 with the key
	// echoed in masked form.
	f := fakeopenai.New(fakeopenai.WithAPIKey("sk-the-right-one"))
	defer f.Close()
	a, err := agent.NewActivities(agent.Config{BaseURL: f.URL(), APIKey: testKey, Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	err = complete(t, a)
	appErr := assertAppErr(t, err, agent.ErrTypeModelAuth, false)
	msg := appErr.Message()
	if !strings.Contains(msg, "rejected the API key (401)") || !strings.Contains(msg, f.URL()) {
		t.Fatalf("message = %q", msg)
	}
	if strings.Contains(err.Error(), "sk-pro") || strings.Contains(err.Error(), "sk-***") {
		t.Fatalf("masked key echoed to the user: %v", err)
	}
	if len(f.Requests()) != 1 {
		t.Fatal("request not made")
	}
}

func TestClassifyStatuses(t *testing.T) {
	for _, tc := range []struct {
		name      string
		step      fakeopenai.Step
		typ       string
		retryable bool
		contains  string
		delay     time.Duration
	}{
		{"403", fakeopenai.ErrorStep(403, "Country, region, or territory not supported").WithCode("unsupported_country_region_territory"), agent.ErrTypeModelAuth, false, "refused access (403)", 0},
		{"404 model", fakeopenai.ErrorStep(404, "The model `gpt-test` does not exist"), agent.ErrTypeModelNotFound, false, `model "gpt-test" not found at http://127.0.0.1`, 0},
		{"404 html", fakeopenai.Step{Status: 404, RawBody: "<html>nope</html>"}, agent.ErrTypeModelNotFound, false, "(404)", 0},
		{"400", fakeopenai.ErrorStep(400, "Invalid value for 'tool_choice'"), agent.ErrTypeModelBadRequest, false, "rejected the request (400): Invalid value", 0},
		{"422", fakeopenai.ErrorStep(422, "unprocessable"), agent.ErrTypeModelBadRequest, false, "(422)", 0},
		{"context length", fakeopenai.ErrorStep(400, "This model's maximum context length is 128000 tokens").WithCode("context_length_exceeded"), agent.ErrTypeModelContextTooLong, false, "too long", 0},
		{"quota", fakeopenai.ErrorStep(429, "You exceeded your current quota").WithCode("insufficient_quota"), agent.ErrTypeModelQuota, false, "out of quota", 0},
		{"429 seconds", fakeopenai.ErrorStep(429, "Rate limit reached").WithRetryAfter("7"), agent.ErrTypeModelRateLimited, true, "rate limiting", 7 * time.Second},
		{"429 ms wins", fakeopenai.ErrorStep(429, "slow down").WithRetryAfter("20").WithHeader("retry-after-ms", "1500"), agent.ErrTypeModelRateLimited, true, "(429)", 1500 * time.Millisecond},
		{"429 capped", fakeopenai.ErrorStep(429, "later").WithRetryAfter("86000"), agent.ErrTypeModelRateLimited, true, "(429)", agent.MaxRetryDelay},
		{"429 no header", fakeopenai.ErrorStep(429, "later"), agent.ErrTypeModelRateLimited, true, "(429)", 0},
		{"408", fakeopenai.ErrorStep(408, "timeout"), agent.ErrTypeModelUnavailable, true, "(408)", 0},
		{"409", fakeopenai.ErrorStep(409, "conflict"), agent.ErrTypeModelUnavailable, true, "(409)", 0},
		{"500", fakeopenai.ErrorStep(500, "The server had an error"), agent.ErrTypeModelUnavailable, true, "unavailable (500)", 0},
		{"503 retry-after", fakeopenai.ErrorStep(503, "overloaded").WithRetryAfter("2"), agent.ErrTypeModelUnavailable, true, "(503)", 2 * time.Second},
		{"502 html", fakeopenai.Step{Status: 502, RawBody: "<html><body>Bad Gateway</body></html>"}, agent.ErrTypeModelUnavailable, true, "(502)", 0},
		{"should-retry false", fakeopenai.ErrorStep(500, "boom").WithHeader("x-should-retry", "false"), agent.ErrTypeModelUnavailable, false, "asked not to be retried", 0},
		{"should-retry true", fakeopenai.ErrorStep(400, "try again").WithHeader("x-should-retry", "true"), agent.ErrTypeModelUnavailable, true, "asked to be retried", 0},
		{"should-retry true on 401", fakeopenai.ErrorStep(401, "bad key").WithHeader("x-should-retry", "true"), agent.ErrTypeModelAuth, false, "(401)", 0},
		{"no choices", fakeopenai.Step{RawBody: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[]}`}, agent.ErrTypeModelBadResponse, true, "no choices", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, f := newAgent(t, nil)
			f.Push(tc.step)
			err := complete(t, a)
			appErr := assertAppErr(t, err, tc.typ, tc.retryable)
			if !strings.Contains(appErr.Message(), tc.contains) {
				t.Fatalf("message %q lacks %q", appErr.Message(), tc.contains)
			}
			if appErr.NextRetryDelay() != tc.delay {
				t.Fatalf("NextRetryDelay = %v, want %v", appErr.NextRetryDelay(), tc.delay)
			}
		})
	}
}

func TestClassifyRetryAfterHTTPDate(t *testing.T) {
	a, f := newAgent(t, nil)
	at := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	f.Push(fakeopenai.ErrorStep(503, "maintenance").WithRetryAfter(at))
	appErr := assertAppErr(t, complete(t, a), agent.ErrTypeModelUnavailable, true)
	// The date has one-second resolution and some time passes: allow slack.
	if d := appErr.NextRetryDelay(); d < 60*time.Second || d > 91*time.Second {
		t.Fatalf("NextRetryDelay = %v, want about 90s", d)
	}
}

func TestClassifyStreamingErrors(t *testing.T) {
	t.Run("status before stream", func(t *testing.T) {
		a, f := newAgent(t, func(c *agent.Config) { c.Stream = true })
		f.Push(fakeopenai.ErrorStep(429, "slow").WithRetryAfter("3"))
		appErr := assertAppErr(t, complete(t, a), agent.ErrTypeModelRateLimited, true)
		if appErr.NextRetryDelay() != 3*time.Second {
			t.Fatalf("NextRetryDelay = %v", appErr.NextRetryDelay())
		}
	})
	t.Run("broken mid-stream", func(t *testing.T) {
		a, f := newAgent(t, func(c *agent.Config) { c.Stream = true })
		st := fakeopenai.ToolCallStep("c", "shell", `{"commands":["a long command line here"]}`).WithFragment(4)
		st.BreakAfter = 4
		f.Push(st)
		appErr := assertAppErr(t, complete(t, a), agent.ErrTypeModelUnavailable, true)
		if !strings.Contains(appErr.Message(), "broke off") {
			t.Fatalf("message = %q", appErr.Message())
		}
	})
}

func TestClassifyUnreachable(t *testing.T) {
	f := fakeopenai.New()
	url := f.URL()
	f.Close() // nothing listens there any more
	a, err := agent.NewActivities(agent.Config{BaseURL: url, APIKey: testKey, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	appErr := assertAppErr(t, complete(t, a), agent.ErrTypeModelUnavailable, true)
	if !strings.Contains(appErr.Message(), "unreachable") {
		t.Fatalf("message = %q", appErr.Message())
	}
}

func TestClassifyRequestTimeout(t *testing.T) {
	hold := make(chan struct{}) // never released: the call must time out
	a, f := newAgent(t, func(c *agent.Config) { c.RequestTimeout = 50 * time.Millisecond })
	f.Push(fakeopenai.Step{Content: "too late", Hold: hold})
	appErr := assertAppErr(t, complete(t, a), agent.ErrTypeModelTimeout, true)
	if !strings.Contains(appErr.Message(), "timed out after 50ms") {
		t.Fatalf("message = %q", appErr.Message())
	}
}

func TestCompleteCancelledPassesThrough(t *testing.T) {
	hold := make(chan struct{})
	a, f := newAgent(t, nil)
	f.Push(fakeopenai.Step{Content: "never", Hold: hold})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.Complete(ctx, agent.ModelRequest{Messages: []session.Message{userMsg("hi")}})
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(f.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("request never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	err := <-done
	var appErr *temporal.ApplicationError
	if !errors.Is(err, context.Canceled) || errors.As(err, &appErr) {
		t.Fatalf("want plain context.Canceled, got %T %v", err, err)
	}
}

func TestClassifyDirect(t *testing.T) {
	if agent.Classify(nil) != nil {
		t.Fatal("Classify(nil) != nil")
	}
	already := temporal.NewNonRetryableApplicationError("x", "Custom", nil)
	if got := agent.Classify(already); got != already {
		t.Fatalf("ApplicationError not passed through: %v", got)
	}
	wrapped := fmt.Errorf("op: %w", context.Canceled)
	if got := agent.Classify(wrapped); got != wrapped {
		t.Fatalf("cancellation not passed through: %v", got)
	}
	// An unknown error is retryable and scrubbed of key-shaped strings.
	got := agent.Classify(errors.New("weird failure with Bearer sk-abcdefghijkl"))
	appErr := assertAppErr(t, got, agent.ErrTypeModelUnavailable, true)
	if strings.Contains(got.Error(), "sk-abcdefghijkl") || !strings.Contains(appErr.Message(), "weird failure") {
		t.Fatalf("classified = %v", got)
	}
}
