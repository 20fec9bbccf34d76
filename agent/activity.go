package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/activity"
)

// Activities holds the model activity. Register one instance on the worker
// (worker.RegisterActivity(acts) registers every exported method, so every
// exported method must be an activity) and reference its methods by value
// from the workflow:
//
//	var a *agent.Activities
//	workflow.ExecuteActivity(ctx, a.Complete, req)
//
// It is safe for concurrent use.
type Activities struct {
	// Redactor, when set, scrubs the worker's secrets (set it before the
	// activities are registered): from the answer, the tool calls and the
	// error texts the activity returns, which enter workflow history, chat
	// cards and the sandbox (a tool call's arguments are the commands it
	// runs); and from the transcript it sends, so that a secret that got
	// into a session some other way (pasted by a person, recorded before
	// scrubbing existed) does not reach the model either.
	Redactor Redactor
	// Transcripts holds the transcripts of Stored requests (the snapshot
	// store). Without it they live only in this worker's memory, which
	// serves tests and a single worker until it restarts.
	Transcripts TranscriptStore
	// Images holds the images attached to user messages (the snapshot
	// store), sent to the model when Config.Vision is set.
	Images ImageStore

	cache  transcripts
	cfg    Config
	client *openai.Client
}

// Redactor replaces known secrets in a text (redact.Redactor implements
// it).
type Redactor interface {
	Redact(s string) string
}

// scrub is a.Redactor.Redact, or s unchanged without a redactor.
func (a *Activities) scrub(s string) string {
	if a.Redactor == nil {
		return s
	}
	return a.Redactor.Redact(s)
}

// NewActivities validates cfg and builds the client. It fails with a message
// naming every missing or malformed setting.
func NewActivities(cfg Config) (*Activities, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	oc.HTTPClient = retryCapture{next: cfg.HTTPClient, now: time.Now}
	return &Activities{cfg: cfg, client: openai.NewClientWithConfig(oc)}, nil
}

