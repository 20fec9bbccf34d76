package slack_test

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

// logBuf collects an adapter's logs.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// nativeEnv is a running adapter, a recording core and one session thread
// (a user's message in C0001) in a fake workspace.
func nativeEnv(t *testing.T, fo fakeslack.Options, cfg func(*slack.Config)) (*slacktest.Env, *chattest.Core, chat.Thread, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	env := slacktest.New(t, slacktest.Options{Fake: fo, Config: cfg,
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	core := newRecCore()
	env.Run(core)
	ctx := testCtx(t)
	mustSend(t, ctx, env, fakeslack.UserMessage{User: "U0001", Text: env.Fake.Mention() + " run the tests"})
	core.WaitFor(t, "the message", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	return env, core, core.Record().Messages[0].Thread, logs
}

func status(env *slacktest.Env, th chat.Thread) fakeslack.ThreadStatus {
	st, _ := env.Fake.ThreadStatus(th.Channel, th.Thread)
	return st
}

func agentSession(env *slacktest.Env, th chat.Thread) fakeslack.AgentSession {
	as, _ := env.Fake.AgentSession(th.Channel, th.Thread)
	return as
}

func running(turn int) session.TurnState {
	return session.TurnState{Turn: turn, Version: 1, Status: session.StatusThinking}
}

func waiting(turn int) session.TurnState {
	return session.TurnState{Turn: turn, Version: 2, Status: session.StatusAwaitingApproval,
		Pending: &session.PendingApproval{CallID: "c1", Command: "make"}}
}

func ended(turn int) session.TurnState {
	return session.TurnState{Turn: turn, Version: 3, Status: session.StatusComplete, FinalText: "Done."}
}

// The thread says "is working…" while the turn works, "is waiting for
// approval…" while a command waits, and nothing once it ended; the status
// Slack clears when the bot posts (the card) is set again. The agent
// session is processing throughout the turn and active after it.
func TestThreadStatusFollowsTheTurn(t *testing.T) {
	env, _, th, _ := nativeEnv(t, fakeslack.Options{AgentApp: true}, nil)
	ctx := testCtx(t)
	a := env.Adapter
	a.ObserveTurn(th, running(1))
	waitFake(t, ctx, env, "the working status", func(fakeslack.Snapshot) bool { return status(env, th).Status == "is working…" })
	if as := agentSession(env, th); as.Status != "processing" || as.Initiator != "U0001" {
		t.Fatalf("agent session = %+v, want processing, initiated by U0001", as)
	}
	// The card goes up: Slack clears the status, the adapter sets it again.
	if _, err := a.Post(ctx, th, chat.Card{Title: "💭 Thinking"}); err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "the status set again after the card", func(fakeslack.Snapshot) bool {
		h := status(env, th).History
		return len(h) == 3 && h[1] == "" && h[2] == "is working…"
	})
	a.ObserveTurn(th, waiting(1))
	waitFake(t, ctx, env, "the approval status", func(fakeslack.Snapshot) bool { return status(env, th).Status == "is waiting for approval…" })
	if _, took := a.EndTurn(ctx, th, ended(1), "Done."); took {
		t.Fatal("EndTurn took the answer with streaming off")
	}
	waitFake(t, ctx, env, "the status cleared", func(fakeslack.Snapshot) bool {
		return status(env, th).Status == "" && agentSession(env, th).Status == "active"
	})
	if h := agentSession(env, th).History; !slices.Equal(h, []string{"processing", "active"}) {
		t.Fatalf("agent session history = %q, want processing then active", h)
	}
	if v := env.Fake.Snapshot().Violations; len(v) > 0 {
		t.Fatalf("budget violations: %+v", v)
	}
}

// Repeated states cost no calls: the status and the session are sent when
// they change, not on every poll.
func TestThreadStatusIsNotRepeated(t *testing.T) {
	env, _, th, _ := nativeEnv(t, fakeslack.Options{AgentApp: true}, nil)
	ctx := testCtx(t)
	for range 20 {
		env.Adapter.ObserveTurn(th, running(1))
	}
	waitFake(t, ctx, env, "the working status", func(fakeslack.Snapshot) bool { return status(env, th).Status == "is working…" })
	for range 20 {
		env.Adapter.ObserveTurn(th, running(1))
	}
	env.Adapter.EndTurn(ctx, th, ended(1), "")
	waitFake(t, ctx, env, "the end", func(fakeslack.Snapshot) bool {
		return agentSession(env, th).Status == "active" && status(env, th).Status == ""
	})
	idle(t, ctx, env)
	s := env.Fake.Snapshot()
	if n, m := len(s.AllCallsTo("assistant.threads.setStatus")), len(s.AllCallsTo("agents.sessions.setStatus")); n != 2 || m != 2 {
		t.Fatalf("%d setStatus and %d agents.sessions.setStatus calls for one turn, want 2 and 2", n, m)
	}
}

// An app that may not use a surface (not declared as an agent; a token
// without the scope) logs it once at info and stops asking: later turns,
// in any thread, make no more calls; the card is untouched.
func TestNativeSignalsDegradeOncePerApp(t *testing.T) {
	env, _, th, logs := nativeEnv(t, fakeslack.Options{}, nil) // not an agent app
	ctx := testCtx(t)
	env.Fake.InjectFault("assistant.threads.setStatus", 100, fakeslack.Fault{Error: "missing_scope"})
	a := env.Adapter
	a.ObserveTurn(th, running(1))
	waitFake(t, ctx, env, "both refusals", func(s fakeslack.Snapshot) bool {
		return len(s.AllCallsTo("assistant.threads.setStatus")) == 1 && len(s.AllCallsTo("agents.sessions.setStatus")) == 1
	})
	a.EndTurn(ctx, th, ended(1), "")
	other := th
	other.Thread = env.Fake.Say(fakeslack.UserMessage{Text: "another thread"}).Message.TS
	for turn := 2; turn < 5; turn++ {
		a.ObserveTurn(th, running(turn))
		a.ObserveTurn(other, running(turn))
		a.EndTurn(ctx, th, ended(turn), "")
		a.EndTurn(ctx, other, ended(turn), "")
	}
	if _, err := a.Post(ctx, th, chat.Card{Title: "✅ Done"}); err != nil {
		t.Fatalf("the card after a refused status: %v", err)
	}
	if err := slack.WaitSignals(ctx, a); err != nil {
		t.Fatal(err)
	}
	s := env.Fake.Snapshot()
	if n, m := len(s.AllCallsTo("assistant.threads.setStatus")), len(s.AllCallsTo("agents.sessions.setStatus")); n != 1 || m != 1 {
		t.Fatalf("%d setStatus and %d agents.sessions.setStatus calls, want one each (then off)", n, m)
	}
	if c := s.AllCallsTo("agents.sessions.setStatus")[0]; c.Error != "not_allowed" {
		t.Fatalf("a non-agent app's session call answered %q, want not_allowed", c.Error)
	}
	for _, want := range []string{"thread status is off for this app", "agent sessions are off for this app"} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("log has %q %d times, want once:\n%s", want, n, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "level=INFO msg=\"slack: thread status is off") {
		t.Errorf("the refusal is not logged at info:\n%s", logs.String())
	}
}

// A refusal about one thread (Slack knows no such thread) turns the status
// off for that thread only, logged at debug.
func TestNativeSignalsDegradePerThread(t *testing.T) {
	env, _, th, logs := nativeEnv(t, fakeslack.Options{AgentApp: true}, nil)
	ctx := testCtx(t)
	a := env.Adapter
	gone := th
	gone.Thread = "1600000000.000001" // no such message in the fake
	a.ObserveTurn(gone, running(1))
	waitFake(t, ctx, env, "the refusals", func(s fakeslack.Snapshot) bool {
		return len(s.AllCallsTo("assistant.threads.setStatus")) == 1 && len(s.AllCallsTo("agents.sessions.setStatus")) == 1
	})
	a.EndTurn(ctx, gone, ended(1), "")
	a.ObserveTurn(gone, running(2))
	if err := slack.WaitSignals(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.ObserveTurn(th, running(1))
	waitFake(t, ctx, env, "the good thread's status", func(fakeslack.Snapshot) bool { return status(env, th).Status == "is working…" })
	s := env.Fake.Snapshot()
	calls := s.AllCallsTo("assistant.threads.setStatus")
	for _, c := range calls[1:] {
		if c.Form.Get("thread_ts") == gone.Thread {
			t.Fatalf("the refused thread was asked again: %+v", c.Form)
		}
	}
	if c := calls[0]; c.Error != "invalid_thread_ts" {
		t.Fatalf("first call answered %q, want invalid_thread_ts", c.Error)
	}
	if !strings.Contains(logs.String(), "level=DEBUG msg=\"slack: a native signal is off for this thread\"") {
		t.Errorf("the thread's refusal is not logged at debug:\n%s", logs.String())
	}
}

// Slack's native stop button takes the Stop button's path: the core gets
// chat.ActionStop for the thread, from the user Slack names; the session
// is moved out of processing once the turn ends.
func TestNativeStopIsTheStopAction(t *testing.T) {
	env, core, th, _ := nativeEnv(t, fakeslack.Options{AgentApp: true}, nil)
	ctx := testCtx(t)
	a := env.Adapter
	a.ObserveTurn(th, running(1))
	waitFake(t, ctx, env, "the processing session", func(fakeslack.Snapshot) bool { return agentSession(env, th).Status == "processing" })
	id, err := env.Fake.ClickNativeStop(ctx, "U0002", th.Channel, th.Thread)
	if err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "the ack", func(s fakeslack.Snapshot) bool { return s.Acked(id) })
	r := core.WaitFor(t, "the stop action", func(r chattest.Record) bool { return len(r.Actions) == 1 })
	if act := r.Actions[0]; act.ID != chat.ActionStop || act.Thread != th || act.User.ID != "U0002" || act.Value != "" || act.Reply == nil {
		t.Fatalf("action = %+v, want stop of %v by U0002", act, th)
	}
	a.EndTurn(ctx, th, session.TurnState{Turn: 1, Version: 4, Status: session.StatusComplete, Stopped: true}, "")
	waitFake(t, ctx, env, "the session active", func(fakeslack.Snapshot) bool { return agentSession(env, th).Status == "active" })
	// A redelivery of the same event stops nothing twice.
	if _, err := env.Fake.Redeliver(ctx, id); err != nil {
		t.Fatal(err)
	}
	idle(t, ctx, env)
	if n := len(core.Record().Actions); n != 1 {
		t.Fatalf("%d stop actions after a redelivery, want 1", n)
	}
}

// Attack: a user the bot does not serve clicks the native stop. Slack shows
// the button to everyone in the thread, so the adapter applies the same
// allowlist as to the card's buttons: no stop reaches the core, the user
// is told why privately, and the session is put back as it was.
func TestNativeStopHonoursTheAllowlist(t *testing.T) {
	env, core, th, _ := nativeEnv(t, fakeslack.Options{AgentApp: true}, func(c *slack.Config) { c.AllowedUsers = []string{"U0001"} })
	ctx := testCtx(t)
	env.Adapter.ObserveTurn(th, running(1))
	waitFake(t, ctx, env, "the processing session", func(fakeslack.Snapshot) bool { return agentSession(env, th).Status == "processing" })
	if _, err := env.Fake.ClickNativeStop(ctx, "U0666", th.Channel, th.Thread); err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "the refusal", func(s fakeslack.Snapshot) bool {
		for _, c := range s.CallsTo("chat.postEphemeral") {
			if c.Form.Get("user") == "U0666" && strings.Contains(c.Text(), "not on this bot's list") {
				return true
			}
		}
		return false
	})
	waitFake(t, ctx, env, "the session processing again", func(fakeslack.Snapshot) bool {
		return slices.Equal(agentSession(env, th).History, []string{"processing", "processing"})
	})
	idle(t, ctx, env)
	if n := len(core.Record().Actions); n != 0 {
		t.Fatalf("a stop from a user outside the allowlist reached the core: %+v", core.Record().Actions)
	}
}

// A native stop in a thread whose turn this process does not watch (another
// replica holds its watch lease, or no turn runs): a stop that reaches the
// core leaves the session active; a refused one leaves it as it is, for
// the replica that watches the turn.
func TestNativeStopOnAnUnwatchedThread(t *testing.T) {
	env, core, th, _ := nativeEnv(t, fakeslack.Options{AgentApp: true}, func(c *slack.Config) { c.AllowedUsers = []string{"U0001"} })
	ctx := testCtx(t)
	other := slackgo.New(env.Config.BotToken, slackgo.OptionAPIURL(env.Fake.URL()))
	processing := slackgo.AgentSessionSetStatusParameters{Status: "processing", ChannelID: th.Channel, ThreadTS: th.Thread}
	if _, err := other.SetAgentSessionStatusContext(ctx, processing); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Fake.ClickNativeStop(ctx, "U0666", th.Channel, th.Thread); err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "the refusal", func(s fakeslack.Snapshot) bool { return len(s.CallsTo("chat.postEphemeral")) == 1 })
	idle(t, ctx, env)
	if err := slack.WaitSignals(ctx, env.Adapter); err != nil {
		t.Fatal(err)
	}
	if h := agentSession(env, th).History; !slices.Equal(h, []string{"processing"}) {
		t.Fatalf("after a refused stop the session went %q; the watching replica owns it", h)
	}
	if _, err := env.Fake.ClickNativeStop(ctx, "U0001", th.Channel, th.Thread); err != nil {
		t.Fatal(err)
	}
	core.WaitFor(t, "the stop", func(r chattest.Record) bool { return len(r.Actions) == 1 })
	waitFake(t, ctx, env, "the session active", func(fakeslack.Snapshot) bool { return agentSession(env, th).Status == "active" })
}

