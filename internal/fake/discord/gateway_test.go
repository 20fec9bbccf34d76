package fakediscord_test

import (
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

func TestOpenIdentifyReadyGuildCreate(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents)
	guilds := make(chan *discordgo.GuildCreate, 1)
	s.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildCreate) { guilds <- g })
	open(t, s)
	if s.State.User == nil || s.State.User.ID != fakediscord.DefaultAppID || !s.State.User.Bot {
		t.Fatalf("READY user = %+v", s.State.User)
	}
	g := recv(t, guilds, "GUILD_CREATE")
	if g.ID != fakediscord.DefaultGuildID || len(g.Channels) != 1 || g.Channels[0].ID != fakediscord.DefaultChannelID {
		t.Fatalf("GUILD_CREATE = %+v", g.Guild)
	}
	if st := f.GatewayStats(); st.Identifies != 1 || st.Connections != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestHeartbeatsAreAcked(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{HeartbeatInterval: 20 * time.Millisecond})
	s := session(t, f, allIntents)
	open(t, s)
	wait(t, f, "three acked heartbeats", func() bool { return f.GatewayStats().HeartbeatsAcked >= 3 })
}

func TestMessageContentIntentGatesContent(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	with := session(t, f, allIntents)
	without := session(t, f, allIntents&^discordgo.IntentsMessageContent)
	gotWith := make(chan *discordgo.MessageCreate, 4)
	gotWithout := make(chan *discordgo.MessageCreate, 4)
	with.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { gotWith <- m })
	without.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { gotWithout <- m })
	open(t, with)
	open(t, without)

	if _, err := f.UserMessage(fakediscord.DefaultChannelID, alice, "plain words"); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, gotWith, "message with intent"); m.Content != "plain words" || m.Member == nil || len(m.Member.Roles) != 1 {
		t.Fatalf("with intent: %+v", m.Message)
	}
	if m := recv(t, gotWithout, "message without intent"); m.Content != "" {
		t.Fatalf("without intent the content must be blank, got %q", m.Content)
	}
	if _, err := f.UserMessage(fakediscord.DefaultChannelID, alice, "<@"+fakediscord.DefaultAppID+"> hello"); err != nil {
		t.Fatal(err)
	}
	recv(t, gotWith, "mention with intent")
	if m := recv(t, gotWithout, "mention without intent"); m.Content == "" || len(m.Mentions) != 1 || m.Mentions[0].ID != fakediscord.DefaultAppID {
		t.Fatalf("a mention is readable without the intent: %+v", m.Message)
	}
	dm := f.AddDM(alice.User)
	if _, err := f.UserMessage(dm, alice, "in a dm"); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, gotWithout, "dm"); m.Content != "in a dm" || m.GuildID != "" || m.Member != nil {
		t.Fatalf("dm: %+v", m.Message)
	}
	recv(t, gotWith, "dm with intent")
}

func TestDeniedPrivilegedIntentFailsOpen(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{DenyPrivilegedIntents: true})
	s := session(t, f, allIntents)
	if err := s.Open(); err == nil {
		_ = s.Close()
		t.Fatal("open with a disallowed intent succeeded")
	}
}

// collector records MESSAGE_CREATE IDs in arrival order.
type collector struct{ ch chan string }

func newCollector(s *discordgo.Session) *collector {
	c := &collector{ch: make(chan string, 64)}
	s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
		if !m.Author.Bot {
			c.ch <- m.ID
		}
	})
	return c
}

func TestResumeReplaysMissedEvents(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents)
	s.SyncEvents = true
	c := newCollector(s)
	open(t, s)
	heartbeating(t, f, 1)

	f.DropConnections()
	wait(t, f, "connection dropped", func() bool { return f.Connected() == 0 })
	missed, err := f.UserMessage(fakediscord.DefaultChannelID, alice, "sent while disconnected")
	if err != nil {
		t.Fatal(err)
	}
	if got := recv(t, c.ch, "replayed message"); got != missed.ID {
		t.Fatalf("got %s, want %s", got, missed.ID)
	}
	wait(t, f, "resumed", func() bool { return f.GatewayStats().Resumes == 1 })
	if st := f.GatewayStats(); st.Identifies != 1 {
		t.Fatalf("client identified again instead of resuming: %+v", st)
	}
	after, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, "after resume")
	if got := recv(t, c.ch, "live message"); got != after.ID {
		t.Fatalf("got %s, want %s (the missed one must not come twice)", got, after.ID)
	}
}

func TestOp7ReconnectResumes(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents)
	c := newCollector(s)
	open(t, s)
	heartbeating(t, f, 1)
	f.SendReconnect()
	wait(t, f, "resumed after op 7", func() bool { return f.GatewayStats().Resumes == 1 && f.Connected() == 1 })
	m, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, "after op 7")
	if got := recv(t, c.ch, "message after op 7"); got != m.ID {
		t.Fatalf("got %s, want %s", got, m.ID)
	}
	if st := f.GatewayStats(); st.Identifies != 1 || st.Connections != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestOp9InvalidSessionReidentifies(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents)
	c := newCollector(s)
	open(t, s)
	heartbeating(t, f, 1)
	f.InvalidateSession(false)
	wait(t, f, "identify after op 9", func() bool { return f.GatewayStats().Identifies == 2 && f.Connected() == 1 })
	m, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, "after op 9")
	if got := recv(t, c.ch, "message after op 9"); got != m.ID {
		t.Fatalf("got %s, want %s", got, m.ID)
	}
}

func TestReplayOnResumeRedeliversProcessedEvents(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents)
	s.SyncEvents = true
	c := newCollector(s)
	open(t, s)
	before := f.LastSeq()
	m, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, "once")
	if got := recv(t, c.ch, "first delivery"); got != m.ID {
		t.Fatalf("got %s", got)
	}
	heartbeating(t, f, 1)
	f.ReplayOnResumeFrom(before)
	f.DropConnections()
	if got := recv(t, c.ch, "redelivery"); got != m.ID {
		t.Fatalf("redelivered %s, want %s", got, m.ID)
	}
}
