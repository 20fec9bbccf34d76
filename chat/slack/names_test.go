package slack_test

import (
	"bytes"
	"log/slog"
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

// The members of the naming tests: one with a display name, one with only
// a real name, one with only a handle; U0004 is unknown to users.info.
var namedUsers = []fakeslack.User{
	{ID: "U0001", Name: "alice", RealName: "Alice Liddell", DisplayName: "Alice"},
	{ID: "U0002", Name: "bob", RealName: "Bob Paulsen"},
	{ID: "U0003", Name: "carol"},
}

// testClock is a settable clock for the name cache.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// lockedBuffer collects log output written from the adapter's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func usersInfoCalls(s fakeslack.Snapshot, user string) int {
	n := 0
	for _, c := range s.AllCallsTo("users.info") {
		if c.Form.Get("user") == user {
			n++
		}
	}
	return n
}

// namingEnv is an adapter over a workspace of namedUsers, on a test clock
// for its name cache, with its log captured.
func namingEnv(t *testing.T) (*slacktest.Env, *chattest.Core, *testClock, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	env := slacktest.New(t, slacktest.Options{
		Fake: fakeslack.Options{Users: namedUsers},
		Log:  slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	clock := &testClock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	slack.SetNameClock(env.Adapter, clock.now)
	core := newRecCore()
	env.Run(core)
	return env, core, clock, logs
}

// TestMessagesCarryDisplayNames: a message reaches the core with its
// author's display name (else real name, else handle) from users.info, one
// lookup per user however many messages they write; a user Slack does not
// know is named by ID (an empty Name), and the message still arrives.
func TestMessagesCarryDisplayNames(t *testing.T) {
	ctx := testCtx(t)
	env, core, _, _ := namingEnv(t)
	root := mustSend(t, ctx, env, fakeslack.UserMessage{User: "U0001", Text: env.Fake.Mention() + " fix the build"})
	core.WaitFor(t, "the mention", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	writers := []string{"U0001", "U0002", "U0001", "U0003", "U0004", "U0002", "U0004", "U0001"}
	for i, u := range writers {
		mustSend(t, ctx, env, fakeslack.UserMessage{User: u, Text: "reply", ThreadTS: root.Message.TS})
		core.WaitFor(t, "reply from "+u, func(r chattest.Record) bool { return len(r.Messages) == i+2 })
	}
	want := map[string]string{"U0001": "Alice", "U0002": "Bob Paulsen", "U0003": "carol", "U0004": ""}
	for _, m := range core.Record().Messages {
		if got := m.User.Name; got != want[m.User.ID] {
			t.Errorf("message from %s carries name %q, want %q", m.User.ID, got, want[m.User.ID])
		}
	}
	snap := env.Fake.Snapshot()
	for u := range want {
		if n := usersInfoCalls(snap, u); n != 1 {
			t.Errorf("users.info called %d times for %s, want once", n, u)
		}
	}
}

// TestNamesExpireAndFailuresFallBack: a failed users.info (here the
// missing users:read scope) names the user by ID without failing the
// message, says in the log what to fix, and is not repeated for every
// message; after a minute it is tried again. A name is kept for an hour,
// so a changed display name shows after that.
func TestNamesExpireAndFailuresFallBack(t *testing.T) {
	ctx := testCtx(t)
	env, core, clock, logs := namingEnv(t)
	env.Fake.InjectFault("users.info", 1, fakeslack.Fault{Error: "missing_scope"})
	root := mustSend(t, ctx, env, fakeslack.UserMessage{User: "U0001", Text: env.Fake.Mention() + " hello"})
	n := 0
	say := func(want string) {
		t.Helper()
		mustSend(t, ctx, env, fakeslack.UserMessage{User: "U0001", Text: "more", ThreadTS: root.Message.TS})
		n++
		r := core.WaitFor(t, "the reply", func(r chattest.Record) bool { return len(r.Messages) == n+1 })
		if m := r.Messages[n]; m.User.ID != "U0001" || m.User.Name != want {
			t.Fatalf("message %d: user %+v, want U0001 named %q", n+1, m.User, want)
		}
	}
	r := core.WaitFor(t, "the mention", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	if u := r.Messages[0].User; u.ID != "U0001" || u.Name != "" {
		t.Fatalf("with users.info failing, the mention's user is %+v, want U0001 by ID", u)
	}
	if !strings.Contains(logs.String(), "users:read") {
		t.Errorf("the log does not say which scope is missing:\n%s", logs)
	}
	say("") // the failure is remembered
	if c := usersInfoCalls(env.Fake.Snapshot(), "U0001"); c != 1 {
		t.Fatalf("users.info called %d times after a failure and a second message, want once", c)
	}
	clock.advance(time.Minute)
	say("Alice")
	env.Fake.SetUser(fakeslack.User{ID: "U0001", Name: "alice", RealName: "Alice Liddell", DisplayName: "Alice L."})
	clock.advance(59 * time.Minute)
	say("Alice") // still cached
	clock.advance(time.Minute)
	say("Alice L.")
	if c := usersInfoCalls(env.Fake.Snapshot(), "U0001"); c != 3 {
		t.Fatalf("users.info called %d times, want 3 (the failure, after it, after the hour)", c)
	}
}

// TestClicksAndCommandsCarryDisplayNames: button clicks, modal
// submissions and slash commands name the user by display name too.
func TestClicksAndCommandsCarryDisplayNames(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{Fake: fakeslack.Options{Users: namedUsers}})
	core := newRecCore()
	_, card := sessionWithApproval(t, ctx, env, core)

	click, err := env.Fake.ClickButton(ctx, fakeslack.Click{User: "U0002", Channel: "C0001", MessageTS: card, ActionID: chat.ActionReject})
	if err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "the reject modal", func(s fakeslack.Snapshot) bool { return s.Acked(click) && len(s.CallsTo("views.open")) == 1 })
	views := env.Fake.Views()
	if len(views) != 1 {
		t.Fatalf("views = %+v", views)
	}
	if _, err := env.Fake.SubmitView(ctx, views[0].ID, "U0002", map[string]string{"reason_input": "not now"}); err != nil {
		t.Fatal(err)
	}
	r := core.WaitFor(t, "the rejection", func(r chattest.Record) bool { return len(r.Actions) == 1 })
	if u := r.Actions[0].User; u.ID != "U0002" || u.Name != "Bob Paulsen" {
		t.Errorf("modal submission user = %+v, want U0002 named Bob Paulsen", u)
	}

	if _, err := env.Fake.SendSlashCommand(ctx, fakeslack.SlashCommand{User: "U0003", Command: "/sandbot", Text: "help"}); err != nil {
		t.Fatal(err)
	}
	r = core.WaitFor(t, "the command", func(r chattest.Record) bool { return len(r.Commands) == 1 })
	if u := r.Commands[0].User; u.ID != "U0003" || u.Name != "carol" {
		t.Errorf("slash command user = %+v, want U0003 named carol", u)
	}

	approve, err := env.Fake.ClickButton(ctx, fakeslack.Click{User: "U0001", Channel: "C0001", MessageTS: card, ActionID: chat.ActionApprove})
	if err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "the click's ack", func(s fakeslack.Snapshot) bool { return s.Acked(approve) })
	r = core.WaitFor(t, "the approval", func(r chattest.Record) bool { return len(r.Actions) == 2 })
	if u := r.Actions[1].User; u.ID != "U0001" || u.Name != "Alice" {
		t.Errorf("click user = %+v, want U0001 named Alice", u)
	}
	if n := usersInfoCalls(env.Fake.Snapshot(), "U0002"); n != 1 {
		t.Errorf("users.info called %d times for the user who clicked and submitted, want once", n)
	}
}

// TestLogRecordsCarryPlatformOnce: every record the adapter logs names
// its platform, once (it adds the attribute itself; callers must not).
func TestLogRecordsCarryPlatformOnce(t *testing.T) {
	ctx := testCtx(t)
	logs := &lockedBuffer{}
	env := slacktest.New(t, slacktest.Options{Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	env.Run(newRecCore())
	env.Fake.InjectFault("users.info", 1, fakeslack.Fault{Error: "ratelimited"})
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: env.Fake.Mention() + " hi"})
	idle(t, ctx, env)
	env.Stop()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("expected the adapter's start-up and users.info records, got:\n%s", logs)
	}
	for _, l := range lines {
		if n := strings.Count(l, "platform="); n != 1 || !strings.Contains(l, "platform=slack") {
			t.Errorf("record carries platform %d times, want once (platform=slack): %s", n, l)
		}
	}
}
