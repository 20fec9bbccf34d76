package slack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

const approvalValue = "1.s.T0001.C0001.1700000000%2E000100.call_abc"

// sessionWithApproval starts a session whose core posts an approval card,
// and returns the thread root and the card's ts.
func sessionWithApproval(t *testing.T, ctx context.Context, env *slacktest.Env, core *chattest.Core) (root, card string) {
	t.Helper()
	core.OnMessage = func(ctx context.Context, p chat.Poster, m chat.Message) error {
		_, err := p.Post(ctx, m.Thread, approvalCard(approvalValue))
		return err
	}
	env.Run(core)
	sent := mustSend(t, ctx, env, fakeslack.UserMessage{Text: env.Fake.Mention() + " clean up"})
	snap := waitFake(t, ctx, env, "the approval card", func(s fakeslack.Snapshot) bool { return len(s.BotMessages("C0001", sent.Message.TS)) == 1 })
	return sent.Message.TS, snap.BotMessages("C0001", sent.Message.TS)[0].TS
}

func TestApproveClick(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	core := newRecCore()
	core.OnAction = func(ctx context.Context, p chat.Poster, a chat.Action) error {
		return a.Reply(ctx, "You may not approve this; ask "+p.(chat.Mentioner).Mention(chat.User{ID: "U0001"}))
	}
	root, card := sessionWithApproval(t, ctx, env, core)

	id, err := env.Fake.ClickButton(ctx, fakeslack.Click{User: "U0002", Channel: "C0001", MessageTS: card, ActionID: chat.ActionApproveAlways})
	if err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "the click's ack", func(s fakeslack.Snapshot) bool { return s.Acked(id) })
	st := core.WaitFor(t, "the action", func(s chattest.Record) bool { return len(s.Actions) == 1 })
	a := st.Actions[0]
	want := chat.Thread{Platform: slack.Platform, Workspace: "T0001", Channel: "C0001", Thread: root}
	if a.ID != chat.ActionApproveAlways || a.Value != approvalValue || a.User.ID != "U0002" || a.User.Name != "u0002" || a.Thread != want {
		t.Fatalf("action = %+v", a)
	}
	snap := waitFake(t, ctx, env, "the ephemeral answer", func(s fakeslack.Snapshot) bool { return len(s.CallsTo("chat.postEphemeral")) == 1 })
	eph := snap.CallsTo("chat.postEphemeral")[0]
	if eph.Form.Get("user") != "U0002" || eph.Form.Get("thread_ts") != root || !strings.Contains(eph.Text(), "ask <@U0001>") {
		t.Fatalf("ephemeral reply = %v", eph.Form)
	}
}

func TestRejectWithReason(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	core := newRecCore()
	root, card := sessionWithApproval(t, ctx, env, core)

	id, err := env.Fake.ClickButton(ctx, fakeslack.Click{User: "U0001", Channel: "C0001", MessageTS: card, ActionID: chat.ActionReject})
	if err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "views.open", func(s fakeslack.Snapshot) bool { return len(s.CallsTo("views.open")) == 1 && s.Acked(id) })
	idle(t, ctx, env)
	if n := len(core.Record().Actions); n != 0 {
		t.Fatal("reject reached the core before the modal was submitted")
	}
	views := env.Fake.Views()
	if len(views) != 1 || views[0].CallbackID != "sandbot_reject" || !strings.Contains(views[0].PrivateMetadata, approvalValue) {
		t.Fatalf("views = %+v", views)
	}
	if _, err := env.Fake.SubmitView(ctx, views[0].ID, "U0001", map[string]string{"reason_input": "  deletes the cache; use make clean  "}); err != nil {
		t.Fatal(err)
	}
	st := core.WaitFor(t, "the rejection", func(s chattest.Record) bool { return len(s.Actions) == 1 })
	a := st.Actions[0]
	if a.ID != chat.ActionReject || a.Value != approvalValue || a.Reason != "deletes the cache; use make clean" ||
		a.Thread.Thread != root || a.User.ID != "U0001" || a.Reply == nil {
		t.Fatalf("rejection = %+v", a)
	}
	// Submitting with no reason is allowed (the field is optional).
	if _, err := env.Fake.ClickButton(ctx, fakeslack.Click{User: "U0001", Channel: "C0001", MessageTS: card, ActionID: chat.ActionReject}); err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "a second modal", func(s fakeslack.Snapshot) bool { return len(s.CallsTo("views.open")) == 2 })
	views = env.Fake.Views()
	if _, err := env.Fake.SubmitView(ctx, views[1].ID, "U0001", nil); err != nil {
		t.Fatal(err)
	}
	st = core.WaitFor(t, "the second rejection", func(s chattest.Record) bool { return len(s.Actions) == 2 })
	if st.Actions[1].Reason != "" {
		t.Fatalf("reason = %q", st.Actions[1].Reason)
	}
}

