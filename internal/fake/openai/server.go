// Package openai is an in-process fake of an OpenAI-compatible
// chat-completions endpoint (POST /v1/chat/completions, plain and SSE
// streaming), speaking the wire format real clients expect. Tests,
// benchmarks and local demos point a real client (go-openai) at URL().
//
// Replies come from, in order: the scripted queue (Push), the pluggable
// Responder (SetResponder / WithResponder), and DefaultResponder. Every
// request is recorded (headers, raw and decoded body) so tests can assert on
// what the client sent. A Server is safe for concurrent use.
package fakeopenai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

const completionsPath = "/v1/chat/completions"

// RecordedRequest is one request as the fake received it.
type RecordedRequest struct {
	// Seq numbers requests from 1 in arrival order.
	Seq      int
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	RawBody  []byte
	// Body is the decoded chat request; DecodeError says why decoding
	// failed (the fake then answered 400).
	Body        ChatRequest
	DecodeError string
}

// BearerToken returns the token of an "Authorization: Bearer" header.
func (r RecordedRequest) BearerToken() (string, bool) {
	v := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(v, "Bearer ")
	return tok, ok
}

// Server is the fake endpoint. Create it with New and stop it with Close.
type Server struct {
	srv     *httptest.Server
	closing chan struct{}
	once    sync.Once

	mu        sync.Mutex
	queue     []Step
	responder Responder
	requests  []RecordedRequest
	seq       int
	keep      int
	apiKey    string
	models    map[string]bool
	fragment  int
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey makes the fake demand "Authorization: Bearer <key>" and answer
// anything else with the 401 the real service sends.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithModels makes the fake answer 404 model_not_found for other models.
func WithModels(names ...string) Option {
	return func(s *Server) {
		s.models = map[string]bool{}
		for _, n := range names {
			s.models[n] = true
		}
	}
}

// WithResponder sets the responder used when the queue is empty.
func WithResponder(r Responder) Option { return func(s *Server) { s.responder = r } }

// WithKeep makes the fake keep only the last n requests (0, the default:
// all of them). A run of thousands of model calls (the chaos suite's soak)
// would otherwise hold every conversation it was sent, each up to the
// session's context budget. Seq still counts every request.
func WithKeep(n int) Option { return func(s *Server) { s.keep = n } }

// WithFragment sets the default streamed fragment size in bytes.
func WithFragment(n int) Option { return func(s *Server) { s.fragment = n } }

// New starts a fake on a random loopback port.
func New(opts ...Option) *Server {
	s := &Server{closing: make(chan struct{}), fragment: 8}
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewServer(s)
	return s
}

// URL is the API base URL, ending in /v1 (what clients call BaseURL).
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Close releases held replies and stops the server.
func (s *Server) Close() {
	s.once.Do(func() { close(s.closing) })
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Push appends scripted steps; each request consumes one.
func (s *Server) Push(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, steps...)
}

// Pending is the number of scripted steps not consumed yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// SetResponder replaces the responder used when the queue is empty (nil
// restores DefaultResponder).
func (s *Server) SetResponder(r Responder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = r
}

// Requests returns copies of all recorded requests (the last ones kept,
// with WithKeep), oldest first.
func (s *Server) Requests() []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.requests
	if s.keep > 0 && len(kept) > s.keep {
		kept = kept[len(kept)-s.keep:]
	}
	out := make([]RecordedRequest, len(kept))
	for i, r := range kept {
		out[i] = r
		out[i].Header = r.Header.Clone()
	}
	return out
}

// LastRequest returns the most recent request, if any.
func (s *Server) LastRequest() (RecordedRequest, bool) {
	reqs := s.Requests()
	if len(reqs) == 0 {
		return RecordedRequest{}, false
	}
	return reqs[len(reqs)-1], true
}

// ServeHTTP implements the endpoint; New serves it, and it can also be
// mounted in another server.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec := RecordedRequest{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), RawBody: body}
	if r.URL.Path == completionsPath && r.Method == http.MethodPost {
		if err := json.Unmarshal(body, &rec.Body); err != nil {
			rec.DecodeError = err.Error()
		}
	}

	s.mu.Lock()
	s.seq++
	rec.Seq = s.seq
	s.requests = append(s.requests, rec)
	if s.keep > 0 && len(s.requests) > 2*s.keep {
		// Trimmed in batches, so keeping costs no copy per request.
		s.requests = append([]RecordedRequest(nil), s.requests[len(s.requests)-s.keep:]...)
	}
	apiKey, models, fragment := s.apiKey, s.models, s.fragment
	s.mu.Unlock()

	switch {
	case r.URL.Path != completionsPath:
		writeError(w, ErrorStep(http.StatusNotFound, fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)).WithCode(""))
		return
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, ErrorStep(http.StatusMethodNotAllowed, fmt.Sprintf("Method %s not allowed; use POST", r.Method)))
		return
	case rec.DecodeError != "":
		writeError(w, ErrorStep(http.StatusBadRequest, "We could not parse the JSON body of your request: "+rec.DecodeError).WithCode(""))
		return
	}
	if apiKey != "" {
		if tok, _ := rec.BearerToken(); tok != apiKey {
			writeError(w, ErrorStep(http.StatusUnauthorized, unauthorizedMessage(tok)))
			return
		}
	}
	if models != nil && !models[rec.Body.Model] {
		writeError(w, ErrorStep(http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", rec.Body.Model)))
		return
	}

	step := s.next(rec)
	if step.Hold != nil {
		select {
		case <-step.Hold:
		case <-r.Context().Done():
			return
		case <-s.closing:
			return
		}
	}
	for k, vs := range step.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if step.Status != 0 {
		writeError(w, step)
		return
	}
	if step.RawBody != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, step.RawBody)
		return
	}
	if step.Fragment <= 0 {
		step.Fragment = fragment
	}
	if rec.Body.Stream {
		s.stream(w, rec, step)
		return
	}
	writeJSON(w, http.StatusOK, completionFor(rec, step))
}

