package fakeopenai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
)

func newClient(t testing.TB, f *fakeopenai.Server, key string) *goopenai.Client {
	t.Helper()
	cfg := goopenai.DefaultConfig(key)
	cfg.BaseURL = f.URL()
	return goopenai.NewClientWithConfig(cfg)
}

func ctx(t testing.TB) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

var shellTool = goopenai.Tool{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{
	Name:        "shell",
	Description: "run commands",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"commands":{"type":"array","items":{"type":"string"}}},"required":["commands"]}`),
}}

func TestToolCallAndFinalRoundTrip(t *testing.T) {
	f := fakeopenai.New(fakeopenai.WithAPIKey("sk-test-123"))
	defer f.Close()
	f.Push(fakeopenai.ToolCallStep("call_1", "shell", `{"commands":["ls"]}`), fakeopenai.FinalStep("All done"))
	c := newClient(t, f, "sk-test-123")

	req := goopenai.ChatCompletionRequest{
		Model:    "gpt-test",
		Messages: []goopenai.ChatCompletionMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "list files"}},
		Tools:    []goopenai.Tool{shellTool},
	}
	resp, err := c.CreateChatCompletion(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if ch.FinishReason != goopenai.FinishReasonToolCalls || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("want one tool call, got %+v", ch)
	}
	tc := ch.Message.ToolCalls[0]
	if tc.ID != "call_1" || tc.Function.Name != "shell" || tc.Function.Arguments != `{"commands":["ls"]}` || tc.Type != "function" {
		t.Fatalf("tool call = %+v", tc)
	}
	if resp.Usage.TotalTokens == 0 || resp.Model != "gpt-test" {
		t.Fatalf("usage/model not set: %+v", resp)
	}

	req.Messages = append(req.Messages, ch.Message, goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_1", Content: "a.txt\n"})
	resp, err = c.CreateChatCompletion(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "All done" || resp.Choices[0].FinishReason != goopenai.FinishReasonStop {
		t.Fatalf("final = %q (%s)", got, resp.Choices[0].FinishReason)
	}

	reqs := f.Requests()
	if len(reqs) != 2 {
		t.Fatalf("recorded %d requests", len(reqs))
	}
	r := reqs[1]
	if tok, ok := r.BearerToken(); !ok || tok != "sk-test-123" {
		t.Fatalf("authorization = %q", r.Header.Get("Authorization"))
	}
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" || r.Body.Model != "gpt-test" {
		t.Fatalf("request = %s %s model %q", r.Method, r.Path, r.Body.Model)
	}
	if len(r.Body.Tools) != 1 || r.Body.Tools[0].Type != "function" || r.Body.Tools[0].Function.Name != "shell" {
		t.Fatalf("tools = %+v", r.Body.Tools)
	}
	msgs := r.Body.Messages
	if len(msgs) != 4 || msgs[2].Role != "assistant" || len(msgs[2].ToolCalls) != 1 || msgs[2].ToolCalls[0].ID != "call_1" ||
		msgs[3].Role != "tool" || msgs[3].ToolCallID != "call_1" || msgs[3].Content != "a.txt\n" {
		t.Fatalf("transcript = %+v", msgs)
	}
	if f.Pending() != 0 {
		t.Fatalf("pending = %d", f.Pending())
	}
}

func TestMultipleToolCallsInOneResponse(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	f.Push(fakeopenai.ToolCallsStep(
		fakeopenai.ToolCall{ID: "a", Name: "shell", Arguments: `{"commands":["pwd"]}`},
		fakeopenai.ToolCall{ID: "b", Name: "nosuchtool", Arguments: `{not json`},
	))
	resp, err := newClient(t, f, "k").CreateChatCompletion(ctx(t), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	tcs := resp.Choices[0].Message.ToolCalls
	if len(tcs) != 2 || tcs[1].Function.Name != "nosuchtool" || tcs[1].Function.Arguments != `{not json` {
		t.Fatalf("tool calls = %+v", tcs)
	}
}

func recvAll(t *testing.T, s *goopenai.ChatCompletionStream) []goopenai.ChatCompletionStreamResponse {
	t.Helper()
	defer s.Close()
	var out []goopenai.ChatCompletionStreamResponse
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("recv: %v", err)
		}
		out = append(out, r)
	}
}

func TestStreamingToolCallArgumentFragments(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	args := `{"commands":["echo héllo wörld","ls -la"]}`
	f.Push(fakeopenai.ToolCallsStep(
		fakeopenai.ToolCall{ID: "call_s1", Name: "shell", Arguments: args},
		fakeopenai.ToolCall{ID: "call_s2", Name: "shell", Arguments: `{"commands":["pwd"]}`},
	).WithFragment(5))
	s, err := newClient(t, f, "k").CreateChatCompletionStream(ctx(t), goopenai.ChatCompletionRequest{
		Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}},
		StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	chunks := recvAll(t, s)
	type acc struct{ id, name, args string }
	calls := map[int]*acc{}
	fragmentsSeen, finish, usage := 0, "", 0
	for _, c := range chunks {
		if c.Usage != nil {
			usage = c.Usage.TotalTokens
		}
		for _, ch := range c.Choices {
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index == nil {
					t.Fatalf("tool call chunk without index: %+v", tc)
				}
				a := calls[*tc.Index]
				if a == nil {
					a = &acc{}
					calls[*tc.Index] = a
				}
				if tc.ID != "" {
					a.id = tc.ID
				}
				a.name += tc.Function.Name
				a.args += tc.Function.Arguments
				if tc.Function.Arguments != "" {
					fragmentsSeen++
				}
			}
		}
	}
	if len(calls) != 2 || calls[0].id != "call_s1" || calls[0].name != "shell" || calls[0].args != args || calls[1].args != `{"commands":["pwd"]}` {
		t.Fatalf("reassembled = %+v %+v", calls[0], calls[1])
	}
	if fragmentsSeen < 5 {
		t.Fatalf("arguments came in %d fragments; want several", fragmentsSeen)
	}
	if finish != "tool_calls" || usage == 0 {
		t.Fatalf("finish=%q usage=%d", finish, usage)
	}
	if r, _ := f.LastRequest(); !r.Body.Stream || r.Body.StreamOptions == nil || !r.Body.StreamOptions.IncludeUsage {
		t.Fatalf("stream flags not recorded: %+v", r.Body)
	}
}

func TestStreamingFinalText(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	f.Push(fakeopenai.FinalStep("Listing done. ✓").WithFragment(3))
	s, err := newClient(t, f, "k").CreateChatCompletionStream(ctx(t), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	chunks := recvAll(t, s)
	for _, c := range chunks {
		for _, ch := range c.Choices {
			sb.WriteString(ch.Delta.Content)
		}
	}
	if sb.String() != "Listing done. ✓" || len(chunks) < 5 {
		t.Fatalf("got %q in %d chunks", sb.String(), len(chunks))
	}
}

func TestErrorStatusesReachClient(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	f.Push(fakeopenai.ErrorStep(429, "Rate limit reached").WithRetryAfter("7"))
	_, err := newClient(t, f, "k").CreateChatCompletion(ctx(t), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("want *APIError, got %T %v", err, err)
	}
	if apiErr.HTTPStatusCode != 429 || apiErr.Code != "rate_limit_exceeded" || apiErr.Message != "Rate limit reached" || apiErr.Type != "requests" {
		t.Fatalf("api error = %+v", apiErr)
	}

	// The Retry-After header is on the wire (go-openai does not surface it
	// on errors, so check with a raw request).
	f.Push(fakeopenai.ErrorStep(503, "overloaded").WithRetryAfter("3"))
	resp, err := http.Post(f.URL()+"/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("status %d retry-after %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var eb struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Message != "overloaded" || eb.Error.Type != "server_error" || eb.Error.Code != nil {
		t.Fatalf("body %s (%v)", body, err)
	}
}

func TestAuthAndModelChecks(t *testing.T) {
	f := fakeopenai.New(fakeopenai.WithAPIKey("sk-right-key"), fakeopenai.WithModels("known"))
	defer f.Close()
	req := goopenai.ChatCompletionRequest{Model: "known", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}}
	_, err := newClient(t, f, "sk-wrong-key").CreateChatCompletion(ctx(t), req)
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 || apiErr.Code != "invalid_api_key" {
		t.Fatalf("want 401 invalid_api_key, got %v", err)
	}
	if strings.Contains(apiErr.Message, "sk-wrong-key") || !strings.Contains(apiErr.Message, "sk-***ey") {
		t.Fatalf("401 message should carry a masked key like the real service: %q", apiErr.Message)
	}
	req.Model = "unknown"
	_, err = newClient(t, f, "sk-right-key").CreateChatCompletion(ctx(t), req)
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Fatalf("want 404 model_not_found, got %v", err)
	}
}

func TestNonJSONErrorBody(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	f.Push(fakeopenai.Step{Status: 502, RawBody: "<html>Bad Gateway</html>"})
	_, err := newClient(t, f, "k").CreateChatCompletion(ctx(t), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	var reqErr *goopenai.RequestError
	if !errors.As(err, &reqErr) || reqErr.HTTPStatusCode != 502 {
		t.Fatalf("want *RequestError 502, got %T %v", err, err)
	}
}

func TestStreamBreakAfter(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	st := fakeopenai.FinalStep(strings.Repeat("x", 100)).WithFragment(10)
	st.BreakAfter = 3
	f.Push(st)
	s, err := newClient(t, f, "k").CreateChatCompletionStream(ctx(t), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n := 0
	for {
		_, err := s.Recv()
		if err == nil {
			n++
			continue
		}
		if errors.Is(err, io.EOF) {
			t.Fatalf("stream ended cleanly after %d chunks; want a broken connection", n)
		}
		break
	}
	if n != 3 {
		t.Fatalf("received %d chunks before the break, want 3", n)
	}
}

func TestHoldReleasedByClientCancel(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	hold := make(chan struct{}) // never closed: only the client's cancel ends it
	f.Push(fakeopenai.Step{Content: "late", Hold: hold})
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := newClient(t, f, "k").CreateChatCompletion(c, goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
		done <- err
	}()
	waitFor(t, func() bool { return len(f.Requests()) == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("request did not end after cancel")
	}
}

func TestDefaultResponder(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	c := newClient(t, f, "k")
	req := goopenai.ChatCompletionRequest{Model: "m", Tools: []goopenai.Tool{shellTool},
		Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "please\nrun: ls -la\nRUN: pwd"}}}
	resp, err := c.CreateChatCompletion(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	tcs := resp.Choices[0].Message.ToolCalls
	if len(tcs) != 1 || tcs[0].Function.Name != "shell" || tcs[0].Function.Arguments != `{"commands":["ls -la","pwd"]}` || tcs[0].ID != "call_1" {
		t.Fatalf("default tool call = %+v", tcs)
	}
	req.Messages = append(req.Messages, resp.Choices[0].Message, goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: tcs[0].ID, Content: "file.txt"})
	resp, err = c.CreateChatCompletion(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; !strings.Contains(got, "file.txt") {
		t.Fatalf("final = %q", got)
	}
	resp, err = c.CreateChatCompletion(ctx(t), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "hi there"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "You said: hi there" {
		t.Fatalf("echo = %q", got)
	}
}

func TestResponderAndConcurrency(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	f := fakeopenai.New(fakeopenai.WithResponder(func(r fakeopenai.RecordedRequest) fakeopenai.Step {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return fakeopenai.FinalStep(r.Body.Messages[0].Content)
	}))
	defer f.Close()
	c := newClient(t, f, "k")
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := strings.Repeat("q", i+1)
			resp, err := c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: want}}})
			if err == nil && resp.Choices[0].Message.Content != want {
				err = errors.New("wrong answer " + resp.Choices[0].Message.Content)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seqs := map[int]bool{}
	for _, r := range f.Requests() {
		seqs[r.Seq] = true
	}
	if calls != n || len(seqs) != n {
		t.Fatalf("responder calls %d, distinct seqs %d, want %d", calls, len(seqs), n)
	}
}

func TestBadRequestsGetOpenAIErrors(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/chat/completions", `{not json`, 400},
		{"GET", "/v1/chat/completions", ``, 405},
		{"POST", "/v1/embeddings", `{}`, 404},
	} {
		req, _ := http.NewRequest(tc.method, strings.TrimSuffix(f.URL(), "/v1")+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var eb struct {
			Error struct{ Message string } `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&eb)
		resp.Body.Close()
		if resp.StatusCode != tc.status || err != nil || eb.Error.Message == "" {
			t.Fatalf("%s %s: status %d, decode %v, message %q", tc.method, tc.path, resp.StatusCode, err, eb.Error.Message)
		}
	}
}

