package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/console"
	"github.com/sandbot/sandbot/chat/discord"
	"github.com/sandbot/sandbot/config"
)

// Bot is the chat front end: one chat.Core shared by every enabled
// platform adapter.
type Bot struct {
	Core    *chat.Core
	cfg     *config.Config
	log     *slog.Logger
	c       client.Client
	discord *discord.Config
	slack   *slackSetup
}

// NewBot builds the chat core over Temporal, with the budgets and access
// rules of every enabled platform. It checks whether the namespace has
// sandbot's search attributes, so sessions are indexed for /sessions and
// restart scans when it does.
func NewBot(ctx context.Context, c client.Client, cfg *config.Config, log *slog.Logger) (*Bot, error) {
	missing, err := MissingSearchAttributes(ctx, c, cfg.Temporal.Namespace)
	if err != nil {
		log.Warn("cannot check search attributes; sessions will not be indexed", "error", err)
	} else if len(missing) > 0 {
		log.Warn("search attributes missing; /sessions lists less and restarts scan more until a worker registers them", "missing", missing)
	}
	indexed := err == nil && len(missing) == 0
	b := &Bot{cfg: cfg, log: log, c: c}
	budgets := map[string]chat.Budget{console.Platform: console.Budget}
	auth := map[string]func(chat.User, chat.Thread) error{}
	if cfg.DiscordEnabled() {
		dc := discordConfig(cfg, c)
		if err := dc.Validate(); err != nil {
			return nil, err
		}
		b.discord = &dc
		budgets[discord.Platform] = dc.Budget()
		auth[discord.Platform] = dc.Authorize
	}
	if err := b.slackSetup(budgets, auth); err != nil {
		return nil, err
	}
	settings := cfg.SessionSettings()
	settings.Indexed = indexed
	settings.Backends = cfg.Sandbox.Backends
	sessions := chat.NewTemporalSessions(c, chat.TemporalOptions{TaskQueue: cfg.Temporal.TaskQueue, Indexed: indexed})
	b.Core = chat.NewCore(chat.CoreConfig{
		Start:          chat.StartDefaults{Settings: settings, Backend: cfg.Sandbox.Default},
		TemporalUIBase: cfg.Temporal.WebURL,
		Namespace:      cfg.Temporal.Namespace,
		Backends:       cfg.Sandbox.Backends,
		Budgets:        budgets,
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

// Close stops the bot's watchers; turns keep running in their workflows.
func (b *Bot) Close() { b.Core.Close() }

// RunConsole runs the terminal front end on the process's terminal.
func (b *Bot) RunConsole(ctx context.Context, in io.Reader, out io.Writer, user chat.User) error {
	if err := console.Run(ctx, b.Core, in, out, user); err != nil {
		return fmt.Errorf("console: %w", err)
	}
	return nil
}

// Run runs every enabled platform adapter until ctx ends. With no chat
// platform configured it runs the terminal front end on in/out instead, so
// `cmd/bot` is useful on a laptop too.
func (b *Bot) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	runners, err := b.platforms(ctx)
	if err != nil {
		return err
	}
	if len(runners) == 0 {
		return b.RunConsole(ctx, in, out, ConsoleUser())
	}
	return runAll(ctx, runners)
}

// ConsoleUser is the terminal's user: the login name of the process.
func ConsoleUser() chat.User {
	name := os.Getenv("USER")
	if name == "" {
		name = "local"
	}
	return chat.User{ID: "console:" + name, Name: name}
}

type runner struct {
	name string
	run  func(ctx context.Context) error
}

// runAll runs the runners until ctx ends or one fails; a failure stops the
// others.
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

// RunDev runs the terminal front end together with every enabled chat
// platform; it returns when the terminal session ends.
func (b *Bot) RunDev(ctx context.Context, in io.Reader, out io.Writer) error {
	runners, err := b.platforms(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runners = append(runners, runner{name: "console", run: func(ctx context.Context) error {
		defer cancel()
		return b.RunConsole(ctx, in, out, ConsoleUser())
	}})
	return runAll(ctx, runners)
}
