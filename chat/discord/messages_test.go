package discord_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

func TestStartRegistersCommandsAndResumes(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	start(t, config(f), rec)
	rec.WaitFor(t, "resume", func(r chattest.Record) bool { return len(r.Resumed) == 1 && r.Resumed[0] == discord.Platform })
	cmds := f.Commands(fakediscord.DefaultGuildID)
	names := map[string]json.RawMessage{}
	for _, c := range cmds {
		var v struct{ Name string }
		_ = json.Unmarshal(c, &v)
		names[v.Name] = c
	}
	for _, want := range []string{"fork", "backend", "stop", "status", "sessions", "destroy", "help"} {
		if names[want] == nil {
			t.Errorf("/%s not registered (got %d commands)", want, len(cmds))
		}
	}
	if !strings.Contains(string(names["backend"]), `"choices":[{"name":"local","value":"local"},{"name":"docker","value":"docker"}]`) {
		t.Errorf("/backend choices: %s", names["backend"])
	}
	if len(f.Commands("")) != 0 {
		t.Error("commands registered globally although GuildID is set")
	}
}

func TestMentionOpensThreadThatIsTheSession(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	start(t, config(f), rec)

	um, err := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"fix the flaky test\nin pkg/x")
	if err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "first message", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	m := rec.Record().Messages[0]
	want := chat.Thread{Platform: "discord", Workspace: fakediscord.DefaultGuildID, Channel: fakediscord.DefaultChannelID, Thread: um.ID}
	if m.Thread != want || m.EventID != um.ID || m.Text != "fix the flaky test\nin pkg/x" {
		t.Fatalf("message = %+v", m)
	}
	if m.User.ID != alice.User.ID || m.User.Name != "alice" || len(m.User.Roles) != 1 || !m.Admin {
		t.Fatalf("user = %+v admin=%v (alice holds the approver role only if configured)", m.User, m.Admin)
	}
	th := f.Threads(fakediscord.DefaultChannelID)
	if len(th) != 1 || th[0].ID != um.ID || th[0].Name != "fix the flaky test" || th[0].OwnerID != fakediscord.DefaultAppID {
		t.Fatalf("threads = %+v", th)
	}

	// Messages in the thread continue the session without a mention.
	next, _ := f.UserMessage(um.ID, bob, "also check pkg/y")
	rec.WaitFor(t, "thread message", func(r chattest.Record) bool { return len(r.Messages) == 2 })
	if m := rec.Record().Messages[1]; m.Thread != want || m.EventID != next.ID || m.Text != "also check pkg/y" || m.Admin {
		t.Fatalf("thread message = %+v", m)
	}
}

func TestWhatIsNotForTheBotIsIgnored(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	um, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"start")
	rec.WaitFor(t, "session", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	th := rec.Record().Messages[0].Thread

	// In a channel: no mention, an edit of the mention, the bot's own
	// message. Then a sentinel mention: messages of one channel are
	// handled in order, so when it arrives the others were handled.
	if _, err := f.UserMessage(fakediscord.DefaultChannelID, alice, "chatting among humans"); err != nil {
		t.Fatal(err)
	}
	if err := f.UserEdit(um.ID, bot()+"start, edited"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Post(t.Context(), chat.Thread{Platform: "discord", Workspace: fakediscord.DefaultGuildID, Channel: fakediscord.DefaultChannelID},
		chat.Card{Title: "the bot talking, mentioning itself " + bot()}); err != nil {
		t.Fatal(err)
	}
	sentinel, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"sentinel")
	rec.WaitFor(t, "sentinel", func(r chattest.Record) bool { return len(r.Messages) >= 2 })
	if got := rec.Record().Messages; len(got) != 2 || got[1].EventID != sentinel.ID {
		t.Fatalf("handled %d messages, last %+v; want only the sentinel after the session start", len(got), got[len(got)-1])
	}

	// In the session thread: the bot's own status message never starts a turn.
	if _, err := a.Post(t.Context(), th, chat.Card{Title: "status"}); err != nil {
		t.Fatal(err)
	}
	s2, _ := f.UserMessage(th.Thread, alice, "thread sentinel")
	rec.WaitFor(t, "thread sentinel", func(r chattest.Record) bool { return len(r.Messages) >= 3 })
	if got := rec.Record().Messages; len(got) != 3 || got[2].EventID != s2.ID {
		t.Fatalf("bot message in thread was handled: %+v", got)
	}

	// A thread someone else opened needs a mention.
	f.AddChannel(fakediscord.Channel{ID: "5500000000000000001", Type: fakediscord.ChannelPublicThread, GuildID: fakediscord.DefaultGuildID,
		ParentID: fakediscord.DefaultChannelID, OwnerID: alice.User.ID, Name: "humans"})
	if _, err := f.UserMessage("5500000000000000001", alice, "no mention here"); err != nil {
		t.Fatal(err)
	}
	s3, _ := f.UserMessage("5500000000000000001", alice, bot()+"now you")
	rec.WaitFor(t, "user thread mention", func(r chattest.Record) bool { return len(r.Messages) >= 4 })
	got := rec.Record().Messages
	want := chat.Thread{Platform: "discord", Workspace: fakediscord.DefaultGuildID, Channel: fakediscord.DefaultChannelID, Thread: "5500000000000000001"}
	if len(got) != 4 || got[3].EventID != s3.ID || got[3].Thread != want {
		t.Fatalf("user thread: %+v", got[3:])
	}
	if n := len(f.Threads(fakediscord.DefaultChannelID)); n != 3 {
		t.Fatalf("threads = %d, want 3 (start, sentinel and the humans' one)", n)
	}
}

