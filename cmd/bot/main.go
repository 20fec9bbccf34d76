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

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/app"
	"github.com/sandbot/sandbot/internal/logging"
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
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if err := cfg.Validate(config.RoleBot); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", err)
	}
	log := logging.New(os.Stderr, cfg.LogLevel)
	c, err := client.DialContext(ctx, client.Options{
		HostPort: cfg.Temporal.Address, Namespace: cfg.Temporal.Namespace, Logger: logging.Temporal(log.With("component", "temporal")),
	})
	if err != nil {
		return fmt.Errorf("connect to Temporal at %s: %w", cfg.Temporal.Address, err)
	}
	defer c.Close()
	bot, err := app.NewBot(ctx, c, cfg, log)
	if err != nil {
		return err
	}
	defer bot.Close()
	stopHealth, err := app.ServeHealth(cfg.MetricsAddr, log)
	if err != nil {
		return err
	}
	defer stopHealth()
	return bot.Run(ctx, os.Stdin, os.Stdout)
}
