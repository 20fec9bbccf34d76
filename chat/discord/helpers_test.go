package discord_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/discord"
	fake "github.com/sandbot/sandbot/internal/fake/discord"
)

const waitTimeout = 30 * time.Second

var (
	alice = fake.Member{User: fake.User{ID: "7000000000000000001", Username: "alice"}, Roles: []string{approverRole}}
	bob   = fake.Member{User: fake.User{ID: "7000000000000000002", Username: "bob"}}
)

const approverRole = "9000000000000000001"

func bot() string { return "<@" + fake.DefaultAppID + "> " }

func testLog(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return nil
}

// config is how to point the adapter at the fake: its token and app ID,
// and APIBase set to the fake's URL (the adapter then rewrites discord.com
// to it per session; no discordgo globals change).
func config(f *fake.Server) discord.Config {
	return discord.Config{
		Token:                f.Token(),
		ApplicationID:        f.AppID(),
		GuildID:              fake.DefaultGuildID,
		MessageContentIntent: true,
		APIBase:              f.URL(),
		Backends:             []string{"local", "docker"},
		ApproverRoles:        []string{approverRole},
	}
}

// start runs an adapter until the test ends and waits until it is ready.
func start(t testing.TB, cfg discord.Config, h discord.Handler) *discord.Adapter {
	t.Helper()
	a, err := discord.New(cfg, h, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
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

func wait(t testing.TB, f *fake.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := f.Wait(ctx, what, cond); err != nil {
		t.Fatal(err)
	}
}

// recorder is a stand-in for the chat core that records what the adapter
// hands it. Optional hooks decide the answers.
type recorder struct {
	mu      sync.Mutex
	changed chan struct{}
	msgs    []chat.Message
	cmds    []cmdCall
	acts    []chat.Action
	resumed []string

	onCommand func(ctx context.Context, p chat.Poster, c cmdCall) chat.Reply
	onAction  func(ctx context.Context, p chat.Poster, a chat.Action)
}

type cmdCall struct {
	Thread chat.Thread
	User   chat.User
	Cmd    chat.Command
}

var _ discord.Handler = (*recorder)(nil)

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) note(f func()) {
	r.mu.Lock()
	f()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) HandleMessage(_ context.Context, _ chat.Poster, m chat.Message) error {
	r.note(func() { r.msgs = append(r.msgs, m) })
	return nil
}

func (r *recorder) HandleCommand(ctx context.Context, p chat.Poster, th chat.Thread, u chat.User, cmd chat.Command) (chat.Reply, error) {
	c := cmdCall{th, u, cmd}
	r.note(func() { r.cmds = append(r.cmds, c) })
	if r.onCommand != nil {
		return r.onCommand(ctx, p, c), nil
	}
	return chat.Reply{Text: "ran /" + cmd.Name}, nil
}

func (r *recorder) HandleAction(ctx context.Context, p chat.Poster, a chat.Action) error {
	r.note(func() { r.acts = append(r.acts, a) })
	if r.onAction != nil {
		r.onAction(ctx, p, a)
	}
	return nil
}

func (r *recorder) Resume(_ context.Context, _ chat.Poster, platform string) error {
	r.note(func() { r.resumed = append(r.resumed, platform) })
	return nil
}

// waitFor blocks until cond (called under the recorder's lock) holds.
func (r *recorder) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		r.mu.Lock()
		ok := cond()
		ch := r.changed
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (r *recorder) messages() []chat.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]chat.Message(nil), r.msgs...)
}

// botMessages are the bot's non-ephemeral messages in a channel.
func botMessages(f *fake.Server, channelID string) []fake.Message {
	var out []fake.Message
	for _, m := range f.Messages(channelID) {
		if m.Author.ID == fake.DefaultAppID && !m.Ephemeral() {
			out = append(out, m)
		}
	}
	return out
}

func hasRequest(f *fake.Server, method, pathPart string) bool {
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
func heartbeating(t testing.TB, f *fake.Server, n int) {
	t.Helper()
	wait(t, f, "heartbeat", func() bool { return f.GatewayStats().HeartbeatsAcked >= n })
}

func (r *recorder) commands() []cmdCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]cmdCall(nil), r.cmds...)
}

func (r *recorder) actions() []chat.Action {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]chat.Action(nil), r.acts...)
}