func (s *Server) next(rec RecordedRequest) Step {
	s.mu.Lock()
	if len(s.queue) > 0 {
		st := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return st
	}
	r := s.responder
	s.mu.Unlock()
	if r == nil {
		r = DefaultResponder
	}
	return r(rec)
}

// unauthorizedMessage mimics the real service, which echoes a masked key.
func unauthorizedMessage(tok string) string {
	if tok == "" {
		return "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
	}
	masked := tok
	if len(tok) > 6 {
		masked = tok[:3] + strings.Repeat("*", 3) + tok[len(tok)-2:]
	}
	return "Incorrect API key provided: " + masked + ". You can find your API key at https://platform.openai.com/account/api-keys."
}

func writeError(w http.ResponseWriter, st Step) {
	if st.RawBody != "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(st.Status)
		_, _ = io.WriteString(w, st.RawBody)
		return
	}
	d := errorDetail{Message: st.ErrorMessage, Type: st.ErrorType}
	if st.ErrorCode != "" {
		c := st.ErrorCode
		d.Code = &c
	}
	writeJSON(w, st.Status, errorBody{Error: d})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func finishReason(st Step) string {
	switch {
	case st.FinishReason != "":
		return st.FinishReason
	case len(st.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

func usageFor(rec RecordedRequest, st Step) *usage {
	p, c := st.PromptTokens, st.CompletionTokens
	if p == 0 {
		n := 0
		for _, m := range rec.Body.Messages {
			n += len(m.Content)
			for _, tc := range m.ToolCalls {
				n += len(tc.Function.Arguments)
			}
		}
		p = n/4 + 1
	}
	if c == 0 {
		n := len(st.Content)
		for _, tc := range st.ToolCalls {
			n += len(tc.Arguments) + len(tc.Name)
		}
		c = n/4 + 1
	}
	return &usage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}

func completionFor(rec RecordedRequest, st Step) completion {
	msg := responseMessage{Role: "assistant"}
	if st.Content != "" || len(st.ToolCalls) == 0 {
		c := st.Content
		msg.Content = &c
	}
	for _, tc := range st.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, WireToolCall{ID: tc.ID, Type: "function", Function: WireFunction{Name: tc.Name, Arguments: tc.Arguments}})
	}
	return completion{
		ID:                fmt.Sprintf("chatcmpl-%d", rec.Seq),
		Object:            "chat.completion",
		Created:           1700000000 + int64(rec.Seq),
		Model:             rec.Body.Model,
		Choices:           []choice{{Index: 0, Message: msg, FinishReason: finishReason(st)}},
		Usage:             usageFor(rec, st),
		SystemFingerprint: "fp_fake",
	}
}

// stream writes the step as SSE chunks: a role chunk, content fragments,
// for each tool call an opening chunk (id, name, empty arguments) and
// argument fragments, a finish chunk, an optional usage chunk, then [DONE].
func (s *Server) stream(w http.ResponseWriter, rec RecordedRequest, st Step) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)

	base := chunk{ID: fmt.Sprintf("chatcmpl-%d", rec.Seq), Object: "chat.completion.chunk", Created: 1700000000 + int64(rec.Seq), Model: rec.Body.Model, SystemFingerprint: "fp_fake"}
	sent := 0
	emit := func(c chunk) {
		if st.BreakAfter > 0 && sent >= st.BreakAfter {
			// Abort mid-stream: the client sees the connection drop.
			panic(http.ErrAbortHandler)
		}
		b, _ := json.Marshal(c)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
		sent++
	}
	withDelta := func(d delta, finish *string) chunk {
		c := base
		c.Choices = []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}}
		return c
	}
	empty := ""
	if len(st.ToolCalls) > 0 && st.Content == "" {
		emit(withDelta(delta{Role: "assistant"}, nil))
	} else {
		emit(withDelta(delta{Role: "assistant", Content: &empty}, nil))
	}
	for _, frag := range fragments(st.Content, st.Fragment) {
		emit(withDelta(delta{Content: &frag}, nil))
	}
	for i, tc := range st.ToolCalls {
		idx := i
		emit(withDelta(delta{ToolCalls: []WireToolCall{{Index: &idx, ID: tc.ID, Type: "function", Function: WireFunction{Name: tc.Name, Arguments: ""}}}}, nil))
		for _, frag := range fragments(tc.Arguments, st.Fragment) {
			emit(withDelta(delta{ToolCalls: []WireToolCall{{Index: &idx, Function: WireFunction{Arguments: frag}}}}, nil))
		}
	}
	fr := finishReason(st)
	emit(withDelta(delta{}, &fr))
	if rec.Body.StreamOptions != nil && rec.Body.StreamOptions.IncludeUsage {
		c := base
		c.Choices = []chunkChoice{}
		c.Usage = usageFor(rec, st)
		emit(c)
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// fragments splits s into pieces of about n bytes without splitting runes.
func fragments(s string, n int) []string {
	if n <= 0 {
		n = 8
	}
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}
