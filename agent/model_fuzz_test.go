package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"

	"github.com/sandbot/sandbot/agent"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// maxResultBytes is Temporal's default limit on one payload (2 MB): a
// model answer larger than that could never be recorded as the activity's
// result, and the activity would be retried forever.
const maxResultBytes = 2 << 20

// growMarker in a fuzzed body is replaced by grow×16 KiB of text, so a small
// corpus entry can stand for a huge answer (huge arguments, huge content).
const growMarker = "@@GROW@@"

// FuzzModelResponse sends whatever a model endpoint could answer with a
// 200 — malformed tool calls, invalid JSON, unknown tools, huge arguments,
// broken streams — through the real go-openai client (against the fake
// model server, which sends the fuzzed body verbatim) and the model
// activity's parsing, then through the workflow's parsing of each tool
// call. Whatever the body, the activity must not panic or leak goroutines,
// must fail with a classified error (a temporal.ApplicationError of a
// known type, with a message) or answer with something the workflow can
// record: valid UTF-8, every call with an ID, within Temporal's payload
// limit, and each call's arguments either valid or refused with an error
// written for the model.
func FuzzModelResponse(f *testing.F) {
	var body atomic.Pointer[string]
	fake := fakeopenai.New(fakeopenai.WithAPIKey(testKey), fakeopenai.WithResponder(func(fakeopenai.RecordedRequest) fakeopenai.Step {
		return fakeopenai.Step{RawBody: *body.Load()}
	}))
	f.Cleanup(fake.Close)
	acts := map[bool]*agent.Activities{}
	for _, stream := range []bool{false, true} {
		a, err := agent.NewActivities(agent.Config{BaseURL: fake.URL(), APIKey: testKey, Model: "gpt-test", Stream: stream, RequestTimeout: 20 * time.Second})
		if err != nil {
			f.Fatal(err)
		}
		acts[stream] = a
	}
	for _, s := range modelSeeds(f) {
		f.Add([]byte(s.body), s.stream, uint8(0))
	}
	// Huge arguments and content: 16 KiB × 200 = 3.2 MB.
	f.Add([]byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"shell","arguments":"{\"commands\":[\"echo @@GROW@@\"]}"}}]},"finish_reason":"tool_calls"}]}`), false, uint8(200))
	f.Add([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"@@GROW@@"},"finish_reason":"stop"}]}`), false, uint8(200))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"shell\",\"arguments\":\"@@GROW@@\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"), true, uint8(200))

	f.Fuzz(func(t *testing.T, raw []byte, stream bool, grow uint8) {
		b := string(raw)
		if grow > 0 {
			b = strings.ReplaceAll(b, growMarker, strings.Repeat("x", int(grow)*16<<10))
		}
		body.Store(&b)
		before := runtime.NumGoroutine()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := acts[stream].Complete(ctx, agent.ModelRequest{Messages: []session.Message{userMsg("run the tests")}})
		cancel()
		noGoroutineLeak(t, before)
		if err != nil {
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) {
				t.Fatalf("unclassified error %T: %v", err, err)
			}
			if !knownModelError[appErr.Type()] || strings.TrimSpace(appErr.Message()) == "" {
				t.Fatalf("error of type %q with message %q", appErr.Type(), appErr.Message())
			}
			if appErr.Type() == agent.ErrTypeModelTimeout {
				t.Fatalf("the client hung on a body it had in full: %v", err)
			}
			return
		}
		checkRecordable(t, resp)
	})
}

var knownModelError = map[string]bool{
	agent.ErrTypeModelAuth: true, agent.ErrTypeModelNotFound: true, agent.ErrTypeModelBadRequest: true,
	agent.ErrTypeModelContextTooLong: true, agent.ErrTypeModelQuota: true, agent.ErrTypeModelRateLimited: true,
	agent.ErrTypeModelUnavailable: true, agent.ErrTypeModelBadResponse: true,
}

