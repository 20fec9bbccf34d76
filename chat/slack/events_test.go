package slack_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

func TestMentionStartsOneTurn(t *testing.T) {
	ctx := testCtx(t)
	// The acks wait for the handoff (see TestAckWaitsForTheHandoff); the
	// bound is out of the way here.
	env := slacktest.New(t, slacktest.Options{Config: func(c *slack.Config) { c.AckWithin = time.Hour }})
	core := newRecCore()
	release := make(chan struct{})
	core.OnMessage = func(ctx context.Context, p chat.Poster, m chat.Message) error {
		select { // the core is slow (Temporal)
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := p.Post(ctx, m.Thread, chat.Card{Title: "🤔 Thinking"})
		return err
	}
	env.Run(core)

	sent, err := env.Fake.SendMessage(ctx, fakeslack.UserMessage{Text: env.Fake.Mention() + "  please fix &lt;the&gt; build "})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Envelopes) != 2 {
		t.Fatalf("a channel mention is delivered twice (app_mention + message), got %d envelopes", len(sent.Envelopes))
	}
	st := core.WaitFor(t, "the message", func(s chattest.Record) bool { return len(s.Messages) >= 1 })
	close(release)
	waitFake(t, ctx, env, "the acks", func(s fakeslack.Snapshot) bool { return s.Acked(sent.Envelopes...) })
	idle(t, ctx, env)
	if n := len(core.Record().Messages); n != 1 {
		t.Fatalf("one user message reached the core %d times", n)
	}
	m := st.Messages[0]
	want := chat.Thread{Platform: slack.Platform, Workspace: "T0001", Channel: "C0001", Thread: sent.Message.TS}
	if m.Thread != want || m.User.ID != "U0001" || m.Text != "please fix <the> build" || m.EventID != "slack:C0001:"+sent.Message.TS {
		t.Fatalf("message = %+v", m)
	}
	snap := waitFake(t, ctx, env, "the status post", func(s fakeslack.Snapshot) bool { return len(s.BotMessages("C0001", sent.Message.TS)) == 1 })
	if post := snap.CallsTo("chat.postMessage")[0]; post.Form.Get("thread_ts") != sent.Message.TS {
		t.Fatalf("status not posted in the thread: %v", post.Form)
	}

	// Slack retries the events (same event_id): still one turn.
	for _, env1 := range sent.Envelopes {
		id, err := env.Fake.Redeliver(ctx, env1)
		if err != nil {
			t.Fatal(err)
		}
		waitFake(t, ctx, env, "redelivery ack", func(s fakeslack.Snapshot) bool { return s.Acked(id) })
	}
	idle(t, ctx, env)
	if n := len(core.Record().Messages); n != 1 {
		t.Fatalf("redelivered events reached the core: %d messages", n)
	}
}

func TestMessagesThatNeverStartTurns(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	core := newRecCore()
	env.Run(core)
	f := env.Fake
	root := mustSend(t, ctx, env, fakeslack.UserMessage{Text: f.Mention() + " start"}).Message
	core.WaitFor(t, "the mention", func(s chattest.Record) bool { return len(s.Messages) == 1 })

	mustSend(t, ctx, env, fakeslack.UserMessage{BotID: "BOTHER", SubType: "bot_message", Text: f.Mention() + " I am a bot", ThreadTS: root.TS})
	mustSend(t, ctx, env, fakeslack.UserMessage{User: "U0009", BotID: "BAPP", Text: "app bot in thread", ThreadTS: root.TS})
	mustSend(t, ctx, env, fakeslack.UserMessage{User: "UBOT", Text: "my own message", ThreadTS: root.TS})
	mustSend(t, ctx, env, fakeslack.UserMessage{SubType: "channel_join", Text: "joined", ThreadTS: root.TS})
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: "top-level chatter without a mention"})
	edit, err := f.EditPayload("C0001", root.TS, f.Mention()+" start (edited)")
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.SendEvent(ctx, edit)
	if err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "edit ack", func(s fakeslack.Snapshot) bool { return s.Acked(id) })
	idle(t, ctx, env)
	if st := core.Record(); len(st.Messages) != 1 {
		t.Fatalf("bot messages, edits or chatter reached the core: %+v", st.Messages[1:])
	}
}

