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

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/app"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/internal/workerapp"
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
	reg := metrics.NewRegistry()
	cfg, log, c, err := app.Connect(ctx, config.RoleWorker, reg)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := app.EnsureSearchAttributes(ctx, c, cfg.Temporal.Namespace, log); err != nil {
		log.Warn("search attributes", "error", err)
	}
	w, err := workerapp.Start(ctx, c, cfg, workerapp.Options{}, log)
	if err != nil {
		return err
	}
	defer w.Stop()
	fmt.Print(w.Describe())
	health, err := app.ServeHealth(app.Health{Addr: cfg.MetricsAddr, Metrics: reg, Ready: w.Checks()}, log)
	if err != nil {
		return err
	}
	defer health.Stop()
	debug, err := app.ServeDebug(cfg.DebugAddr, log)
	if err != nil {
		return err
	}
	defer debug.Stop()
	<-ctx.Done()
	log.Info("shutting down")
	return nil
}