// Complete is the model activity: one chat-completions call with the system
// prompt prepended and the shell tool offered (unless req.DisableTools). It
// works inside a Temporal activity (heartbeating while it waits and while
// chunks stream in) and outside one (plain context). Errors are classified
// by Classify: non-retryable ApplicationErrors for auth, missing model and
// bad requests; retryable ones, honouring Retry-After, for rate limits,
// server and network failures.
func (a *Activities) Complete(ctx context.Context, req ModelRequest) (_ ModelResponse, err error) {
	defer func() { err = sandbox.RedactError(a.Redactor, err) }()
	var stored *TranscriptRef
	skipped, dropped := 0, 0
	rebased := false
	var written chan error
	if req.Stored {
		var write func(context.Context) error
		if req.Messages, stored, skipped, dropped, write, err = a.assemble(ctx, req); err != nil {
			return ModelResponse{}, err
		}
		rebased = req.Base != nil && a.cache.whole(stored.Digest)
		// The chunk is written while the model thinks; the answer waits
		// for it, so the ref it carries can be read by any worker.
		written = make(chan error, 1)
		go func() { written <- write(ctx) }()
	}
	if len(req.Messages) == 0 {
		return ModelResponse{}, nonRetryable("model request has no messages", ErrTypeModelBadRequest, "agent: complete: empty transcript")
	}
	hint := &retryHint{}
	callCtx, cancel := context.WithTimeout(context.WithValue(ctx, retryHintKey{}, hint), a.cfg.RequestTimeout)
	defer cancel()
	stop := heartbeatWhileWaiting(callCtx)
	defer stop()

	model := a.cfg.Model
	if req.Model != "" && req.Model != model {
		if !slices.Contains(a.cfg.Allowed, req.Model) {
			return ModelResponse{}, nonRetryable(fmt.Sprintf("model %q is not one this deployment offers (SANDBOT_MODEL_ALLOWED); /model lists them", req.Model),
				ErrTypeModelBadRequest, "agent: complete: model not allowed")
		}
		model = req.Model
	}
	chatReq := openai.ChatCompletionRequest{
		Model:    model,
		Messages: toWire(a.cfg.SystemPrompt, req.Messages),
	}
	a.addImages(ctx, chatReq.Messages, req.Messages, len(chatReq.Messages)-len(req.Messages))
	for i := range chatReq.Messages {
		m := &chatReq.Messages[i]
		m.Content = a.scrub(m.Content)
		for j := range m.MultiContent {
			m.MultiContent[j].Text = a.scrub(m.MultiContent[j].Text)
		}
		for j := range m.ToolCalls {
			m.ToolCalls[j].Function.Arguments = a.scrub(m.ToolCalls[j].Function.Arguments)
		}
	}
	if !req.DisableTools {
		chatReq.Tools = []openai.Tool{{Type: openai.ToolTypeFunction, Function: ptr(ShellTool())}, {Type: openai.ToolTypeFunction, Function: ptr(ShareFileTool())}}
	}

	var resp ModelResponse
	start := time.Now()
	if a.cfg.Stream {
		resp, err = a.stream(callCtx, chatReq)
	} else {
		resp, err = a.once(callCtx, chatReq)
	}
	if err != nil {
		if errors.Is(callCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		delay, shouldRetry := hint.get()
		err = Classify(&callError{
			err: fmt.Errorf("agent: complete: %w", err), model: model, baseURL: a.cfg.BaseURL,
			apiKey: a.cfg.APIKey, timeout: a.cfg.RequestTimeout, retryAfter: delay, shouldRetry: shouldRetry,
		})
		metrics.ModelCall(errorClass(err), time.Since(start))
		return ModelResponse{}, err
	}
	metrics.ModelCall(metrics.ModelOK, time.Since(start))
	metrics.ModelTokens(resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
	if req.DisableTools {
		// Some servers call tools even when none are offered; the caller
		// asked for a plain answer and will not run them.
		resp.ToolCalls = nil
	}
	resp.Content = a.scrub(resp.Content)
	resp.FinishReason = a.scrub(resp.FinishReason)
	for i := range resp.ToolCalls {
		tc := &resp.ToolCalls[i]
		tc.ID, tc.Name, tc.Arguments = a.scrub(tc.ID), a.scrub(tc.Name), a.scrub(tc.Arguments)
	}
	if written != nil {
		if werr := <-written; werr != nil {
			// Without its chunk the ref would send the next call (on
			// another worker) to a missing transcript: answer without
			// one, and the workflow sends the transcript in full next time.
			slog.Warn("agent: cannot store the transcript; the next call sends it in full", "error", werr)
			stored = nil
		}
	}
	resp.Transcript, resp.Skipped, resp.Dropped = stored, skipped, dropped
	if stored == nil {
		resp.Skipped = 0
	}
	if stored != nil && rebased && a.Transcripts != nil {
		// The new chunk holds the whole transcript: what came before it is
		// no longer needed, once no call can still name it.
		if _, err := a.Transcripts.DeleteOlder(ctx, TranscriptPrefix(req.SessionID), time.Now().Add(-transcriptKeep)); err != nil {
			slog.Warn("agent: cannot delete superseded transcript chunks; the sweeper removes them with the session", "error", err)
		}
	}
	return resp, nil
}

// CompleteStored is Complete for requests that carry a stored transcript
// by reference (Stored). It has a name of its own so that a worker of a
// build before stored transcripts, which would ignore Base and send the
// model only the newest messages, cannot take the call: it does not know
// the activity and fails it, and the retry goes to a current worker.
func (a *Activities) CompleteStored(ctx context.Context, req ModelRequest) (ModelResponse, error) {
	if !req.Stored {
		return ModelResponse{}, nonRetryable("CompleteStored needs a Stored request", ErrTypeModelBadRequest, "agent: complete stored: not stored")
	}
	return a.Complete(ctx, req)
}

// assemble builds a Stored request's transcript from its base and the new
// messages, stores it, and returns what to send (budgeted), its ref, and
// how many messages of the base the stored transcript leaves out. A base
// that cannot be found or fails its digest is ErrTypeTranscriptMissing,
// which the workflow answers by sending the transcript in full; a store
// that does not answer is retried.
func (a *Activities) assemble(ctx context.Context, req ModelRequest) ([]session.Message, *TranscriptRef, int, int, func(context.Context) error, error) {
	if req.SessionID == "" {
		return nil, nil, 0, 0, nil, nonRetryable("model request stores a transcript without a session ID", ErrTypeModelBadRequest, "agent: complete: no session ID")
	}
	var base *cached
	if req.Base != nil {
		var err error
		if base, err = a.cache.load(ctx, a.Transcripts, req.SessionID, *req.Base); err != nil {
			if ctx.Err() != nil || errors.Is(err, errStoreUnavailable) {
				return nil, nil, 0, 0, nil, fmt.Errorf("agent: complete: load transcript: %w", err)
			}
			return nil, nil, 0, 0, nil, nonRetryable(fmt.Sprintf("the stored transcript %s of this session is missing or unreadable: %v", req.Base.Digest, err),
				ErrTypeTranscriptMissing, err.Error())
		}
	} else if req.Skip != 0 {
		return nil, nil, 0, 0, nil, nonRetryable("model request skips messages of no base", ErrTypeModelBadRequest, "agent: complete: skip without base")
	}
	ref, stored, skipped, write, err := a.cache.extend(a.Transcripts, req.SessionID, base, req.Skip, req.Messages)
	if err != nil {
		return nil, nil, 0, 0, nil, fmt.Errorf("agent: complete: %w", err)
	}
	current := stored[req.Skip-skipped:]
	w := a.window()
	if req.ContextBytes > 0 {
		// The session's byte cap, in the estimate's units.
		w = w.Cap(req.ContextBytes / 3)
	}
	fitted, dropped := FitReport(current, w)
	if dropped > 0 && req.Compactable {
		return nil, nil, 0, 0, nil, nonRetryable(fmt.Sprintf("the conversation (%d messages, about %d tokens) does not fit the model's window of %d tokens", len(current), TranscriptTokens(current), w.Available()),
			ErrTypeNeedsCompaction, "agent: complete: needs compaction")
	}
	return fitted, &ref, skipped, dropped, write, nil
}

// window is the configured window less the system prompt, which every
// request carries on top of the transcript.
func (a *Activities) window() Window {
	w := a.cfg.Window
	return w.Cap(w.Available() - MessageTokens(session.Message{Role: session.RoleSystem, Content: a.cfg.SystemPrompt}))
}

// Compact summarises the oldest part of a conversation (the workflow
// replaces it by the summary, once, in the transcript). The part is
// fitted into the window first, so a conversation of any length can be
// compacted; the model is asked for a plain answer.
func (a *Activities) Compact(ctx context.Context, req CompactRequest) (CompactResponse, error) {
	if len(req.Messages) == 0 {
		return CompactResponse{}, nonRetryable("nothing to compact", ErrTypeModelBadRequest, "agent: compact: no messages")
	}
	msgs := append(append([]session.Message(nil), req.Messages...), session.Message{Role: session.RoleUser, Content: compactPrompt})
	resp, err := a.Complete(ctx, ModelRequest{Messages: Fit(msgs, a.window()), DisableTools: true})
	if err != nil {
		return CompactResponse{}, err
	}
	summary := strings.TrimSpace(resp.Content)
	if summary == "" {
		return CompactResponse{}, nonRetryable("the model wrote an empty summary", ErrTypeModelBadResponse, "agent: compact: empty summary")
	}
	return CompactResponse{Summary: summary, Usage: resp.Usage}, nil
}

func (a *Activities) once(ctx context.Context, req openai.ChatCompletionRequest) (ModelResponse, error) {
	r, err := a.client.CreateChatCompletion(ctx, req)
	if err != nil {
		return ModelResponse{}, err
	}
	if len(r.Choices) == 0 {
		return ModelResponse{}, &badResponseError{"the response had no choices"}
	}
	ch := r.Choices[0]
	out := ModelResponse{
		Content:      clean(ch.Message.Content),
		FinishReason: string(ch.FinishReason),
		Usage:        Usage{PromptTokens: r.Usage.PromptTokens, CompletionTokens: r.Usage.CompletionTokens},
	}
	for _, tc := range ch.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, session.ToolCall{ID: orNewID(tc.ID), Name: clean(tc.Function.Name), Arguments: clean(tc.Function.Arguments)})
	}
	return bounded(out)
}