func TestThreadRepliesContinueSession(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	core := newRecCore()
	env.Run(core)
	f := env.Fake
	root := mustSend(t, ctx, env, fakeslack.UserMessage{Text: f.Mention() + " start"}).Message
	core.WaitFor(t, "the mention", func(s chattest.Record) bool { return len(s.Messages) == 1 })

	reply := mustSend(t, ctx, env, fakeslack.UserMessage{User: "U0002", Text: "and also the docs", ThreadTS: root.TS})
	if len(reply.Envelopes) != 1 {
		t.Fatalf("a reply without a mention is one message event, got %d", len(reply.Envelopes))
	}
	st := core.WaitFor(t, "the reply", func(s chattest.Record) bool { return len(s.Messages) == 2 })
	if m := st.Messages[1]; m.Thread.Thread != root.TS || m.Text != "and also the docs" || m.User.ID != "U0002" {
		t.Fatalf("reply = %+v", m)
	}
	if n := len(env.Fake.Snapshot().CallsTo("conversations.replies")); n != 0 {
		t.Fatalf("a thread this process saw start was looked up %d times", n)
	}

	// A thread nobody mentioned the bot in stays quiet.
	other := f.Say(fakeslack.UserMessage{Text: "unrelated discussion"}).Message
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: "reply in unrelated thread", ThreadTS: other.TS})
	idle(t, ctx, env)
	if n := len(core.Record().Messages); n != 2 {
		t.Fatalf("a reply in a non-session thread reached the core (%d messages)", n)
	}

	// A command typed after a mention in the thread goes to the core as text
	// (the core parses it).
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: f.Mention() + " /backend docker", ThreadTS: root.TS})
	st = core.WaitFor(t, "the command", func(s chattest.Record) bool { return len(s.Messages) == 3 })
	if m := st.Messages[2]; m.Text != "/backend docker" || m.Thread.Thread != root.TS {
		t.Fatalf("command message = %+v", m)
	}
}

func TestRequireMention(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{Config: func(c *slack.Config) { c.RequireMention = true }})
	core := newRecCore()
	env.Run(core)
	root := mustSend(t, ctx, env, fakeslack.UserMessage{Text: env.Fake.Mention() + " start"}).Message
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: "no mention", ThreadTS: root.TS})
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: env.Fake.Mention() + " with mention", ThreadTS: root.TS})
	idle(t, ctx, env)
	var texts []string
	for _, m := range core.Record().Messages {
		texts = append(texts, m.Text)
	}
	slices.Sort(texts) // events are handled concurrently
	if strings.Join(texts, "|") != "start|with mention" {
		t.Fatalf("messages reaching the core: %q", texts)
	}
}

func TestSessionThreadsAfterRestart(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	f := env.Fake
	// Threads from before the restart: one started by a mention, one where
	// only the bot replied (a fork thread), one without the bot.
	mentioned := f.Say(fakeslack.UserMessage{Text: f.Mention() + " earlier"}).Message
	forkRoot := f.Say(fakeslack.UserMessage{User: "UBOT", BotID: "BBOT", Text: "🍴 fork"}).Message
	plain := f.Say(fakeslack.UserMessage{Text: "no bot here"}).Message
	core := newRecCore()
	env.Run(core)

	for range 3 {
		mustSend(t, ctx, env, fakeslack.UserMessage{Text: "more", ThreadTS: mentioned.TS})
	}
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: "in fork", ThreadTS: forkRoot.TS})
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: "chatter", ThreadTS: plain.TS})
	idle(t, ctx, env)
	var threads []string
	for _, m := range core.Record().Messages {
		threads = append(threads, m.Thread.Thread)
	}
	slices.Sort(threads) // events are handled concurrently
	want := []string{mentioned.TS, mentioned.TS, mentioned.TS, forkRoot.TS}
	slices.Sort(want)
	if got, want := strings.Join(threads, ","), strings.Join(want, ","); got != want {
		t.Fatalf("threads reaching the core = %s, want %s", got, want)
	}
	if n := len(f.Snapshot().CallsTo("conversations.replies")); n != 3 {
		t.Fatalf("conversations.replies called %d times, want once per thread (3)", n)
	}
}

