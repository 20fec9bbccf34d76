package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/agent"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

const testKey = "sk-proj-SeCrEtKeY0123456789abcdef"

// newAgent starts a fake demanding testKey and returns activities pointed at it.
func newAgent(t testing.TB, mutate func(*agent.Config), opts ...fakeopenai.Option) (*agent.Activities, *fakeopenai.Server) {
	t.Helper()
	f := fakeopenai.New(append([]fakeopenai.Option{fakeopenai.WithAPIKey(testKey)}, opts...)...)
	t.Cleanup(f.Close)
	cfg := agent.Config{BaseURL: f.URL(), APIKey: testKey, Model: "gpt-test"}
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := agent.NewActivities(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, f
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func userMsg(s string) session.Message { return session.Message{Role: session.RoleUser, Content: s} }

func TestCompleteToolCallRoundTrip(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) {
			a, f := newAgent(t, func(c *agent.Config) { c.Stream = stream })
			f.Push(fakeopenai.ToolCallStep("call_1", "shell", `{"commands":["ls -la"]}`).WithFragment(3), fakeopenai.FinalStep("The workspace has one file."))

			transcript := []session.Message{userMsg("what is in here?")}
			resp, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: transcript})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.ToolCalls) != 1 || resp.ToolCalls[0] != (session.ToolCall{ID: "call_1", Name: "shell", Arguments: `{"commands":["ls -la"]}`}) {
				t.Fatalf("tool calls = %+v", resp.ToolCalls)
			}
			if resp.FinishReason != "tool_calls" || resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
				t.Fatalf("finish %q usage %+v", resp.FinishReason, resp.Usage)
			}
			args, err := agent.ParseShellArgs(resp.ToolCalls[0].Arguments)
			if err != nil || args.Commands[0] != "ls -la" {
				t.Fatalf("args %+v, %v", args, err)
			}

			transcript = append(transcript,
				session.Message{Role: session.RoleAssistant, ToolCalls: resp.ToolCalls},
				session.Message{Role: session.RoleTool, ToolCallID: "call_1", Name: "shell", Content: "$ ls -la\nREADME.md\nexit code: 0"})
			resp, err = a.Complete(testCtx(t), agent.ModelRequest{Messages: transcript})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Content != "The workspace has one file." || len(resp.ToolCalls) != 0 || resp.FinishReason != "stop" {
				t.Fatalf("final = %+v", resp)
			}

			// What went over the wire on the second call.
			r, _ := f.LastRequest()
			if r.Body.Stream != stream {
				t.Fatalf("stream flag = %v", r.Body.Stream)
			}
			msgs := r.Body.Messages
			if len(msgs) != 4 || msgs[0].Role != "system" || msgs[0].Content != agent.DefaultSystemPrompt {
				t.Fatalf("want system prompt first, got %+v", msgs)
			}
			if msgs[2].Role != "assistant" || len(msgs[2].ToolCalls) != 1 || msgs[2].ToolCalls[0].ID != "call_1" ||
				msgs[2].ToolCalls[0].Type != "function" || msgs[2].ToolCalls[0].Function.Arguments != `{"commands":["ls -la"]}` {
				t.Fatalf("assistant message = %+v", msgs[2])
			}
			if msgs[3].Role != "tool" || msgs[3].ToolCallID != "call_1" || !strings.Contains(msgs[3].Content, "README.md") {
				t.Fatalf("tool message = %+v", msgs[3])
			}
		})
	}
}

