package fakeopenai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Step is one scripted reply of the fake: an assistant message (Content and/or
// ToolCalls) or, when Status is set, an HTTP error. The same Step is rendered
// as a plain JSON completion or as an SSE stream depending on the request's
// "stream" flag, so one script serves both client modes.
type Step struct {
	// Content is the assistant text.
	Content string
	// ToolCalls are the function calls the assistant makes, in order.
	ToolCalls []ToolCall
	// FinishReason overrides the default ("tool_calls" when ToolCalls is
	// set, else "stop").
	FinishReason string
	// PromptTokens and CompletionTokens override the usage the fake
	// reports (by default a rough bytes/4 estimate).
	PromptTokens, CompletionTokens int
	// Fragment is how many bytes of content or arguments each streamed
	// chunk carries (default 8, split on rune boundaries), so clients must
	// reassemble fragments.
	Fragment int

	// Status, when non-zero, makes the step an error response with this
	// HTTP status and an OpenAI-style error body built from ErrorMessage,
	// ErrorType and ErrorCode.
	Status       int
	ErrorMessage string
	ErrorType    string
	ErrorCode    string
	// RawBody, when set, is sent verbatim instead of the generated body:
	// with Status, as an error page (text/html, e.g. a proxy's); without
	// Status, as a 200 application/json body (malformed or unusual
	// completions), also for streaming requests.
	RawBody string

	// Header is added to the response (errors and successes), for example
	// Retry-After, retry-after-ms or x-should-retry.
	Header http.Header

	// BreakAfter, when positive on a streamed reply, aborts the connection
	// after that many chunks, without finish_reason or [DONE]: a network
	// failure mid-stream.
	BreakAfter int
	// Hold, when non-nil, delays the reply until the channel is closed, the
	// client gives up (request context done) or the server closes. Tests use
	// it to exercise client timeouts and cancellation without sleeping.
	Hold <-chan struct{}
}

// ToolCall is one function call in a scripted reply.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Responder computes the reply to a request dynamically. It runs only when
// the scripted queue is empty. It may be called concurrently.
type Responder func(req RecordedRequest) Step

// FinalStep is a plain assistant answer.
func FinalStep(text string) Step { return Step{Content: text} }

// ToolCallStep is a reply with a single function call. args is sent verbatim,
// so tests can script invalid JSON.
func ToolCallStep(id, name, args string) Step {
	return Step{ToolCalls: []ToolCall{{ID: id, Name: name, Arguments: args}}}
}

// ToolCallsStep is a reply with several function calls in one message.
func ToolCallsStep(calls ...ToolCall) Step { return Step{ToolCalls: calls} }

// ErrorStep is an HTTP error reply with an OpenAI-style body. The error type
// and code default to what the real service sends for that status (401
// invalid_api_key, 404 model_not_found, 429 rate_limit_exceeded, 5xx
// server_error); change them with WithCode / WithType.
func ErrorStep(status int, message string) Step {
	s := Step{Status: status, ErrorMessage: message}
	switch {
	case status == http.StatusUnauthorized:
		s.ErrorType, s.ErrorCode = "invalid_request_error", "invalid_api_key"
	case status == http.StatusNotFound:
		s.ErrorType, s.ErrorCode = "invalid_request_error", "model_not_found"
	case status == http.StatusTooManyRequests:
		s.ErrorType, s.ErrorCode = "requests", "rate_limit_exceeded"
	case status >= 500:
		s.ErrorType = "server_error"
	default:
		s.ErrorType = "invalid_request_error"
	}
	if s.ErrorMessage == "" {
		s.ErrorMessage = http.StatusText(status)
	}
	return s
}

// WithRetryAfter sets the Retry-After header (seconds or an HTTP date,
// verbatim).
func (s Step) WithRetryAfter(value string) Step { return s.WithHeader("Retry-After", value) }

// WithHeader adds a response header.
func (s Step) WithHeader(key, value string) Step {
	h := s.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(key, value)
	s.Header = h
	return s
}

// WithCode sets the error body's code (empty means null).
func (s Step) WithCode(code string) Step { s.ErrorCode = code; return s }

// WithType sets the error body's type.
func (s Step) WithType(typ string) Step { s.ErrorType = typ; return s }

// WithFragment sets the streamed fragment size in bytes.
func (s Step) WithFragment(n int) Step { s.Fragment = n; return s }

// DefaultResponder is what the fake answers when nothing is scripted. It is
// made for demos of sandbot's shell tool and is deliberately simple:
//
//   - last message is a tool result: a final answer quoting that result;
//   - last user message has lines "run: <command>" and the request offers a
//     tool: one call of that tool (the one named "shell" if offered, else the
//     first) with {"commands":[<command>, ...]}, one entry per such line;
//   - anything else: a final answer echoing the user's text.
//
// Call IDs are "call_<request sequence number>".
func DefaultResponder(req RecordedRequest) Step {
	msgs := req.Body.Messages
	if len(msgs) == 0 {
		return FinalStep("Hello! Nothing was asked.")
	}
	last := msgs[len(msgs)-1]
	if last.Role == "tool" {
		out := last.Content
		if len(out) > 1500 {
			out = strings.ToValidUTF8(out[:1500], "") + "\n…"
		}
		return FinalStep("Done. The command returned:\n```\n" + out + "\n```")
	}
	text := ""
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			text = msgs[i].Content
			break
		}
	}
	if tool := pickTool(req.Body.Tools); tool != "" {
		var cmds []string
		for _, line := range strings.Split(text, "\n") {
			l := strings.TrimSpace(line)
			if len(l) > 4 && strings.EqualFold(l[:4], "run:") {
				if c := strings.TrimSpace(l[4:]); c != "" {
					cmds = append(cmds, c)
				}
			}
		}
		if len(cmds) > 0 {
			args, _ := json.Marshal(map[string][]string{"commands": cmds})
			return ToolCallStep(fmt.Sprintf("call_%d", req.Seq), tool, string(args))
		}
	}
	return FinalStep("You said: " + text)
}

func pickTool(tools []Tool) string {
	for _, t := range tools {
		if t.Function.Name == "shell" {
			return "shell"
		}
	}
	if len(tools) > 0 {
		return tools[0].Function.Name
	}
	return ""
}