func TestSessionFinderIsPreferred(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	f := env.Fake
	known := f.Say(fakeslack.UserMessage{Text: "root without mention"}).Message
	core := &findingCore{Core: newRecCore(), sessions: map[string]bool{known.TS: true}}
	env.Run(core)
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: "continue", ThreadTS: known.TS})
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: "again", ThreadTS: known.TS})
	idle(t, ctx, env)
	if n := len(core.Record().Messages); n != 2 {
		t.Fatalf("%d messages reached the core, want 2", n)
	}
	n := core.asked.Load()
	if n != 1 || len(f.Snapshot().CallsTo("conversations.replies")) != 0 {
		t.Fatalf("HasSession asked %d times (want 1, then cached); replies calls %d", n, len(f.Snapshot().CallsTo("conversations.replies")))
	}
}

func TestDirectMessages(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	core := newRecCore()
	env.Run(core)
	dm := mustSend(t, ctx, env, fakeslack.UserMessage{Channel: "D0001", ChannelType: "im", Text: "hello, no mention needed"})
	if len(dm.Envelopes) != 1 {
		t.Fatalf("a DM is one message event, got %d", len(dm.Envelopes))
	}
	mustSend(t, ctx, env, fakeslack.UserMessage{Channel: "D0001", ChannelType: "im", Text: "follow-up", ThreadTS: dm.Message.TS})
	st := core.WaitFor(t, "both DMs", func(s chattest.Record) bool { return len(s.Messages) == 2 })
	for _, m := range st.Messages {
		if m.Thread.Channel != "D0001" || m.Thread.Thread != dm.Message.TS {
			t.Fatalf("DM message = %+v", m)
		}
	}
}

func TestAllowedUsersAndChannels(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{Config: func(c *slack.Config) {
		c.AllowedUsers = []string{"U0001"}
		c.AllowedChannels = []string{"C0001"}
		c.Approvers = []string{"U0001"}
	}})
	core := newRecCore()
	env.Run(core)
	f := env.Fake
	mustSend(t, ctx, env, fakeslack.UserMessage{User: "U0002", Text: f.Mention() + " let me in"})
	mustSend(t, ctx, env, fakeslack.UserMessage{User: "U0001", Channel: "C0BAD", Text: f.Mention() + " here?"})
	snap := waitFake(t, ctx, env, "two refusals", func(s fakeslack.Snapshot) bool { return len(s.CallsTo("chat.postEphemeral")) == 2 })
	idle(t, ctx, env)
	if n := len(core.Record().Messages); n != 0 {
		t.Fatalf("refused messages reached the core: %d", n)
	}
	refusals := map[string]string{} // user/channel → text
	for _, c := range snap.CallsTo("chat.postEphemeral") {
		refusals[c.Form.Get("user")+"/"+c.Form.Get("channel")] = c.Text()
	}
	if !strings.Contains(refusals["U0002/C0001"], "allowed users") || !strings.Contains(refusals["U0001/C0BAD"], "not enabled in this channel") {
		t.Fatalf("refusals = %q", refusals)
	}
	mustSend(t, ctx, env, fakeslack.UserMessage{User: "U0001", Text: f.Mention() + " ok"})
	st := core.WaitFor(t, "the allowed message", func(s chattest.Record) bool { return len(s.Messages) == 1 })
	if !st.Messages[0].Admin {
		t.Fatal("a configured approver's message is not marked Admin")
	}
}

func TestResumeAfterConnect(t *testing.T) {
	env := slacktest.New(t, slacktest.Options{})
	core := newRecCore()
	env.Run(core)
	core.WaitFor(t, "a resume", func(s chattest.Record) bool { return len(s.Resumed) == 1 })
	env.Restart(core)
	st := core.WaitFor(t, "a second resume", func(s chattest.Record) bool { return len(s.Resumed) == 2 })
	if st.Resumed[1] != slack.Platform {
		t.Fatalf("resumed %q", st.Resumed)
	}
}

func TestSocketReconnects(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	core := newRecCore()
	env.Run(core)
	f := env.Fake
	f.Disconnect("refresh_requested")
	waitFake(t, ctx, env, "a reconnect after a refresh request", func(s fakeslack.Snapshot) bool { return s.Connections == 2 && s.Open == 1 })
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: f.Mention() + " after refresh"})
	core.WaitFor(t, "the first message", func(s chattest.Record) bool { return len(s.Messages) == 1 })
	f.DropConnections()
	waitFake(t, ctx, env, "a reconnect after a dropped socket", func(s fakeslack.Snapshot) bool { return s.Connections == 3 && s.Open == 1 })
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: f.Mention() + " after drop"})
	st := core.WaitFor(t, "both messages", func(s chattest.Record) bool { return len(s.Messages) == 2 })
	if st.Messages[0].Text != "after refresh" || st.Messages[1].Text != "after drop" {
		t.Fatalf("messages = %+v", st.Messages)
	}
}