func TestRejectWhenModalCannotOpen(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{Fake: fakeslack.Options{TriggerTTL: time.Nanosecond}})
	core := newRecCore()
	_, card := sessionWithApproval(t, ctx, env, core)
	if _, err := env.Fake.ClickButton(ctx, fakeslack.Click{User: "U0001", Channel: "C0001", MessageTS: card, ActionID: chat.ActionReject}); err != nil {
		t.Fatal(err)
	}
	st := core.WaitFor(t, "a rejection without reason", func(s chattest.Record) bool { return len(s.Actions) == 1 })
	if st.Actions[0].ID != chat.ActionReject || st.Actions[0].Reason != "" {
		t.Fatalf("action = %+v", st.Actions[0])
	}
	if calls := env.Fake.Snapshot().AllCallsTo("views.open"); len(calls) != 1 || calls[0].Error != "expired_trigger_id" {
		t.Fatalf("views.open calls = %+v", calls)
	}
}

func TestSlashCommands(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	core := newRecCore()
	core.OnCommand = func(ctx context.Context, p chat.Poster, c chattest.CommandCall) (chat.Reply, error) {
		if c.Cmd.Name == chat.CmdSessions {
			return chat.Reply{Text: "**Running sessions**\n- " + p.(chat.ThreadLinker).ThreadLink(chat.Thread{Channel: "C0001", Thread: "1700000000.000100"}), Ephemeral: true}, nil
		}
		return chat.Reply{Text: "Stopped turn 2."}, nil
	}
	env.Run(core)
	f := env.Fake
	root := f.Say(fakeslack.UserMessage{Text: f.Mention() + " earlier"}).Message

	send := func(text string) fakeslack.Hook {
		t.Helper()
		before := len(f.Snapshot().Hooks)
		id, err := f.SendSlashCommand(ctx, fakeslack.SlashCommand{Command: "/sandbot", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		snap := waitFake(t, ctx, env, "the answer to "+text, func(s fakeslack.Snapshot) bool { return s.Acked(id) && len(s.Hooks) > before })
		return snap.Hooks[len(snap.Hooks)-1]
	}
	h := send("sessions")
	if !strings.Contains(string(h.Body), `"response_type":"ephemeral"`) || !strings.Contains(h.Text(), "*Running sessions*") ||
		!strings.Contains(h.Text(), "<https://fake.slack.com/archives/C0001/p1700000000000100|thread>") {
		t.Fatalf("sessions answer = %s", h.Body)
	}
	st := core.Record()
	if c := st.Commands[0]; c.Cmd.Name != chat.CmdSessions || c.Thread.Thread != "" || c.Thread.Channel != "C0001" || c.User.ID != "U0001" {
		t.Fatalf("sessions command = %+v", c)
	}

	if h := send("stop"); !strings.Contains(h.Text(), "thread link") {
		t.Fatalf("stop without a session answered %q", h.Text())
	}
	if h := send("frobnicate"); !strings.Contains(h.Text(), "no command /frobnicate") {
		t.Fatalf("unknown command answered %q", h.Text())
	}
	if n := len(core.Record().Commands); n != 1 {
		t.Fatalf("bad commands reached the core: %d", n)
	}

	// Acting on a session picked from the list: its thread link.
	link := "https://fake.slack.com/archives/C0001/p" + strings.ReplaceAll(root.TS, ".", "")
	before := len(f.Snapshot().Calls)
	id, err := f.SendSlashCommand(ctx, fakeslack.SlashCommand{Command: "/sandbot", Text: "stop <" + link + ">"})
	if err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "the stop reply in the thread", func(s fakeslack.Snapshot) bool {
		return s.Acked(id) && len(s.Calls) > before && len(s.BotMessages("C0001", root.TS)) == 1
	})
	st = core.Record()
	if c := st.Commands[1]; c.Cmd.Name != chat.CmdStop || c.Thread.Thread != root.TS || len(c.Cmd.Args) != 0 {
		t.Fatalf("stop command = %+v", c)
	}
}

func TestForkShortcut(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	core := newRecCore()
	core.OnCommand = func(ctx context.Context, p chat.Poster, c chattest.CommandCall) (chat.Reply, error) {
		to, err := p.(chat.ThreadStarter).StartThread(ctx, c.Thread, "Fork of clean up")
		if err != nil {
			return chat.Reply{}, err
		}
		return chat.Reply{Text: "Forked into " + p.(chat.ThreadLinker).ThreadLink(to)}, nil
	}
	root, card := sessionWithApproval(t, ctx, env, core)
	if _, err := env.Fake.UseShortcut(ctx, slack.ForkShortcut, "U0003", "C0001", card); err != nil {
		t.Fatal(err)
	}
	st := core.WaitFor(t, "the fork command", func(s chattest.Record) bool { return len(s.Commands) == 1 })
	if c := st.Commands[0]; c.Cmd.Name != chat.CmdFork || c.Thread.Thread != root || c.User.ID != "U0003" {
		t.Fatalf("fork command = %+v", c)
	}
	snap := waitFake(t, ctx, env, "the fork reply", func(s fakeslack.Snapshot) bool { return len(s.BotMessages("C0001", root)) == 2 })
	var forkRoot fakeslack.Message
	for _, m := range snap.Messages["C0001"] {
		if m.BotID != "" && m.ThreadTS == "" {
			forkRoot = m
		}
	}
	if !strings.Contains(forkRoot.Text, "Fork of clean up") {
		t.Fatalf("no top-level fork message: %+v", snap.Messages["C0001"])
	}
	reply := snap.BotMessages("C0001", root)[1]
	if !strings.Contains(reply.Text, "/p"+strings.ReplaceAll(forkRoot.TS, ".", "")) {
		t.Fatalf("fork reply %q does not link the fork thread", reply.Text)
	}
	// A reply in the new fork thread continues it without a mention.
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: "work on the fork", ThreadTS: forkRoot.TS})
	st = core.WaitFor(t, "a message in the fork", func(s chattest.Record) bool { return len(s.Messages) == 2 })
	if st.Messages[1].Thread.Thread != forkRoot.TS {
		t.Fatalf("fork message thread = %+v", st.Messages[1].Thread)
	}
}