// Attack: in HTTP mode a native stop is an Events API request like any
// other, so one not signed with the signing secret is refused (401) and
// stops nothing; the signed one reaches the core as the Stop action.
func TestNativeStopOverHTTPIsVerified(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{Fake: fakeslack.Options{AgentApp: true}, Config: func(c *slack.Config) { c.Mode = slack.ModeHTTP }})
	core := newRecCore()
	env.Run(core)
	f := env.Fake
	events := env.HTTPBase() + "/slack/events"
	root := f.Say(fakeslack.UserMessage{Text: "a thread"}).Message.TS
	api := slackgo.New(env.Config.BotToken, slackgo.OptionAPIURL(f.URL()))
	if _, err := api.SetAgentSessionStatusContext(ctx, slackgo.AgentSessionSetStatusParameters{Status: "processing", ChannelID: "C0001", ThreadTS: root}); err != nil {
		t.Fatal(err)
	}
	p, err := f.NativeStopPayload("U0001", "C0001", root)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []fakeslack.Signing{{Secret: "wrong"}, {Unsigned: true}} {
		if r, err := f.PostEvent(ctx, events, p, bad); err != nil || r.Status != 401 {
			t.Fatalf("stop signed %+v: %+v %v", bad, r, err)
		}
	}
	idle(t, ctx, env)
	if n := len(core.Record().Actions); n != 0 {
		t.Fatalf("an unverified stop reached the core: %+v", core.Record().Actions)
	}
	if r, err := f.PostEvent(ctx, events, p, fakeslack.Signing{}); err != nil || r.Status != 200 {
		t.Fatalf("signed stop: %+v %v", r, err)
	}
	r := core.WaitFor(t, "the stop", func(r chattest.Record) bool { return len(r.Actions) == 1 })
	if a := r.Actions[0]; a.ID != chat.ActionStop || a.Thread.Thread != root || a.User.ID != "U0001" {
		t.Fatalf("action = %+v", a)
	}
}