// MaxAnswerBytes bounds a model answer, JSON-encoded as the activity's
// result (content, tool calls and all). The workflow records the answer in
// its history, where Temporal refuses any payload over 2 MB: an answer that
// large (a model looping inside one tool call's arguments) would fail every
// attempt to complete the activity. A valid shell call is at most
// MaxShellCommands × MaxShellCommandBytes (320 KiB).
const MaxAnswerBytes = 1 << 20

// bounded refuses an answer the workflow could not record.
func bounded(out ModelResponse) (ModelResponse, error) {
	b, err := json.Marshal(out)
	if err != nil {
		return ModelResponse{}, &badResponseError{"the answer cannot be encoded: " + err.Error()}
	}
	if len(b) > MaxAnswerBytes {
		return ModelResponse{}, &badResponseError{fmt.Sprintf("the answer is %d bytes, over the %d a session records (a runaway answer or tool call)", len(b), MaxAnswerBytes)}
	}
	return out, nil
}

// streamProgress is the heartbeat detail recorded while streaming.
type streamProgress struct {
	Chunks int `json:"chunks"`
	Bytes  int `json:"bytes"`
}

func (a *Activities) stream(ctx context.Context, req openai.ChatCompletionRequest) (ModelResponse, error) {
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	st, err := a.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return ModelResponse{}, err
	}
	defer st.Close()
	inActivity := activity.IsActivity(ctx)
	var acc streamAccumulator
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ModelResponse{}, fmt.Errorf("stream: %w", err)
		}
		acc.add(chunk)
		if acc.bytes > MaxAnswerBytes {
			// Stop reading a runaway stream: bounded would refuse it anyway.
			return ModelResponse{}, &badResponseError{fmt.Sprintf("the streamed answer passed %d bytes, the most a session records (a runaway answer or tool call)", MaxAnswerBytes)}
		}
		if inActivity {
			activity.RecordHeartbeat(ctx, streamProgress{Chunks: acc.chunks, Bytes: acc.bytes})
		}
	}
	return acc.result()
}

