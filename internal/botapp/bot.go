// Package botapp assembles the bot process from configuration: one
// chat.Core over Temporal shared by every enabled front end (Slack,
// Discord, the terminal). cmd/bot and cmd/dev run it, and the integration
// tests build their bots with it too, so what they exercise is what ships.
//
// It links only the chat side: no model client, sandbox backend or
// snapshot store (see the dependency test).
package botapp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/term"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/console"
	"github.com/sandbot/sandbot/chat/discord"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/tui"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/app"
	"github.com/sandbot/sandbot/session"
)

// Options adjust the assembly beyond what configuration says. The zero
// value is production's.
type Options struct {
	// Settings, if set, adjusts the settings new sessions start with after
	// they are taken from the configuration (tests shorten limits that
	// configuration would refuse).
	Settings func(*session.Settings)
	// Slack and Discord, if set, adjust an adapter's configuration after it
	// is mapped from the environment's (tests set fields no variable sets,
	// such as Discord's interaction token lifetime).
	Slack   func(*slack.Config)
	Discord func(*discord.Config)
	// PollMin, PollMax and Clock tune the turn watcher; zero values take
	// the chat core's defaults.
	PollMin, PollMax time.Duration
	Clock            chat.Clock
	// ReplicaID, WatchLease and ScanEvery tune how replicas share the
	// watching of sessions (chat.CoreConfig); zero values take the core's
	// defaults.
	ReplicaID             string
	WatchLease, ScanEvery time.Duration
}

// Bot is the chat front end: the core and the adapters of the enabled
// platforms, built but not yet running.
type Bot struct {
	// Core routes every platform's events to the session workflows.
	Core *chat.Core
	// Slack and Discord are the enabled adapters (nil when off).
	Slack   *slack.Adapter
	Discord *discord.Adapter

	cfg *config.Config
	log *slog.Logger
	// sessions is what the core reads, for the full-screen terminal's
	// tool-call view and session picker.
	sessions chat.Sessions
}

// New builds the bot: the adapters of the enabled platforms and the core
// with their budgets and access rules. It contacts nothing but Temporal,
// once, to see whether the namespace has sandbot's search attributes, so
// sessions are indexed for /sessions and restart scans when it does. cfg
// must have been validated for a role that reads the bot's variables.
func New(ctx context.Context, c client.Client, cfg *config.Config, opts Options, log *slog.Logger) (*Bot, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	indexed := searchIndexed(ctx, c, cfg.Temporal.Namespace, log)
	b := &Bot{cfg: cfg, log: log}
	budgets := map[string]chat.Budget{console.Platform: console.Budget}
	auth := map[string]func(chat.User, chat.Thread) error{}

	if cfg.SlackEnabled() {
		sc := slackConfig(cfg)
		if opts.Slack != nil {
			opts.Slack(&sc)
		}
		a, err := slack.New(sc, log) // the adapter tags its records with its platform
		if err != nil {
			return nil, fmt.Errorf("bot: slack: %w", err)
		}
		b.Slack = a
		// Slack's access rules (allowed channels and users) are enforced by
		// the adapter at the edge.
		budgets[slack.Platform] = a.Budget()
	}
	if cfg.DiscordEnabled() {
		dc := discordConfig(cfg, c)
		if opts.Discord != nil {
			opts.Discord(&dc)
		}
		a, err := discord.New(dc, log) // the adapter tags its records with its platform
		if err != nil {
			return nil, fmt.Errorf("bot: discord: %w", err)
		}
		b.Discord = a
		budgets[discord.Platform] = dc.Budget()
		auth[discord.Platform] = dc.Authorize
	}

	settings := cfg.SessionSettings()
	settings.Indexed = indexed
	settings.Backends = cfg.Backends()
	if opts.Settings != nil {
		opts.Settings(&settings)
	}
	// Turns, tool calls and approvals are counted from what the core reads
	// and decides (see chat.MeterSessions).
	sessions := chat.MeterSessions(chat.NewTemporalSessions(c, chat.TemporalOptions{TaskQueue: cfg.Temporal.TaskQueue, Namespace: cfg.Temporal.Namespace, Indexed: indexed, DecisionKey: []byte(cfg.DecisionKey)}))
	b.sessions = sessions
	b.Core = chat.NewCore(chat.CoreConfig{
		Start:          chat.StartDefaults{Settings: settings, Backend: cfg.Sandbox.Default},
		TemporalUIBase: cfg.Temporal.WebURL,
		Namespace:      cfg.Temporal.Namespace,
		Backends:       cfg.Backends(),
		Budgets:        budgets,
		PollMin:        opts.PollMin,
		PollMax:        opts.PollMax,
		Clock:          opts.Clock,
		ReplicaID:      opts.ReplicaID,
		WatchLease:     opts.WatchLease,
		ScanEvery:      opts.ScanEvery,
		Prices:         session.Prices{Input: cfg.Model.PriceInput, Output: cfg.Model.PriceOutput},
		Repos: chat.RepoConfig{
			Allow: cfg.Repos.Allow, GitURL: cfg.Repos.GitURL,
			ChannelDefault: cfg.Repos.ChannelRepo,
		},
		ServedBackends: func(ctx context.Context) ([]string, error) {
			return ServedBackends(ctx, c, cfg.Temporal.TaskQueue, config.KnownBackends)
		},
		Authorize: func(_ context.Context, u chat.User, th chat.Thread) error {
			if f := auth[th.Platform]; f != nil {
				return f(u, th)
			}
			return nil
		},
	}, sessions, log)
	return b, nil
}

