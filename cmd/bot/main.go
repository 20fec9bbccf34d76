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
	cfg, log, c, err := app.Connect(ctx, config.RoleBot)
	if err != nil {
		return err
	}
	defer c.Close()
	bot, err := botapp.New(ctx, c, cfg, botapp.Options{}, log)
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
