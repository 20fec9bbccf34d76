// Command dev runs all of sandbot in one process for a laptop: an embedded
// Temporal server persisted to a SQLite file (sessions survive a restart),
// the worker, and the bot with the terminal front end (plus Slack and
// Discord when their tokens are set).
//
// It needs an OpenAI-compatible model endpoint (SANDBOT_MODEL_BASE_URL,
// SANDBOT_MODEL_NAME, SANDBOT_MODEL_API_KEY), or -demo to try it with the
// built-in scripted model.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandbot/sandbot/internal/devcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := devcmd.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sandbot dev:", err)
		os.Exit(1)
	}
}
