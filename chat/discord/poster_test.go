package discord_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

func TestPostEditAndRateLimits(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)

	ref, err := a.Post(t.Context(), th, chat.Card{Title: "⚙️ Running", Blocks: []chat.Block{{Kind: chat.BlockText, Text: "⏳ `make`"}}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := f.Message(ref)
	if m.ChannelID != th.Thread || m.Content != "⚙️ Running" || !strings.Contains(m.EmbedText(), "⏳ `make`") {
		t.Fatalf("posted = %+v", m)
	}
	// Two 429s on the edit route: discordgo waits them out and the edit
	// still lands, once.
	f.RateLimitNext(fakediscord.RouteEditMessage, 2, 0, false)
	if err := a.Edit(t.Context(), th, ref, chat.Card{Title: "✅ Done", Blocks: []chat.Block{{Kind: chat.BlockText, Text: "✅ `make` · exit 0"}}}); err != nil {
		t.Fatal(err)
	}
	edits := f.Edits()
	if f.RateLimited() != 2 || len(edits) != 1 || edits[0].Content != "✅ Done" || !strings.Contains(edits[0].EmbedText(), "exit 0") {
		t.Fatalf("429s %d, edits %+v", f.RateLimited(), edits)
	}
	// A card Discord cannot carry is an error, not a broken message.
	var many []chat.Button
	for i := 0; i < 26; i++ {
		many = append(many, chat.Button{ID: "b" + strings.Repeat("i", i), Label: "x"})
	}
	if err := a.Edit(t.Context(), th, ref, chat.Card{Blocks: []chat.Block{{Kind: chat.BlockActions, Buttons: many}}}); err == nil {
		t.Fatal("26 buttons accepted")
	}
}

func TestPostTextSplitsOrAttaches(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)

	if _, err := a.PostText(t.Context(), th, "short answer <@everyone>"); err != nil {
		t.Fatal(err)
	}
	code := "```go\n" + strings.Repeat("fmt.Println(\"a line of code\")\n", 120) + "```"
	long := "Here is the patch:\n\n" + code + "\n\nDone."
	first, err := a.PostText(t.Context(), th, long)
	if err != nil {
		t.Fatal(err)
	}
	msgs := botMessages(f, th.Thread)
	if len(msgs) < 3 || msgs[1].ID != first {
		t.Fatalf("want the short answer and a split answer starting at %s, got %d messages", first, len(msgs))
	}
	for _, m := range msgs {
		if n := fakediscord.TextLen(m.Content); n > discord.MaxContent {
			t.Fatalf("message of %d characters", n)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Fatalf("unbalanced code block in %q", m.Content)
		}
	}
	// Every request carried allowed_mentions with nothing to parse.
	for _, r := range f.Requests() {
		if r.Method == "POST" && strings.HasSuffix(r.Path, "/messages") && !strings.Contains(string(r.Body), `"allowed_mentions":{"parse":[]`) {
			t.Fatalf("message sent with mentions enabled: %s", r.Body)
		}
	}

	huge := strings.Repeat("paragraph of a very long report\n\n", 800) // ~26k characters
	ref, err := a.PostText(t.Context(), th, huge)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := f.Message(ref)
	if len(m.Attachments) != 1 || m.Attachments[0].Filename != "answer.md" || string(m.Attachments[0].Data) != huge {
		t.Fatalf("attachment = %+v", m.Attachments)
	}
	if !strings.Contains(m.Content, "attached as answer.md") || fakediscord.TextLen(m.Content) > discord.MaxContent {
		t.Fatalf("preview = %q", m.Content)
	}
}

func TestStartThreadForFork(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)
	to, err := a.StartThread(t.Context(), th, "try the other approach")
	if err != nil {
		t.Fatal(err)
	}
	c, ok := f.Channel(to.Thread)
	if !ok || to.Channel != fakediscord.DefaultChannelID || to.Workspace != fakediscord.DefaultGuildID || c.Name != "try the other approach" || c.Type != fakediscord.ChannelPublicThread {
		t.Fatalf("fork thread %+v, channel %+v", to, c)
	}
	// The bot owns it, so messages there are sessions without a mention.
	m, _ := f.UserMessage(to.Thread, alice, "continue here")
	rec.WaitFor(t, "message in fork", func(r chattest.Record) bool { return len(r.Messages) == 2 })
	if got := rec.Record().Messages[1]; got.EventID != m.ID || got.Thread != to {
		t.Fatalf("fork message = %+v", got)
	}
	_, err = a.StartThread(t.Context(), chat.Thread{Platform: "discord", Channel: "1", Thread: "1"}, "x")
	var ue *chat.UserError
	if !errors.As(err, &ue) {
		t.Fatalf("fork from a DM: %v", err)
	}
	if a.Mention(chat.User{ID: "42"}) != "<@42>" || a.ThreadLink(to) != "<#"+to.Thread+">" {
		t.Fatal("mention or link format")
	}
}

func TestGatewayDropIsSurvived(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	start(t, config(f), rec)
	heartbeating(t, f, 1)
	f.DropConnections()
	wait(t, f, "resumed", func() bool { return f.GatewayStats().Resumes == 1 })
	m, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"after the drop")
	rec.WaitFor(t, "message after drop", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	if rec.Record().Messages[0].EventID != m.ID {
		t.Fatal("wrong message")
	}
	heartbeating(t, f, 2) // the resumed connection's first heartbeat
	f.SendReconnect()
	wait(t, f, "resumed after op 7", func() bool { return f.GatewayStats().Resumes == 2 && f.Connected() == 1 })
	f.InvalidateSession(false)
	wait(t, f, "identified after op 9", func() bool { return f.GatewayStats().Identifies == 2 && f.Connected() == 1 })
	m2, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"after op 9")
	rec.WaitFor(t, "message after op 9", func(r chattest.Record) bool { return len(r.Messages) == 2 })
	if rec.Record().Messages[1].EventID != m2.ID {
		t.Fatal("wrong message after op 9")
	}
}

func TestRunFailsClearly(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{Token: "OTk5OTk5OTk5OTk5OTk5OTk5.b3RoZXI.not-the-bots-token"})
	cfg := config(f)
	cfg.Token = fakediscord.DefaultToken // a token the server does not accept
	a, err := discord.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(t.Context(), &chattest.Core{}); err == nil || !strings.Contains(err.Error(), "open gateway") {
		t.Fatalf("Run with a rejected token: %v", err)
	}
	cfg = config(f)
	cfg.Token = f.Token()
	cfg.GuildID = "4999999999999999999" // the bot is not in it
	a, _ = discord.New(cfg, nil)
	if err := a.Run(t.Context(), &chattest.Core{}); err == nil || !strings.Contains(err.Error(), "register slash commands in guild 4999999999999999999") {
		t.Fatalf("Run with an unknown guild: %v", err)
	}
}