func TestContentPartsDecoded(t *testing.T) {
	f := fakeopenai.New()
	defer f.Close()
	_, err := newClient(t, f, "k").CreateChatCompletion(ctx(t), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{
		{Role: "user", MultiContent: []goopenai.ChatMessagePart{{Type: goopenai.ChatMessagePartTypeText, Text: "part one, "}, {Type: goopenai.ChatMessagePartTypeText, Text: "part two"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := f.LastRequest()
	if r.Body.Messages[0].Content != "part one, part two" {
		t.Fatalf("content = %q", r.Body.Messages[0].Content)
	}
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met before deadline")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestKeepLastRequests: WithKeep(n) keeps the last n requests, numbered
// among all of them, so a long run does not hold every conversation.
func TestKeepLastRequests(t *testing.T) {
	f := fakeopenai.New(fakeopenai.WithKeep(3))
	defer f.Close()
	c := newClient(t, f, "sk-test-123")
	for i := range 10 {
		f.Push(fakeopenai.FinalStep("ok"))
		req := goopenai.ChatCompletionRequest{Model: "gpt-test", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: strings.Repeat("x", i+1)}}}
		if _, err := c.CreateChatCompletion(ctx(t), req); err != nil {
			t.Fatal(err)
		}
	}
	reqs := f.Requests()
	if len(reqs) != 3 {
		t.Fatalf("kept %d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if want := 8 + i; r.Seq != want || len(r.Body.Messages[0].Content) != want {
			t.Fatalf("request %d: seq %d, content %q; want the %dth", i, r.Seq, r.Body.Messages[0].Content, want)
		}
	}
}