func TestWithoutMessageContentOnlyMentionsCount(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	cfg := config(f)
	cfg.MessageContentIntent = false
	start(t, cfg, rec)
	um, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"start")
	rec.WaitFor(t, "session", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	if _, err := f.UserMessage(um.ID, alice, "unreadable without the intent"); err != nil {
		t.Fatal(err)
	}
	s, _ := f.UserMessage(um.ID, alice, bot()+"readable")
	rec.WaitFor(t, "mention in thread", func(r chattest.Record) bool { return len(r.Messages) >= 2 })
	if got := rec.Record().Messages; len(got) != 2 || got[1].EventID != s.ID || got[1].Text != "readable" {
		t.Fatalf("got %+v", got)
	}
}

func TestDirectMessageIsASession(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	start(t, config(f), rec)
	dm := f.AddDM(alice.User)
	m, _ := f.UserMessage(dm, alice, "hello in private")
	rec.WaitFor(t, "dm", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	got := rec.Record().Messages[0]
	if got.Thread != (chat.Thread{Platform: "discord", Channel: dm, Thread: dm}) || got.EventID != m.ID || got.Text != "hello in private" {
		t.Fatalf("dm message = %+v", got)
	}
}

func TestUnauthorizedMentionIsRefused(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	cfg := config(f)
	cfg.AllowedRoles = []string{approverRole}
	start(t, cfg, rec)
	m, _ := f.UserMessage(fakediscord.DefaultChannelID, bob, bot()+"let me in")
	wait(t, f, "refusal", func() bool { return len(botMessages(f, fakediscord.DefaultChannelID)) == 1 })
	if got := botMessages(f, fakediscord.DefaultChannelID)[0]; got.Content != "You may not use this bot here." {
		t.Fatalf("refusal = %q", got.Content)
	}
	if len(f.Threads(fakediscord.DefaultChannelID)) != 0 {
		t.Fatal("a thread was opened for an unauthorized user")
	}
	_, _ = f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"allowed")
	rec.WaitFor(t, "alice", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	if rec.Record().Messages[0].EventID == m.ID {
		t.Fatal("bob's message reached the core")
	}
}

func TestReplayedMessagesNeverReachTheCoreTwice(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	cfg := config(f)
	start(t, cfg, rec)
	before := f.LastSeq()
	first, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"once")
	rec.WaitFor(t, "first", func(r chattest.Record) bool { return len(r.Messages) == 1 })

	// The gateway resumes and replays events the bot already handled.
	heartbeating(t, f, 1)
	f.ReplayOnResumeFrom(before)
	f.DropConnections()
	wait(t, f, "resume", func() bool { return f.GatewayStats().Resumes == 1 })
	second, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"twice?")
	rec.WaitFor(t, "second", func(r chattest.Record) bool { return len(r.Messages) >= 2 })
	if got := rec.Record().Messages; len(got) != 2 || got[1].EventID != second.ID {
		t.Fatalf("after replay the core saw %d messages: %+v", len(got), got)
	}

	// A restarted bot (nothing in memory) gets the first message again:
	// it reuses the thread and passes the same event ID, which the session
	// workflow recognises.
	rec2 := &chattest.Core{}
	start(t, cfg, rec2)
	if err := f.Redispatch(first.ID); err != nil {
		t.Fatal(err)
	}
	rec2.WaitFor(t, "redelivery", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	again := rec2.Record().Messages[0]
	if again.EventID != first.ID || again.Thread != rec.Record().Messages[0].Thread {
		t.Fatalf("redelivered = %+v, first = %+v", again, rec.Record().Messages[0])
	}
	if n := len(f.Threads(fakediscord.DefaultChannelID)); n != 2 {
		t.Fatalf("threads = %d, want 2", n)
	}
}