// streamAccumulator reassembles a streamed completion. Tool-call fragments
// are keyed by their index; servers that omit the index are handled by ID,
// then by appending to the latest call.
type streamAccumulator struct {
	content strings.Builder
	calls   []*session.ToolCall
	byIndex map[int]*session.ToolCall
	finish  string
	usage   Usage
	chunks  int
	bytes   int
}

func (s *streamAccumulator) add(c openai.ChatCompletionStreamResponse) {
	s.chunks++
	if c.Usage != nil {
		s.usage = Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if ch.FinishReason != "" {
			s.finish = string(ch.FinishReason)
		}
		s.content.WriteString(ch.Delta.Content)
		s.bytes += len(ch.Delta.Content)
		for _, d := range ch.Delta.ToolCalls {
			tc := s.callFor(d)
			if tc.ID == "" {
				tc.ID = d.ID
			}
			if tc.Name == "" {
				tc.Name = d.Function.Name
			}
			tc.Arguments += d.Function.Arguments
			s.bytes += len(d.Function.Arguments)
		}
	}
}

func (s *streamAccumulator) callFor(d openai.ToolCall) *session.ToolCall {
	if s.byIndex == nil {
		s.byIndex = map[int]*session.ToolCall{}
	}
	if d.Index != nil {
		if tc, ok := s.byIndex[*d.Index]; ok {
			return tc
		}
		tc := &session.ToolCall{}
		s.byIndex[*d.Index] = tc
		s.calls = append(s.calls, tc)
		return tc
	}
	if d.ID != "" {
		for _, tc := range s.calls {
			if tc.ID == d.ID {
				return tc
			}
		}
	}
	if d.ID == "" && len(s.calls) > 0 {
		return s.calls[len(s.calls)-1]
	}
	tc := &session.ToolCall{}
	s.calls = append(s.calls, tc)
	return tc
}

func (s *streamAccumulator) result() (ModelResponse, error) {
	if s.finish == "" {
		if s.chunks == 0 {
			return ModelResponse{}, &badResponseError{"the stream carried no chunks"}
		}
		return ModelResponse{}, fmt.Errorf("stream: %w (the stream ended before the model finished)", io.ErrUnexpectedEOF)
	}
	out := ModelResponse{Content: clean(s.content.String()), FinishReason: s.finish, Usage: s.usage}
	for _, tc := range s.calls {
		out.ToolCalls = append(out.ToolCalls, session.ToolCall{ID: orNewID(tc.ID), Name: clean(tc.Name), Arguments: clean(tc.Arguments)})
	}
	return bounded(out)
}

// badResponseError is a 2xx answer the activity cannot use.
type badResponseError struct{ what string }

func (e *badResponseError) Error() string { return "unusable model response: " + e.what }

// heartbeatWhileWaiting heartbeats at half the activity's heartbeat timeout
// until stop is called, so a slow first token is not mistaken for a dead
// worker (and so cancellation reaches the activity). It does nothing outside
// an activity or without a heartbeat timeout.
func heartbeatWhileWaiting(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	every := activity.GetInfo(ctx).HeartbeatTimeout / 2
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// nameOK is the pattern OpenAI accepts for a message's name field; other
// names are not sent rather than risking a 400.
var nameOK = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toWire converts the transcript, prepending the system prompt. Empty
// contents are replaced by a placeholder because several servers reject
// messages without content.
func toWire(system string, msgs []session.Message) []openai.ChatCompletionMessage {
	out := make([]openai.ChatCompletionMessage, 0, len(msgs)+1)
	if system != "" {
		out = append(out, openai.ChatCompletionMessage{Role: session.RoleSystem, Content: clean(system)})
	}
	for _, m := range msgs {
		w := openai.ChatCompletionMessage{Role: m.Role, Content: clean(m.Content), ToolCallID: m.ToolCallID}
		if nameOK.MatchString(m.Name) {
			w.Name = m.Name
		}
		for _, tc := range m.ToolCalls {
			w.ToolCalls = append(w.ToolCalls, openai.ToolCall{
				ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: clean(tc.Name), Arguments: clean(tc.Arguments)},
			})
		}
		if w.Content == "" && len(w.ToolCalls) == 0 {
			w.Content = "(empty)"
		}
		out = append(out, w)
	}
	return out
}

// clean makes a string safe for the wire: valid UTF-8.
func clean(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func orNewID(id string) string {
	if id != "" {
		return id
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

func ptr[T any](v T) *T { return &v }
