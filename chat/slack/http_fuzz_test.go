package slack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// The fuzz targets here drive the adapter's HTTP mode (the Events API, slash
// commands and interactivity endpoints, behind the signature check) with
// fuzzed requests, against the fake workspace, into the recording core.
// Socket Mode hands the same payloads to the same handlers (slack-go parses
// both with slackevents.ParseEvent and the same InteractionCallback type).

// panicLog records the adapter's log records that report a recovered panic:
// the adapter recovers panics in event work (so one bad event cannot take
// the bot down), which would hide them from the fuzzer.
type panicLog struct {
	mu     sync.Mutex
	panics []string
	// unreadable counts Socket Mode envelopes the adapter reported it
	// could not read (they are not acked).
	unreadable int
}

func (p *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "unreadable socket mode message") {
		p.mu.Lock()
		p.unreadable++
		p.mu.Unlock()
	}
	if strings.Contains(r.Message, "panic") {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool { b.WriteString(" " + a.String()); return true })
		p.mu.Lock()
		p.panics = append(p.panics, b.String())
		p.mu.Unlock()
	}
	return nil
}
func (p *panicLog) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicLog) WithGroup(string) slog.Handler      { return p }

func (p *panicLog) unreadables() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.unreadable
}

func (p *panicLog) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.panics
	p.panics = nil
	return out
}

// httpFuzz is one adapter (HTTP mode, or Socket Mode for FuzzSlackSocket)
// on a fake workspace, shared by every input of a fuzz target.
type httpFuzz struct {
	env    *slacktest.Env
	core   *chattest.Core
	log    *panicLog
	client *http.Client
	secret string
}

func newHTTPFuzz(f *testing.F) *httpFuzz { return newFuzzEnv(f, slack.ModeHTTP) }

// newFuzzEnv runs an adapter in mode.
func newFuzzEnv(f *testing.F, mode slack.Mode) *httpFuzz {
	f.Helper()
	h := &httpFuzz{log: &panicLog{}, core: newRecCore()}
	h.env = slacktest.New(f, slacktest.Options{
		Config: func(c *slack.Config) { c.Mode = mode },
		Log:    slog.New(h.log),
	})
	h.env.Run(h.core)
	h.secret = h.env.Fake.Options().SigningSecret
	// No keep-alive: a pooled connection would look like a leaked goroutine.
	h.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	return h
}

// state is what an input may change: what the core was handed and what
// the adapter wrote to Slack (reads such as users.info change nothing).
type state struct {
	messages, commands, actions int
	writes, hooks               int
}

var slackReads = map[string]bool{
	"auth.test": true, "users.info": true, "conversations.info": true, "conversations.replies": true,
	"conversations.history": true, "bots.info": true, "team.info": true,
}

func (h *httpFuzz) state() state {
	r := h.core.Record()
	snap := h.env.Fake.Snapshot()
	s := state{messages: len(r.Messages), commands: len(r.Commands), actions: len(r.Actions), hooks: len(snap.Hooks)}
	for _, c := range snap.Calls {
		if !slackReads[c.Method] {
			s.writes++
		}
	}
	return s
}

// post sends body to path with the given signature headers (none if both
// are "") and returns the status once the adapter has handled everything
// the request started.
func (h *httpFuzz) post(t testing.TB, path, contentType string, body []byte, ts, sig string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.env.HTTPBase()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if ts != "" || sig != "" {
		req.Header.Set("X-Slack-Request-Timestamp", ts)
		req.Header.Set("X-Slack-Signature", sig)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.env.Adapter.WaitIdle(ctx); err != nil {
		t.Fatalf("the adapter did not finish with the request: %v", err)
	}
	if p := h.log.take(); len(p) > 0 {
		t.Fatalf("the adapter panicked handling the request: %s", strings.Join(p, "\n"))
	}
	return resp.StatusCode
}

// signed posts body signed as Slack signs it, now.
func (h *httpFuzz) signed(t testing.TB, path, contentType string, body []byte) int {
	t.Helper()
	now := time.Now()
	return h.post(t, path, contentType, body, strconv.FormatInt(now.Unix(), 10), fakeslack.Sign(h.secret, now, body))
}

// capture returns the exact bytes fakeslack sends for a request, by
// sending it to a recorder instead of the adapter.
func capture(f *testing.F, send func(target string) error) []byte {
	f.Helper()
	var got []byte
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
	}))
	defer rec.Close()
	if err := send(rec.URL); err != nil {
		f.Fatal(err)
	}
	return got
}

