// Command bot runs sandbot's chat front ends: Slack and Discord when their
// tokens are configured, otherwise the terminal. It keeps no state of its
// own; sessions live in Temporal, so any number of replicas may run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/app"
	"github.com/sandbot/sandbot/internal/botapp"
	"github.com/sandbot/sandbot/internal/metrics"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "sandbot bot:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	reg := metrics.NewRegistry()
	cfg, log, c, err := app.Connect(ctx, config.RoleBot, reg)
	if err != nil {
		return err
	}
	defer c.Close()
	bot, err := botapp.New(ctx, c, cfg, botapp.Options{}, log)
	if err != nil {
		return err
	}
	defer bot.Close()
	health, err := app.ServeHealth(app.Health{Addr: cfg.MetricsAddr, Metrics: reg, Ready: bot.Checks(c)}, log)
	if err != nil {
		return err
	}
	defer health.Stop()
	debug, err := app.ServeDebug(cfg.DebugAddr, log)
	if err != nil {
		return err
	}
	defer debug.Stop()
	return bot.Run(ctx, os.Stdin, os.Stdout)
}
