package fakediscord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// waitTimeout bounds every wait; it is generous because the machine is
// shared, and no test depends on it being short.
const waitTimeout = 20 * time.Second

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// session returns a discordgo session wired to f through the per-session
// transport. It is not opened.
func session(t testing.TB, f *fakediscord.Server, intents discordgo.Intent) *discordgo.Session {
	t.Helper()
	s, err := discordgo.New("Bot " + f.Token())
	if err != nil {
		t.Fatal(err)
	}
	s.Client = f.Client()
	s.Identify.Intents = intents
	s.LogLevel = -1
	return s
}

// open opens s and closes it when the test ends.
func open(t testing.TB, s *discordgo.Session) {
	t.Helper()
	if err := s.Open(); err != nil {
		t.Fatalf("open gateway: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
}

const allIntents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent

var alice = fakediscord.Member{User: fakediscord.User{ID: "7000000000000000001", Username: "alice"}, Roles: []string{"9000000000000000001"}}

// restCode returns the HTTP status and Discord JSON code of a REST error.
func restCode(t testing.TB, err error) (int, int) {
	t.Helper()
	var re *discordgo.RESTError
	if !errors.As(err, &re) {
		t.Fatalf("want a *discordgo.RESTError, got %T: %v", err, err)
	}
	code := 0
	if re.Message != nil {
		code = re.Message.Code
	}
	return re.Response.StatusCode, code
}

// recv waits for one value on ch.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func wait(t testing.TB, f *fakediscord.Server, what string, cond func() bool) {
	t.Helper()
	if err := f.Wait(ctxT(t), what, cond); err != nil {
		t.Fatal(err)
	}
}

// heartbeating waits until the gateway has acked n heartbeats in all.
// discordgo sends a connection's first heartbeat as soon as it connects;
// a disconnect that lands before it makes discordgo's heartbeat and read
// loops both reconnect (a race inside discordgo, whose stray close 1000
// then ends the session). Tests disturb the gateway only after it.
func heartbeating(t testing.TB, f *fakediscord.Server, n int) {
	t.Helper()
	wait(t, f, "heartbeat", func() bool { return f.GatewayStats().HeartbeatsAcked >= n })
}