func TestHTTPMode(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{Config: func(c *slack.Config) { c.Mode = slack.ModeHTTP }})
	core := newRecCore()
	release := make(chan struct{})
	core.OnMessage = func(ctx context.Context, p chat.Poster, m chat.Message) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := p.Post(ctx, m.Thread, approvalCard(approvalValue))
		return err
	}
	env.Run(core)
	f := env.Fake
	events := env.HTTPBase() + "/slack/events"

	r, err := f.PostEvent(ctx, events, fakeslack.URLVerification("chal-123"), fakeslack.Signing{})
	if err != nil || r.Status != 200 || r.Body != "chal-123" {
		t.Fatalf("url_verification = %+v %v", r, err)
	}
	said := f.Say(fakeslack.UserMessage{Text: f.Mention() + " over http"})
	for _, bad := range []fakeslack.Signing{{Secret: "wrong"}, {Timestamp: time.Now().Add(-6 * time.Minute)}, {Unsigned: true}} {
		if r, err := f.PostEvent(ctx, events, said.Payloads[0], bad); err != nil || r.Status != 401 {
			t.Fatalf("request signed %+v: %+v %v", bad, r, err)
		}
	}
	if r, _ := f.PostSlashCommand(ctx, env.HTTPBase()+"/slack/commands", fakeslack.SlashCommand{Command: "/sandbot", Text: "help"}, fakeslack.Signing{Secret: "wrong"}); r.Status != 401 {
		t.Fatalf("forged command: %+v", r)
	}
	idle(t, ctx, env)
	if st := core.Record(); len(st.Messages)+len(st.Commands) != 0 {
		t.Fatalf("unverified requests were processed: %+v", st)
	}

	// Verified. The first event's work is stuck on the core (Temporal):
	// past AckWithin (2 s) it is answered 503, so Slack sends it again rather
	// than lose it if this bot dies now. The second is the same message
	// (its message event), recognised at once: 200.
	for i, p := range said.Payloads {
		want := 200
		if i == 0 {
			want = 503
		}
		if r, err := f.PostEvent(ctx, events, p, fakeslack.Signing{}); err != nil || r.Status != want {
			t.Fatalf("signed event %d: %+v %v, want status %d", i, r, err, want)
		}
	}
	if r, _ := f.PostEvent(ctx, events, said.Payloads[0], fakeslack.Signing{Retry: 1}); r.Status != 200 {
		t.Fatalf("retried event: %+v", r)
	}
	core.WaitFor(t, "the message", func(s chattest.Record) bool { return len(s.Messages) >= 1 })
	close(release)
	snap := waitFake(t, ctx, env, "the card", func(s fakeslack.Snapshot) bool { return len(s.BotMessages("C0001", said.Message.TS)) == 1 })
	idle(t, ctx, env)
	if n := len(core.Record().Messages); n != 1 {
		t.Fatalf("app_mention + message + retry gave %d turns", n)
	}

	card := snap.BotMessages("C0001", said.Message.TS)[0]
	click, err := f.ClickPayload(fakeslack.Click{User: "U0002", Channel: "C0001", MessageTS: card.TS, ActionID: chat.ActionApprove})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := f.PostInteraction(ctx, env.HTTPBase()+"/slack/interactivity", click, fakeslack.Signing{}); r.Status != 200 {
		t.Fatalf("click: %+v", r)
	}
	st := core.WaitFor(t, "the click", func(s chattest.Record) bool { return len(s.Actions) == 1 })
	if st.Actions[0].ID != chat.ActionApprove || st.Actions[0].Thread.Thread != said.Message.TS {
		t.Fatalf("action = %+v", st.Actions[0])
	}
	if r, _ := f.PostSlashCommand(ctx, env.HTTPBase()+"/slack/commands", fakeslack.SlashCommand{Command: "/sandbot", Text: "help"}, fakeslack.Signing{}); r.Status != 200 {
		t.Fatalf("command: %+v", r)
	}
	snap = waitFake(t, ctx, env, "the help answer", func(s fakeslack.Snapshot) bool { return len(s.Hooks) == 1 })
	var body map[string]any
	if err := json.Unmarshal(snap.Hooks[0].Body, &body); err != nil || body["text"] != "ok: help" {
		t.Fatalf("help answer = %s", snap.Hooks[0].Body)
	}
}
