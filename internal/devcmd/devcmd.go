// Package devcmd is cmd/dev: all of sandbot in one process for a laptop.
// It lives outside package main so the integration tests can drive the
// very same code path.
package devcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/botapp"
	"github.com/sandbot/sandbot/internal/devserver"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/logging"
	"github.com/sandbot/sandbot/internal/workerapp"
	"github.com/sandbot/sandbot/session"
)

// Run runs the embedded Temporal server, the worker and the bot with the
// terminal front end on stdin/stdout until the terminal session ends or
// ctx is cancelled. args are the command-line flags.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	demo := fs.Bool("demo", false, "use a built-in scripted model instead of a real endpoint: it runs `run: CMD` lines as shell commands and echoes everything else")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := config.Load()
	cfg.EnsureDecisionKey()
	if *demo {
		fake := fakeopenai.New()
		defer fake.Close()
		cfg.Model.BaseURL, cfg.Model.Name, cfg.Model.APIKey = fake.URL(), "demo", ""
	}
	if err := cfg.Validate(config.RoleDev); err != nil {
		return fmt.Errorf("invalid configuration:\n%w\n(or run with -demo to try sandbot without a model endpoint)", err)
	}
	// The dev log goes to a file: the terminal belongs to the console.
	// The data directory and everything in it are the owner's alone: the
	// Temporal database and the log hold every session's commands, outputs
	// and transcripts.
	if err := os.MkdirAll(cfg.Dev.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	logPath := filepath.Join(cfg.Dev.DataDir, "sandbot-dev.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	defer logFile.Close()
	if err := logFile.Chmod(0o600); err != nil { // a log an older version made 0644
		return fmt.Errorf("log file: %w", err)
	}
	log := logging.New(logFile, cfg.LogLevel)
	// What cmd/dev has to say before the front end starts (where its state
	// lives, the UI link, warnings) goes out now in line mode. The
	// full-screen app owns the terminal from its first frame, so there the
	// same text opens the transcript and is printed again after the app
	// exits, where it stays in the scrollback.
	fullScreen := botapp.IsTerminal(stdin) && botapp.IsTerminal(stdout)
	var warn, banner strings.Builder
	if info, err := os.Stat(cfg.Dev.DataDir); err == nil && info.Mode().Perm()&0o077 != 0 {
		// An existing directory is not changed behind the operator's
		// back (SANDBOT_DEV_DATA_DIR may name a shared one); its files are
		// private anyway, but its listing is not.
		fmt.Fprintf(&warn, "warning: the data directory %s is open to other users (mode %#o); run chmod 700 %s\n", cfg.Dev.DataDir, info.Mode().Perm(), cfg.Dev.DataDir)
		log.Warn("data directory is open to other users", "dir", cfg.Dev.DataDir, "mode", fmt.Sprintf("%#o", info.Mode().Perm()))
	}

	dbPath := filepath.Join(cfg.Dev.DataDir, "temporal.db")
	// Before the server, whose own SDK workers would create the process's
	// workflow cache with the SDK's default size.
	workerapp.SizeSessionCache(cfg)
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	srv, err := devserver.Start(startCtx, devserver.Options{
		DBPath: dbPath, Port: cfg.Dev.TemporalPort, UIPort: cfg.Dev.UIPort,
		Namespace: cfg.Temporal.Namespace, SearchAttributes: session.SearchAttributeTypes(), Logger: log,
		DynamicConfig: DevDynamicConfig(),
	})
	cancel()
	if err != nil {
		return fmt.Errorf("embedded Temporal server: %w (is port %d in use? set SANDBOT_DEV_TEMPORAL_PORT)", err, cfg.Dev.TemporalPort)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			log.Warn("stop server", "error", err)
		}
	}()
	cfg.Temporal.Address = srv.HostPort()
	cfg.Sandbox.SingleHost = true
	// /status links to the embedded UI, or to nothing when it is off.
	cfg.Temporal.WebURL = srv.UIURL()
	fmt.Fprintf(&banner, "sandbot dev\n  temporal: %s (namespace %s), state in %s\n", srv.HostPort(), srv.Namespace(), dbPath)
	if u := srv.UIURL(); u != "" {
		fmt.Fprintf(&banner, "  temporal ui: %s\n", u)
	}
	fmt.Fprintf(&banner, "  model: %s at %s\n  workspaces: %s\n  snapshots: %s\n  log: %s\n",
		cfg.Model.Name, agent.RedactURL(cfg.Model.BaseURL), cfg.Sandbox.LocalRoot, cfg.Sandbox.SnapshotURL, logPath)

	c, err := srv.NewClient(ctx, client.Options{Logger: logging.Temporal(log.With("component", "temporal"))})
	if err != nil {
		return fmt.Errorf("temporal client: %w", err)
	}
	defer c.Close()
	w, err := workerapp.Start(ctx, c, cfg, workerapp.Options{}, log)
	if err != nil {
		return err
	}
	defer w.Stop()
	banner.WriteString("  " + w.Describe())

	bot, err := botapp.New(ctx, c, cfg, botapp.Options{}, log)
	if err != nil {
		return err
	}
	defer bot.Close()
	intro := ""
	if fullScreen {
		intro = banner.String() + warn.String()
	} else {
		fmt.Fprint(stderr, warn.String())
		fmt.Fprint(stdout, banner.String())
	}
	err = bot.RunDev(ctx, stdin, stdout, intro)
	if fullScreen {
		fmt.Fprint(stdout, banner.String())
		fmt.Fprint(stderr, warn.String())
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// DevDynamicConfig is the embedded server's tuning for one machine.
//   - The history service reads new transfer tasks (which dispatch workflow
//     tasks and non-eager activities) at most 20 times a second by default,
//     so every sandbox activity on a host queue waited ~25 ms on average just
//     to be dispatched; a single-node server can afford to read at once.
//   - A single task queue partition lets a task meet a waiting poller
//     directly instead of being forwarded between partitions.
func DevDynamicConfig() map[string]any {
	return map[string]any{
		"history.transferProcessorMaxPollRPS":  1000,
		"matching.numTaskqueueReadPartitions":  1,
		"matching.numTaskqueueWritePartitions": 1,
	}
}
