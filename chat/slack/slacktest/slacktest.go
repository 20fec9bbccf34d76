// Package slacktest runs the real Slack adapter against the in-project fake
// Slack (internal/fake/slack), so tests and benchmarks exercise slack-go's
// Web API and Socket Mode (or signed HTTP) code paths end to end.
//
// The adapter's Budget must be known before the core is built, so a test
// goes in two steps:
//
//	env := slacktest.New(t, slacktest.Options{})
//	core := chat.NewCore(chat.CoreConfig{
//		Budgets: map[string]chat.Budget{slack.Platform: env.Adapter.Budget()},
//	}, sessions, log)
//	env.Run(core) // returns once the adapter is connected
//	sent, _ := env.Fake.SendMessage(ctx, fakeslack.UserMessage{Text: env.Fake.Mention() + " run the tests"})
//	env.Fake.WaitFor(ctx, func(s fakeslack.Snapshot) bool { return len(s.BotMessages("C0001", sent.Message.TS)) >= 2 })
//
// Restart (a bot restart mid-turn) stops the adapter and starts a new one,
// with empty caches, against the same fake workspace.
package slacktest

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// Options tune the environment. Zero values give a Socket Mode adapter with
// fast edits (EditInterval 100 ms, bursts of slack.DefaultEditBurst) and a
// fake that records chat.update budget violations against a per-message
// pace of at most that (50 ms, the same burst) and the adapter's budget.
type Options struct {
	// Config changes the adapter configuration after the defaults (tokens
	// and APIURL pointing at the fake) are filled in.
	Config func(*slack.Config)
	// Fake configures the fake workspace.
	Fake fakeslack.Options
	// Log receives the adapter's logs (default: discarded).
	Log *slog.Logger
}

// Env is a fake workspace with an adapter connected to it.
type Env struct {
	Fake    *fakeslack.Server
	Adapter *slack.Adapter
	Config  slack.Config

	t      testing.TB
	opts   Options
	cancel context.CancelFunc
	done   chan error
}

// New starts a fake workspace and builds (but does not run) an adapter for
// it. Everything is stopped when the test ends.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Fake.MinUpdateInterval == 0 {
		opts.Fake.MinUpdateInterval = 50 * time.Millisecond
	}
	if opts.Fake.UpdateBurst == 0 {
		opts.Fake.UpdateBurst = slack.DefaultEditBurst
	}
	fake := fakeslack.New(opts.Fake)
	t.Cleanup(fake.Close)
	fo := fake.Options()
	cfg := slack.Config{
		BotToken:      fo.BotToken,
		AppToken:      fo.AppToken,
		SigningSecret: fo.SigningSecret,
		APIURL:        fake.URL(),
		ListenAddr:    "127.0.0.1:0",
		EditInterval:  fo.MinUpdateInterval,
		EditBurst:     fo.UpdateBurst,
	}
	if cfg.EditInterval < 100*time.Millisecond {
		cfg.EditInterval = 100 * time.Millisecond
	}
	cfg.UpdateBudgetPerMinute = fo.UpdatesPerMinute
	if opts.Config != nil {
		opts.Config(&cfg)
	}
	e := &Env{Fake: fake, Config: cfg, t: t, opts: opts}
	e.Adapter = e.build()
	return e
}

func (e *Env) build() *slack.Adapter {
	e.t.Helper()
	a, err := slack.New(e.Config, e.opts.Log)
	if err != nil {
		e.t.Fatalf("slacktest: %v", err)
	}
	return a
}

// Run starts the adapter with core and returns once it is connected (or
// listening, in HTTP mode). The adapter stops when the test ends.
func (e *Env) Run(core chat.Handler) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	a := e.Adapter
	go func() { e.done <- a.Run(ctx, core) }()
	e.t.Cleanup(e.Stop)
	select {
	case <-a.Ready():
	case err := <-e.done:
		e.t.Fatalf("slacktest: adapter stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		e.t.Fatal("slacktest: adapter not ready after 30s")
	}
	if e.Config.Mode != slack.ModeHTTP {
		// The client may report "connected" before the fake has finished
		// its side (hello); wait until both agree.
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := e.Fake.WaitFor(wctx, func(s fakeslack.Snapshot) bool { return s.Open > 0 }); err != nil {
			e.t.Fatalf("slacktest: %v", err)
		}
	}
}

// Stop stops the running adapter and waits for it (idempotent).
func (e *Env) Stop() {
	if e.cancel == nil {
		return
	}
	e.cancel()
	if err := <-e.done; err != nil && !errors.Is(err, context.Canceled) {
		e.t.Errorf("slacktest: adapter: %v", err)
	}
	e.cancel = nil
}

// Restart stops the adapter and runs a new one (fresh caches, as after a
// bot restart) with core, against the same fake.
func (e *Env) Restart(core chat.Handler) {
	e.t.Helper()
	e.Stop()
	e.Adapter = e.build()
	e.Run(core)
}

// HTTPBase is the adapter's HTTP-mode base URL (HTTP mode only), for
// fakeslack's PostEvent, PostInteraction and PostSlashCommand:
// env.HTTPBase()+"/slack/events".
func (e *Env) HTTPBase() string { return "http://" + e.Adapter.Addr() }