// searchIndexed reports whether the namespace has sandbot's search
// attributes. Without them sessions still work; /sessions lists less and a
// restart scans more, so the bot says so and goes on.
func searchIndexed(ctx context.Context, c client.Client, namespace string, log *slog.Logger) bool {
	missing, err := app.MissingSearchAttributes(ctx, c, namespace)
	switch {
	case err != nil:
		log.Warn("cannot check search attributes; sessions will not be indexed", "error", err)
		return false
	case len(missing) > 0:
		log.Warn("search attributes missing; /sessions lists less and restarts scan more until a worker registers them", "missing", missing)
		return false
	}
	return true
}

// Close stops the bot's watchers; turns keep running in their workflows.
// Stop the adapters first (end the context of Run or RunPlatforms).
func (b *Bot) Close() { b.Core.Close() }

// ConsoleUser is the terminal's user, named by the configuration (USER).
func (b *Bot) ConsoleUser() chat.User {
	return chat.User{ID: "console:" + b.cfg.ConsoleUser, Name: b.cfg.ConsoleUser}
}

// RunConsole runs the terminal front end on in/out as ConsoleUser: the
// full-screen app when both are terminals, the line mode otherwise (pipes,
// scripts and tests read and write plain lines).
func (b *Bot) RunConsole(ctx context.Context, in io.Reader, out io.Writer) error {
	return b.runConsole(ctx, in, out, "")
}

func (b *Bot) runConsole(ctx context.Context, in io.Reader, out io.Writer, intro string) error {
	if IsTerminal(in) && IsTerminal(out) {
		return b.runTUI(ctx, in, out, intro)
	}
	a, err := console.New(console.Config{In: in, Out: out, User: b.ConsoleUser()}, b.log)
	if err == nil {
		err = a.Run(ctx, b.Core)
	}
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	return nil
}

// Run runs every enabled platform adapter until ctx ends. With no chat
// platform configured it runs the terminal front end on in/out instead, so
// cmd/bot is useful on a laptop too.
func (b *Bot) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	rs := b.runners()
	if len(rs) == 0 {
		return b.RunConsole(ctx, in, out)
	}
	return runAll(ctx, rs)
}

// RunPlatforms runs the enabled platform adapters (not the terminal) until
// ctx ends or one fails; a failure stops the others.
func (b *Bot) RunPlatforms(ctx context.Context) error { return runAll(ctx, b.runners()) }

// IsTerminal reports whether f is a terminal (an *os.File on a tty).
func IsTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// RunTUI runs the full-screen terminal front end on in/out.
func (b *Bot) RunTUI(ctx context.Context, in io.Reader, out io.Writer) error {
	return b.runTUI(ctx, in, out, "")
}

func (b *Bot) runTUI(ctx context.Context, in io.Reader, out io.Writer, intro string) error {
	a, err := tui.New(tui.Config{
		In: in, Out: out, User: b.ConsoleUser(), Sessions: b.sessions, Intro: intro,
		Backends: b.cfg.Backends(), Model: b.cfg.Model.Name,
		UIURL: func(id string) string { return chat.UIURL(b.cfg.Temporal.WebURL, b.cfg.Temporal.Namespace, id) },
	}, b.log)
	if err == nil {
		err = a.Run(ctx, b.Core)
	}
	if err != nil {
		return fmt.Errorf("tui: %w", err)
	}
	return nil
}

// RunDev runs the terminal front end together with every enabled chat
// platform; it returns when the terminal session ends. intro is what the
// full-screen app shows first (cmd/dev's banner: it cannot be printed
// over the app); line mode ignores it, its caller has printed it.
func (b *Bot) RunDev(ctx context.Context, in io.Reader, out io.Writer, intro string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rs := append(b.runners(), runner{name: "console", run: func(ctx context.Context) error {
		defer cancel()
		return b.runConsole(ctx, in, out, intro)
	}})
	return runAll(ctx, rs)
}

type runner struct {
	name string
	run  func(ctx context.Context) error
}

func (b *Bot) runners() []runner {
	var rs []runner
	if a := b.Discord; a != nil {
		rs = append(rs, runner{name: "discord", run: func(ctx context.Context) error { return a.Run(ctx, b.Core) }})
	}
	if a := b.Slack; a != nil {
		rs = append(rs, runner{name: "slack", run: func(ctx context.Context) error { return a.Run(ctx, b.Core) }})
	}
	return rs
}

// runAll runs the runners until ctx ends or one fails; a failure stops the
// others. A runner that returns after ctx ended has not failed.
func runAll(ctx context.Context, rs []runner) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(rs))
	for _, r := range rs {
		go func() {
			err := r.run(ctx)
			if err != nil && ctx.Err() == nil {
				err = fmt.Errorf("%s: %w", r.name, err)
			} else {
				err = nil
			}
			errs <- err
		}()
	}
	var first error
	for range rs {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}