func TestCompleteSendsKeyToolsAndPrompt(t *testing.T) {
	a, f := newAgent(t, func(c *agent.Config) { c.SystemPrompt = "custom prompt" })
	f.Push(fakeopenai.FinalStep("ok"))
	if _, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: []session.Message{userMsg("hi")}}); err != nil {
		t.Fatal(err)
	}
	r, _ := f.LastRequest()
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Fatalf("Authorization = %q", got)
	}
	if r.Body.Model != "gpt-test" || r.Body.Messages[0].Role != "system" || r.Body.Messages[0].Content != "custom prompt" {
		t.Fatalf("model %q, first message %+v", r.Body.Model, r.Body.Messages[0])
	}
	if len(r.Body.Tools) != 2 || r.Body.Tools[0].Type != "function" || r.Body.Tools[0].Function.Name != "shell" || r.Body.Tools[1].Function.Name != "share_file" {
		t.Fatalf("tools = %+v", r.Body.Tools)
	}
	var schema struct {
		Type       string `json:"type"`
		Required   []string
		Properties map[string]struct {
			Type     string `json:"type"`
			MinItems int    `json:"minItems"`
			Items    *struct {
				Type string `json:"type"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(r.Body.Tools[0].Function.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	cmds := schema.Properties["commands"]
	if schema.Type != "object" || len(schema.Required) != 1 || schema.Required[0] != "commands" ||
		cmds.Type != "array" || cmds.MinItems != 1 || cmds.Items == nil || cmds.Items.Type != "string" ||
		schema.Properties["timeout_ms"].Type != "integer" {
		t.Fatalf("schema on the wire = %s", r.Body.Tools[0].Function.Parameters)
	}
}

func TestCompleteDisableToolsOmitsTools(t *testing.T) {
	a, f := newAgent(t, nil)
	// A server that calls a tool anyway: the activity drops the calls.
	f.Push(fakeopenai.Step{Content: "Summary so far.", ToolCalls: []fakeopenai.ToolCall{{ID: "x", Name: "shell", Arguments: `{}`}}})
	resp, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: []session.Message{userMsg("hi")}, DisableTools: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "Summary so far." || len(resp.ToolCalls) != 0 {
		t.Fatalf("resp = %+v", resp)
	}
	r, _ := f.LastRequest()
	if len(r.Body.Tools) != 0 || strings.Contains(string(r.RawBody), `"tools"`) {
		t.Fatalf("tools were sent: %s", r.RawBody)
	}
}

func TestCompleteStreamingReassemblesFragments(t *testing.T) {
	a, f := newAgent(t, func(c *agent.Config) { c.Stream = true })
	long := `{"commands":["grep -rn 'TODO' --include='*.go' .","echo ünïcödé ✓"],"timeout_ms":30000}`
	f.Push(fakeopenai.Step{
		Content: "Let me look. ",
		ToolCalls: []fakeopenai.ToolCall{
			{ID: "call_a", Name: "shell", Arguments: long},
			{ID: "call_b", Name: "shell", Arguments: `{"commands":["pwd"]}`},
		},
		Fragment: 2,
	})
	resp, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: []session.Message{userMsg("find TODOs")}})
	if err != nil {
		t.Fatal(err)
	}
	want := []session.ToolCall{{ID: "call_a", Name: "shell", Arguments: long}, {ID: "call_b", Name: "shell", Arguments: `{"commands":["pwd"]}`}}
	if len(resp.ToolCalls) != 2 || resp.ToolCalls[0] != want[0] || resp.ToolCalls[1] != want[1] {
		t.Fatalf("tool calls = %+v", resp.ToolCalls)
	}
	if resp.Content != "Let me look. " || resp.Usage.PromptTokens == 0 {
		t.Fatalf("content %q usage %+v", resp.Content, resp.Usage)
	}
	r, _ := f.LastRequest()
	if r.Body.StreamOptions == nil || !r.Body.StreamOptions.IncludeUsage {
		t.Fatalf("stream_options.include_usage not requested: %s", r.RawBody)
	}
}

func TestCompleteMissingToolCallIDGetsOne(t *testing.T) {
	a, f := newAgent(t, nil)
	f.Push(fakeopenai.ToolCallStep("", "shell", `{"commands":["ls"]}`))
	resp, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: []session.Message{userMsg("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || !strings.HasPrefix(resp.ToolCalls[0].ID, "call_") || len(resp.ToolCalls[0].ID) < 10 {
		t.Fatalf("tool calls = %+v", resp.ToolCalls)
	}
}

func TestCompleteSanitisesTranscript(t *testing.T) {
	a, f := newAgent(t, nil)
	f.Push(fakeopenai.FinalStep("ok"))
	msgs := []session.Message{
		{Role: session.RoleUser, Content: "bad bytes \xff\xfe here", Name: "alice smith", User: "U123"},
		{Role: session.RoleAssistant, Content: ""},
		{Role: session.RoleUser, Content: "again", Name: "bob_2"},
	}
	if _, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	r, _ := f.LastRequest()
	if !utf8.Valid(r.RawBody) {
		t.Fatal("request body is not valid UTF-8")
	}
	got := r.Body.Messages
	if got[1].Content != "bad bytes \uFFFD here" || got[1].Name != "" {
		t.Fatalf("user message = %+v (invalid name must be dropped, bytes replaced)", got[1])
	}
	if got[2].Content == "" || got[3].Name != "bob_2" {
		t.Fatalf("messages = %+v", got)
	}
	if strings.Contains(string(r.RawBody), "U123") {
		t.Fatal("display-only User field reached the model")
	}
}

func TestCompleteRejectsEmptyTranscript(t *testing.T) {
	a, f := newAgent(t, nil)
	_, err := a.Complete(testCtx(t), agent.ModelRequest{})
	assertAppErr(t, err, agent.ErrTypeModelBadRequest, false)
	if n := len(f.Requests()); n != 0 {
		t.Fatalf("%d requests sent for an empty transcript", n)
	}
}

// TestCompleteAsRegisteredActivity runs Complete through the SDK's activity
// test environment (a real activity context), streaming so that it
// heartbeats.
func TestCompleteAsRegisteredActivity(t *testing.T) {
	a, f := newAgent(t, func(c *agent.Config) { c.Stream = true })
	f.Push(fakeopenai.ToolCallStep("call_env", "shell", `{"commands":["go test ./..."]}`))

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	var mu sync.Mutex
	var beats []map[string]int
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var p map[string]int
		if d.HasValues() && d.Get(&p) == nil {
			mu.Lock()
			beats = append(beats, p)
			mu.Unlock()
		}
	})
	val, err := env.ExecuteActivity(a.Complete, agent.ModelRequest{Messages: []session.Message{userMsg("run the tests")}})
	if err != nil {
		t.Fatal(err)
	}
	var resp agent.ModelResponse
	if err := val.Get(&resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "call_env" || resp.ToolCalls[0].Arguments != `{"commands":["go test ./..."]}` {
		t.Fatalf("resp = %+v", resp)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(beats) == 0 || beats[0]["chunks"] < 1 {
		t.Fatalf("no streaming heartbeat with progress recorded: %v", beats)
	}
}

// TestCompleteHeartbeatsWhileWaiting runs Complete from a workflow with a
// heartbeat timeout. The fake holds its (non-streamed) answer until the
// first heartbeat arrives, so the call only succeeds if Complete heartbeats
// while it waits.
func TestCompleteHeartbeatsWhileWaiting(t *testing.T) {
	a, f := newAgent(t, func(c *agent.Config) { c.RequestTimeout = 20 * time.Second })
	hold := make(chan struct{})
	var once sync.Once
	f.Push(fakeopenai.Step{Content: "slow answer", Hold: hold})

	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(a)
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { once.Do(func() { close(hold) }) })
	wf := func(ctx workflow.Context) (agent.ModelResponse, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			HeartbeatTimeout:    200 * time.Millisecond,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		var resp agent.ModelResponse
		err := workflow.ExecuteActivity(ctx, a.Complete, agent.ModelRequest{Messages: []session.Message{userMsg("think hard")}}).Get(ctx, &resp)
		return resp, err
	}
	env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "complete-heartbeat"})
	env.ExecuteWorkflow("complete-heartbeat")
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var resp agent.ModelResponse
	if err := env.GetWorkflowResult(&resp); err != nil || resp.Content != "slow answer" {
		t.Fatalf("resp %+v, %v", resp, err)
	}
}

func TestCompleteActivityErrorIsNonRetryable(t *testing.T) {
	a, _ := newAgent(t, func(c *agent.Config) { c.APIKey = "sk-wrong-key-000" })
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a.Complete)
	_, err := env.ExecuteActivity(a.Complete, agent.ModelRequest{Messages: []session.Message{userMsg("hi")}})
	appErr := assertAppErr(t, err, agent.ErrTypeModelAuth, false)
	if strings.Contains(err.Error(), "sk-wrong-key-000") || strings.Contains(appErr.Message(), "sk-") {
		t.Fatalf("key leaked into the error: %v", err)
	}
}

func TestNewActivitiesValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  agent.Config
		want []string
	}{
		{"empty", agent.Config{}, []string{"Model is required", "BaseURL is required"}},
		{"no model", agent.Config{BaseURL: "https://api.fakeopenai.com/v1"}, []string{"Model is required"}},
		{"bad scheme", agent.Config{BaseURL: "ftp://x/v1", Model: "m"}, []string{"not an http(s) URL"}},
		{"no host", agent.Config{BaseURL: "localhost:11434", Model: "m"}, []string{"not an http(s) URL"}},
		{"negative timeout", agent.Config{BaseURL: "http://h/v1", Model: "m", RequestTimeout: -time.Second}, []string{"RequestTimeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agent.NewActivities(tc.cfg)
			if err == nil {
				t.Fatal("want error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
		})
	}
	_, err := agent.NewActivities(agent.Config{BaseURL: "https://user:pw@example.com:x/v1?api-key=zzz", Model: "m"})
	if err == nil || strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "zzz") {
		t.Fatalf("credentials in config error: %v", err)
	}
	if _, err := agent.NewActivities(agent.Config{BaseURL: "http://localhost:11434/v1", Model: "llama3.1"}); err != nil {
		t.Fatalf("ollama-style config without key: %v", err)
	}
}

// BenchmarkComplete measures one model call through the real client and the
// fake, with a responder that calls the tool until N calls, then answers.
func BenchmarkComplete(b *testing.B) {
	const n = 3
	for _, stream := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(b *testing.B) {
			a, f := newAgent(b, func(c *agent.Config) { c.Stream = stream })
			f.SetResponder(func(r fakeopenai.RecordedRequest) fakeopenai.Step {
				calls := 0
				for _, m := range r.Body.Messages {
					calls += len(m.ToolCalls)
				}
				if calls >= n {
					return fakeopenai.FinalStep("done")
				}
				return fakeopenai.ToolCallStep("call_x", "shell", `{"commands":["ls"]}`)
			})
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				msgs := []session.Message{userMsg("go")}
				for {
					resp, err := a.Complete(ctx, agent.ModelRequest{Messages: msgs})
					if err != nil {
						b.Fatal(err)
					}
					if len(resp.ToolCalls) == 0 {
						break
					}
					msgs = append(msgs, session.Message{Role: session.RoleAssistant, ToolCalls: resp.ToolCalls},
						session.Message{Role: session.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: "a\nb\n"})
				}
			}
		})
	}
}

// The worker enforces the models it offers: a request naming another one
// (a forged or old workflow) never reaches the endpoint.
func TestCompleteRefusesModelsNotOffered(t *testing.T) {
	a, f := newAgent(t, func(c *agent.Config) { c.Allowed = []string{"gpt-big"} })
	f.Push(fakeopenai.Step{Content: "big"})
	if _, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: []session.Message{userMsg("hi")}, Model: "gpt-big"}); err != nil {
		t.Fatal(err)
	}
	if r, _ := f.LastRequest(); r.Body.Model != "gpt-big" {
		t.Fatalf("sent model %q", r.Body.Model)
	}
	n := len(f.Requests())
	_, err := a.Complete(testCtx(t), agent.ModelRequest{Messages: []session.Message{userMsg("hi")}, Model: "gpt-expensive"})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != agent.ErrTypeModelBadRequest || !strings.Contains(ae.Message(), `model "gpt-expensive" is not one this deployment offers`) {
		t.Fatalf("a model not offered: %v", err)
	}
	if len(f.Requests()) != n {
		t.Fatal("a model not offered reached the endpoint")
	}
}
