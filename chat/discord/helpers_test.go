package discord_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

const waitTimeout = 30 * time.Second

var (
	alice = fakediscord.Member{User: fakediscord.User{ID: "7000000000000000001", Username: "alice"}, Roles: []string{approverRole}}
	bob   = fakediscord.Member{User: fakediscord.User{ID: "7000000000000000002", Username: "bob"}}
)

const approverRole = "9000000000000000001"

func bot() string { return "<@" + fakediscord.DefaultAppID + "> " }

func testLog(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return nil
}

// config is how to point the adapter at the fake: its token and app ID,
// and APIBase set to the fake's URL (the adapter then rewrites discord.com
// to it per session; no discordgo globals change).
func config(f *fakediscord.Server) discord.Config {
	return discord.Config{
		Token:                f.Token(),
		ApplicationID:        f.AppID(),
		GuildID:              fakediscord.DefaultGuildID,
		MessageContentIntent: true,
		APIBase:              f.URL(),
		Backends:             []string{"local", "docker"},
		ApproverRoles:        []string{approverRole},
		// Discord's whole global budget: one replica per test.
		RequestsPerSecond: discord.MaxRequestsPerSecond,
	}
}

// start runs an adapter with core until the test ends and waits until it
// is ready.
func start(t testing.TB, cfg discord.Config, core chat.Handler) *discord.Adapter {
	t.Helper()
	a, err := discord.New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, core) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("adapter not ready")
	}
	return a
}

func wait(t testing.TB, f *fakediscord.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := f.Wait(ctx, what, cond); err != nil {
		t.Fatal(err)
	}
}

// botMessages are the bot's non-ephemeral messages in a channel.
func botMessages(f *fakediscord.Server, channelID string) []fakediscord.Message {
	var out []fakediscord.Message
	for _, m := range f.Messages(channelID) {
		if m.Author.ID == fakediscord.DefaultAppID && !m.Ephemeral() {
			out = append(out, m)
		}
	}
	return out
}

func hasRequest(f *fakediscord.Server, method, pathPart string) bool {
	for _, r := range f.Requests() {
		if r.Method == method && strings.Contains(r.Path, pathPart) {
			return true
		}
	}
	return false
}

// heartbeating waits until the gateway has acked n heartbeats in all.
// discordgo sends a connection's first heartbeat as soon as it connects;
// a disconnect that lands before it makes discordgo's heartbeat and read
// loops both reconnect (a race inside discordgo whose stray close 1000
// ends the session), so tests disturb the gateway only after it.
func heartbeating(t testing.TB, f *fakediscord.Server, n int) {
	t.Helper()
	wait(t, f, "heartbeat", func() bool { return f.GatewayStats().HeartbeatsAcked >= n })
}

// waitBoth blocks until cond holds, re-checking after every change of the
// Discord fake or of the sessions.
func waitBoth(t testing.TB, f *fakediscord.Server, fs *chattest.Sessions, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		fch, sch := f.Changed(), fs.Changed()
		if cond() {
			return
		}
		select {
		case <-fch:
		case <-sch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// statusRef waits until session id has recorded its status message.
func statusRef(t testing.TB, df *fakediscord.Server, fs *chattest.Sessions, id string) string {
	t.Helper()
	var ref string
	waitBoth(t, df, fs, "status message recorded", func() bool {
		ref = fs.Get(id).StatusRef
		return ref != ""
	})
	return ref
}