// TestAckWaitsForTheHandoff: an event is acknowledged only once its work
// has handed it to the session, so a bot that dies before then leaves it
// unacknowledged and Slack delivers it again, to whichever replica is
// connected. Acking first (as the adapter once did) told Slack the message
// was handled when it was about to be lost.
func TestAckWaitsForTheHandoff(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{Config: func(c *slack.Config) { c.AckWithin = time.Hour }})
	core := newRecCore()
	release := make(chan struct{})
	core.OnMessage = func(ctx context.Context, _ chat.Poster, _ chat.Message) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	env.Run(core)
	// A DM: one event, one envelope.
	sent, err := env.Fake.SendMessage(ctx, fakeslack.UserMessage{Channel: "D0001", ChannelType: "im", Text: "fix the build"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Envelopes) != 1 {
		t.Fatalf("a DM is one envelope, got %d", len(sent.Envelopes))
	}
	core.WaitFor(t, "the message", func(s chattest.Record) bool { return len(s.Messages) == 1 })
	if env.Fake.Snapshot().Acked(sent.Envelopes...) {
		t.Fatal("the message was acknowledged before it was handed to the session: if the bot died now, Slack would not deliver it again and it would be lost")
	}
	close(release)
	waitFake(t, ctx, env, "the acks after the handoff", func(s fakeslack.Snapshot) bool { return s.Acked(sent.Envelopes...) })
}

// TestClickAckWaitsForTheDecision: the same for a button: a bot killed
// before the decision reached the session leaves the click unacknowledged,
// so Slack shows the approver that the app did not respond and they click
// again, instead of the approval vanishing.
func TestClickAckWaitsForTheDecision(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{Config: func(c *slack.Config) { c.AckWithin = time.Hour }})
	core := newRecCore()
	release := make(chan struct{})
	core.OnAction = func(ctx context.Context, _ chat.Poster, _ chat.Action) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	_, card := sessionWithApproval(t, ctx, env, core)
	id, err := env.Fake.ClickButton(ctx, fakeslack.Click{User: "U0001", Channel: "C0001", MessageTS: card, ActionID: chat.ActionApprove})
	if err != nil {
		t.Fatal(err)
	}
	core.WaitFor(t, "the click", func(s chattest.Record) bool { return len(s.Actions) == 1 })
	if env.Fake.Snapshot().Acked(id) {
		t.Fatal("the click was acknowledged before its decision reached the session")
	}
	close(release)
	waitFake(t, ctx, env, "the click's ack after the decision", func(s fakeslack.Snapshot) bool { return s.Acked(id) })
}

// TestSlowHandoffIsNotAcknowledged: an event whose handoff takes longer
// than AckWithin is not acknowledged at all, so Slack sends it again (the
// workflow recognises the event ID) instead of the ack claiming a message
// that a bot dying next would lose; the work still finishes.
func TestSlowHandoffIsNotAcknowledged(t *testing.T) {
	ctx := testCtx(t)
	logs := &logBuf{}
	env := slacktest.New(t, slacktest.Options{Config: func(c *slack.Config) { c.AckWithin = time.Millisecond },
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	core := newRecCore()
	release := make(chan struct{})
	core.OnMessage = func(ctx context.Context, _ chat.Poster, _ chat.Message) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	env.Run(core)
	sent, err := env.Fake.SendMessage(ctx, fakeslack.UserMessage{Channel: "D0001", ChannelType: "im", Text: "fix the build"})
	if err != nil {
		t.Fatal(err)
	}
	core.WaitFor(t, "the message", func(s chattest.Record) bool { return len(s.Messages) == 1 })
	// The work is held until the adapter has given up on acknowledging.
	for !strings.Contains(logs.String(), "not acknowledged") {
		select {
		case <-ctx.Done():
			t.Fatalf("the adapter never gave up on acknowledging; logs: %s", logs.String())
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
	idle(t, ctx, env)
	if env.Fake.Snapshot().Acked(sent.Envelopes...) {
		t.Fatal("an event handed on later than AckWithin was acknowledged")
	}
}