// checkGone fails t if, within a bounded wait, the process does not get
// back to at most before goroutines.
func checkGone(t *testing.T, before int) {
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
			t.Fatalf("%d goroutines, %d before the input:\n%s", n, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Endpoints.
const (
	eventsPath   = "/slack/events"
	commandsPath = "/slack/commands"
	interactPath = "/slack/interactivity"
	formType     = "application/x-www-form-urlencoded"
)

// seedThread posts an approval card into a thread of the fake workspace
// and returns the thread's root ts and the card's ts.
func seedThread(f *testing.F, h *httpFuzz) (root, card string) {
	f.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	said := h.env.Fake.Say(fakeslack.UserMessage{Text: h.env.Fake.Mention() + " clean the build"})
	root = said.Message.TS
	ref, err := h.env.Adapter.Post(ctx, chat.Thread{Platform: slack.Platform, Workspace: "T0001", Channel: "C0001", Thread: root}, approvalCard(approvalValue))
	if err != nil {
		f.Fatal(err)
	}
	return root, ref
}

// FuzzSlackEvents posts signed Events API bodies. Whatever the body, the
// adapter answers 200 or 400 (never an internal error), does not panic or
// leak goroutines, changes nothing when it answers 400, and hands the
// core only messages and stops that a real event describes: a message or
// app_mention from a user, in a channel, at a ts, or an
// agent_session_stopped.
func FuzzSlackEvents(f *testing.F) {
	h := newHTTPFuzz(f)
	fake := h.env.Fake
	root, _ := seedThread(f, h)
	for _, m := range []fakeslack.UserMessage{
		{Text: fake.Mention() + " run the tests"},
		{Text: "reply in the thread", ThreadTS: root},
		{Text: fake.Mention() + " /stop", ThreadTS: root},
		{Text: "dm", ChannelType: "im", Channel: "D0001"},
		{Text: "from a bot", BotID: "B0042", SubType: "bot_message"},
	} {
		for _, p := range fake.Say(m).Payloads {
			f.Add([]byte(p))
		}
	}
	if p, err := fake.EditPayload("C0001", root, "edited"); err == nil {
		f.Add([]byte(p))
	}
	_, stop := fake.EventCallback(map[string]any{"type": "agent_session_stopped", "channel": "C0001", "thread_ts": root, "user": "U0001", "event_ts": fake.NewTS()})
	f.Add([]byte(stop))
	f.Add([]byte(fakeslack.URLVerification("chal")))
	for _, s := range []string{``, `{}`, `null`, `[]`, `{"type":"event_callback"}`, `{"type":"event_callback","event":null}`,
		`{"type":"event_callback","event":{"type":"app_mention"}}`, `{"type":"event_callback","event":{"type":"message","user":"U1"}}`,
		`{"type":"url_verification","challenge":5}`, `{"type":"app_rate_limited"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before, was := runtime.NumGoroutine(), h.state()
		status := h.signed(t, eventsPath, "application/json", body)
		now := h.state()
		checkGone(t, before)
		switch status {
		case http.StatusOK:
		case http.StatusBadRequest:
			if now != was {
				t.Fatalf("a refused event changed state: %+v → %+v", was, now)
			}
			return
		default:
			t.Fatalf("status %d", status)
		}
		checkEvent(t, h, body, was, now)
	})
}

// checkEvent asserts what an accepted Events API body may have done: a
// message (from a user, in a channel, at a ts, with an event ID) or a stop
// from a message or app_mention or agent_session_stopped callback, and
// nothing from anything else.
func checkEvent(t *testing.T, h *httpFuzz, body []byte, was, now state) {
	t.Helper()
	var ev struct {
		Type  string `json:"type"`
		Event struct {
			Type string `json:"type"`
		} `json:"event"`
	}
	_ = json.Unmarshal(body, &ev)
	inner := ev.Event.Type
	if ev.Type != "event_callback" || (inner != "app_mention" && inner != "message" && inner != "agent_session_stopped") {
		if now != was {
			t.Fatalf("a %q/%q event changed state: %+v → %+v", ev.Type, inner, was, now)
		}
		return
	}
	for _, m := range h.core.Record().Messages[was.messages:] {
		if inner == "agent_session_stopped" || m.EventID == "" || m.User.ID == "" || m.Thread.Channel == "" || m.Thread.Thread == "" || m.Ref == "" {
			t.Fatalf("the core got a message with no user, place or event: %+v", m)
		}
	}
	for _, a := range h.core.Record().Actions[was.actions:] {
		if inner != "agent_session_stopped" || a.ID != chat.ActionStop || a.User.ID == "" || a.Thread.Channel == "" || a.Thread.Thread == "" {
			t.Fatalf("the core got an action from a %q event: %+v", inner, a)
		}
	}
	if now.commands != was.commands {
		t.Fatalf("an event ran a command")
	}
}

// FuzzSlackInteraction posts signed interactivity requests whose payload
// JSON is fuzzed (block_actions clicks, view_submission of the reject
// modal, message shortcuts). The adapter answers 200 or 400, does not
// panic or leak goroutines, changes nothing on 400, and hands the core an
// action only from a click or a submission, and only with a user and a
// thread to act in.
func FuzzSlackInteraction(f *testing.F) {
	h := newHTTPFuzz(f)
	fake := h.env.Fake
	root, card := seedThread(f, h)
	for _, id := range []string{chat.ActionApprove, chat.ActionApproveAlways, chat.ActionReject} {
		p, err := fake.ClickPayload(fakeslack.Click{Channel: "C0001", MessageTS: card, ActionID: id})
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(p))
	}
	forged := "1.s.T0001.C0009.1.call_x"
	if p, err := fake.ClickPayload(fakeslack.Click{Channel: "C0001", MessageTS: card, ActionID: chat.ActionApprove, Value: &forged}); err == nil {
		f.Add([]byte(p))
	}
	// A reject click opens the modal; its submission is a seed too.
	p, err := fake.ClickPayload(fakeslack.Click{Channel: "C0001", MessageTS: card, ActionID: chat.ActionReject})
	if err != nil {
		f.Fatal(err)
	}
	if st := h.signed(f, interactPath, formType, []byte(url.Values{"payload": {string(p)}}.Encode())); st != http.StatusOK {
		f.Fatalf("reject click: %d", st)
	}
	views := fake.Views()
	if len(views) == 0 {
		f.Fatal("the reject click opened no modal")
	}
	sub, err := fake.SubmitPayload(views[len(views)-1].ID, "U0001", map[string]string{"reason_input": "not on main"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(sub))
	if p, err := fake.ShortcutPayload(slack.ForkShortcut, "U0001", "C0001", root); err == nil {
		f.Add([]byte(p))
	}
	for _, s := range []string{``, `{}`, `null`, `{"type":"block_actions"}`, `{"type":"block_actions","actions":[{}]}`,
		`{"type":"block_actions","user":{"id":"U1"},"actions":[{"action_id":"approve","value":"x"}]}`,
		`{"type":"view_submission","view":{"callback_id":"sandbot_reject","private_metadata":"{}"}}`,
		`{"type":"view_submission","view":{"callback_id":"sandbot_reject","private_metadata":"nope"}}`,
		`{"type":"message_action","callback_id":"` + slack.ForkShortcut + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		before, was := runtime.NumGoroutine(), h.state()
		status := h.signed(t, interactPath, formType, []byte(url.Values{"payload": {string(payload)}}.Encode()))
		now := h.state()
		checkGone(t, before)
		switch status {
		case http.StatusOK:
		case http.StatusBadRequest:
			if now != was {
				t.Fatalf("a refused interaction changed state: %+v → %+v", was, now)
			}
			return
		default:
			t.Fatalf("status %d", status)
		}
		checkInteraction(t, h, payload, was, now)
	})
}

// checkInteraction asserts what an accepted interaction payload may have
// done: an action from a click or a submission, a /fork from the shortcut,
// each with a user and a thread; never a message.
func checkInteraction(t *testing.T, h *httpFuzz, payload []byte, was, now state) {
	t.Helper()
	var cb struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(payload, &cb)
	rec := h.core.Record()
	for _, a := range rec.Actions[was.actions:] {
		if (cb.Type != "block_actions" && cb.Type != "view_submission") || a.User.ID == "" || a.Thread.Channel == "" || a.Thread.Thread == "" {
			t.Fatalf("the core got an action without a user or a thread from a %q payload: %+v", cb.Type, a)
		}
	}
	for _, c := range rec.Commands[was.commands:] {
		if cb.Type != "message_action" || c.Cmd.Name != chat.CmdFork || c.User.ID == "" || c.Thread.Channel == "" || c.Thread.Thread == "" {
			t.Fatalf("the core got a command without a user or a thread from a %q payload: %+v", cb.Type, c)
		}
	}
	if now.messages != was.messages {
		t.Fatalf("an interaction sent a message")
	}
}

// FuzzSlackCommand posts signed slash-command forms. The adapter answers
// 200 or 400, does not panic or leak goroutines, changes nothing on 400,
// and hands the core only commands from a user.
func FuzzSlackCommand(f *testing.F) {
	h := newHTTPFuzz(f)
	fake := h.env.Fake
	root, _ := seedThread(f, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	link := strings.TrimSuffix(fake.BaseURL(), "/") + "/archives/C0001/p" + strings.ReplaceAll(root, ".", "")
	for _, text := range []string{"help", "sessions", "stop " + root, "status " + link, "backend docker " + root, "", "/nope", "fork"} {
		f.Add(capture(f, func(target string) error {
			_, err := fake.PostSlashCommand(ctx, target, fakeslack.SlashCommand{Command: "/sandbot", Text: text}, fakeslack.Signing{})
			return err
		}))
	}
	for _, s := range []string{``, `=`, `%`, `user_id=&text=stop+1700000000.000100`, `text=%ZZ`, `command=/sandbot&text=` + strings.Repeat("a", 300)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, form []byte) {
		before, was := runtime.NumGoroutine(), h.state()
		status := h.signed(t, commandsPath, formType, form)
		now := h.state()
		checkGone(t, before)
		switch status {
		case http.StatusOK:
		case http.StatusBadRequest:
			if now != was {
				t.Fatalf("a refused command changed state: %+v → %+v", was, now)
			}
			return
		default:
			t.Fatalf("status %d", status)
		}
		for _, c := range h.core.Record().Commands[was.commands:] {
			if c.User.ID == "" || (c.Thread.Thread != "" && c.Thread.Channel == "") {
				t.Fatalf("the core got a command without a user or a channel: %+v", c)
			}
		}
		if now.messages != was.messages || now.actions != was.actions {
			t.Fatalf("a slash command sent a message or an action")
		}
	})
}

// FuzzSlackSignature posts any body to any of the three endpoints with a
// fuzzed timestamp and signature, or a correct signature over a body that
// then changed, or a correct one at a fuzzed time. Exactly the requests
// Slack could have signed in the last five minutes get past the check;
// every other is answered 401 and changes nothing at all.
func FuzzSlackSignature(f *testing.F) {
	h := newHTTPFuzz(f)
	fake := h.env.Fake
	said := fake.Say(fakeslack.UserMessage{Text: fake.Mention() + " run the tests"})
	for i, p := range said.Payloads {
		f.Add(uint8(i), []byte(p), "1700000000", "v0=00", uint8(0), int64(0))
		f.Add(uint8(0), []byte(p), "", "", uint8(1), int64(0))
		f.Add(uint8(0), []byte(p), "", "", uint8(2), int64(0))
		f.Add(uint8(0), []byte(p), "", "", uint8(1), int64(-400))
		f.Add(uint8(0), []byte(p), "", "", uint8(1), int64(1000))
	}
	f.Add(uint8(1), []byte("command=%2Fsandbot&text=help&user_id=U0001"), "", "v0=", uint8(0), int64(0))
	f.Add(uint8(2), []byte(`payload={}`), "-1", "v1=abc", uint8(0), int64(0))
	f.Add(uint8(2), []byte(`payload={}`), "", "", uint8(2), int64(0))
	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte, ts, sig string, mode uint8, skew int64) {
		path := []string{eventsPath, commandsPath, interactPath}[int(endpoint)%3]
		ctype := formType
		if path == eventsPath {
			ctype = "application/json"
		}
		// What a verifier that is right must decide.
		var valid bool
		switch mode % 3 {
		case 0: // headers as fuzzed
			if sec, err := strconv.ParseInt(ts, 10, 64); err == nil && strconv.FormatInt(sec, 10) == ts && sig == fakeslack.Sign(h.secret, time.Unix(sec, 0), body) {
				valid = abs(time.Since(time.Unix(sec, 0))) < 5*time.Minute
			}
		case 1: // signed at now+skew seconds
			skew %= 1 << 32
			at := time.Now().Add(time.Duration(skew) * time.Second)
			if d := abs(time.Duration(skew) * time.Second); d > 290*time.Second && d < 310*time.Second {
				return // too close to the five-minute edge to say what the clock will read
			}
			ts, sig = strconv.FormatInt(at.Unix(), 10), fakeslack.Sign(h.secret, at, body)
			valid = abs(time.Duration(skew)*time.Second) < 5*time.Minute
		case 2: // signed now, then one byte changed
			now := time.Now()
			ts, sig = strconv.FormatInt(now.Unix(), 10), fakeslack.Sign(h.secret, now, body)
			if len(body) == 0 {
				body = []byte{'x'}
			} else {
				body = append([]byte(nil), body...)
				body[len(body)/2] ^= 0x20
			}
		}
		if !headerValue(ts) || !headerValue(sig) {
			return // no HTTP client can send it; net/http refuses it
		}
		before, was := runtime.NumGoroutine(), h.state()
		status := h.post(t, path, ctype, body, ts, sig)
		now := h.state()
		checkGone(t, before)
		if valid {
			if status == http.StatusUnauthorized {
				t.Fatalf("a correctly signed request was refused")
			}
			return
		}
		if status != http.StatusUnauthorized {
			t.Fatalf("an unverifiable request (ts %q sig %q) got %d", ts, sig, status)
		}
		if now != was {
			t.Fatalf("a refused request changed state: %+v → %+v", was, now)
		}
	})
}

// headerValue reports whether net/http can send v as a header value.
func headerValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b != '\t' && (b < 0x20 || b == 0x7f) {
			return false
		}
	}
	return true
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
