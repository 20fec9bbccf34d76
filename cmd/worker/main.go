// Command worker runs sandbot's Temporal worker: the session workflow, the
// model activity and the sandbox activities of every backend this host can
// serve. Configure it with SANDBOT_* environment variables (see README).
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
		fmt.Fprintln(os.Stderr, "sandbot worker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if err := cfg.Validate(config.RoleWorker); err != nil {
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
	if err := app.EnsureSearchAttributes(ctx, c, cfg.Temporal.Namespace, log); err != nil {
		log.Warn("search attributes", "error", err)
	}
	w, err := app.StartWorker(ctx, c, cfg, app.WorkerOptions{}, log)
	if err != nil {
		return err
	}
	defer w.Stop()
	fmt.Print(w.Describe())
	stopHealth, err := app.ServeHealth(cfg.MetricsAddr, log)
	if err != nil {
		return err
	}
	defer stopHealth()
	<-ctx.Done()
	log.Info("shutting down")
	return nil
}