// checkRecordable asserts what the workflow needs of a model answer.
func checkRecordable(t *testing.T, resp agent.ModelResponse) {
	t.Helper()
	if !utf8.ValidString(resp.Content) || !utf8.ValidString(resp.FinishReason) {
		t.Fatal("answer text is not valid UTF-8")
	}
	enc, err := json.Marshal(resp)
	if err != nil {
		t.Fatalf("answer does not encode: %v", err)
	}
	if len(enc) > maxResultBytes {
		t.Fatalf("answer is %d bytes encoded; Temporal refuses payloads over %d", len(enc), maxResultBytes)
	}
	for _, tc := range resp.ToolCalls {
		if tc.ID == "" || !utf8.ValidString(tc.ID) || !utf8.ValidString(tc.Name) || !utf8.ValidString(tc.Arguments) {
			t.Fatalf("tool call %+v lacks an ID or is not valid UTF-8", tc)
		}
		// The workflow's side: arguments are valid, or the error is
		// written for the model (which gets it as the tool result).
		switch tc.Name {
		case session.ShellToolName:
			if _, err := agent.ParseShellArgs(tc.Arguments); err != nil && !strings.HasPrefix(err.Error(), "invalid arguments for shell: ") {
				t.Fatalf("shell arguments refused without a model-facing message: %v", err)
			}
		case session.ShareFileToolName:
			if _, err := agent.ParseShareFileArgs(tc.Arguments); err != nil && !strings.HasPrefix(err.Error(), "invalid arguments for share_file: ") {
				t.Fatalf("share_file arguments refused without a model-facing message: %v", err)
			}
		}
	}
}

type modelSeed struct {
	body   string
	stream bool
}

// modelSeeds are real answers of the fake model server (plain and
// streamed), captured off the wire, plus hand-made malformed ones.
func modelSeeds(f *testing.F) []modelSeed {
	f.Helper()
	steps := []fakeopenai.Step{
		fakeopenai.FinalStep("All tests pass."),
		fakeopenai.ToolCallStep("call_1", session.ShellToolName, `{"commands":["go test ./..."],"timeout_ms":60000}`),
		fakeopenai.ToolCallsStep(
			fakeopenai.ToolCall{ID: "call_2", Name: session.ShellToolName, Arguments: `{not json`},
			fakeopenai.ToolCall{ID: "call_3", Name: "browser", Arguments: `{"url":"http://x"}`},
			fakeopenai.ToolCall{ID: "", Name: session.ShareFileToolName, Arguments: `{"path":"report.md"}`}),
		fakeopenai.ToolCallStep("call_4", session.ShellToolName, `{"commands":[]}`),
	}
	src := fakeopenai.New(fakeopenai.WithAPIKey(testKey))
	defer src.Close()
	var out []modelSeed
	for _, stream := range []bool{false, true} {
		for _, st := range steps {
			src.Push(st)
			req := fmt.Sprintf(`{"model":"gpt-test","messages":[{"role":"user","content":"hi"}],"stream":%t}`, stream)
			hr, err := http.NewRequest(http.MethodPost, src.URL()+"/chat/completions", strings.NewReader(req))
			if err != nil {
				f.Fatal(err)
			}
			hr.Header.Set("Authorization", "Bearer "+testKey)
			hr.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(hr)
			if err != nil {
				f.Fatal(err)
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK {
				f.Fatalf("capturing a seed: %d %v", res.StatusCode, err)
			}
			out = append(out, modelSeed{string(b), stream})
		}
	}
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `{"choices":[]}`, `{"choices":null}`, `{"choices":[{}]}`,
		`{"choices":[{"message":{"tool_calls":[{}]}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"shell","arguments":"\"\\u0000\""}}]}}]}`,
		`{"choices":[{"message":{"content":"\xff\xfe"}}]}`, `{"choices":[{"message":{"content":5}}]}`,
		`{"error":{"message":"overloaded","type":"server_error"}}`, `<html>502 Bad Gateway</html>`,
	} {
		out = append(out, modelSeed{s, false})
	}
	for _, s := range []string{
		"data: [DONE]\n\n", "data: {}\n\n", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
		"data: {\"error\":{\"message\":\"boom\"}}\n\n", "event: x\n\n", "data: {not json\n\n",
	} {
		out = append(out, modelSeed{s, true})
	}
	return out
}

// noGoroutineLeak fails t if, within a bounded wait, the process does not
// get back to at most before goroutines (idle keep-alive connections are
// closed first: they are a pool, not a leak).
func noGoroutineLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, %d before:\n%s", n, before, bytes.TrimSpace(buf))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
