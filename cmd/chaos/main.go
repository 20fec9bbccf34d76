// Command chaos runs sandbot's chaos suite (package chaos) and prints its
// report as Markdown: go run ./cmd/chaos [-long | -soak [-soak-turns N] |
// -load [-load-sessions N] [-load-turns T] [-load-for D]] [-cluster] [-seed N]. Run it from the source tree; it builds cmd/worker and cmd/bot
// itself.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/sandbot/sandbot/chaos"
	"github.com/sandbot/sandbot/internal/pgtemporal"
)

func main() {
	// With -cluster the Temporal server is this program run again.
	pgtemporal.ServeIfChild()
	long := flag.Bool("long", false, "the long mode (docs/RELIABILITY.md's figures)")
	seed := flag.Uint64("seed", 0, "seed (0: from the clock)")
	keep := flag.Bool("keep", false, "keep the run's directory (state and logs)")
	faults := flag.String("faults", "", `the faults to inject, comma-separated, or "all" (default: the mode's own; none in the soak)`)
	onPG := flag.Bool("cluster", false, "the short or long mode on the Temporal server on PostgreSQL (the production shape) instead of the embedded server on SQLite; adds the postgres-restart fault")
	var o soakOptions
	flag.BoolVar(&o.on, "soak", false, "the soak: one session of -soak-turns turns with forks and backend switches")
	flag.IntVar(&o.turns, "soak-turns", 1000, "the soak's turns")
	flag.DurationVar(&o.For, "soak-for", 75*time.Minute, "the most time the soak's turns may take; it then reads the markers back and reports how far it got")
	flag.BoolVar(&o.approve, "soak-approve", false, "the soak's calls each wait for the card's Approve click (about three times slower)")
	flag.BoolVar(&o.profiles, "soak-profiles", false, "at every memory sample, save each worker's and bot's heap and goroutine profiles in the run's profiles/ (with -keep)")
	var l loadOptions
	flag.BoolVar(&l.on, "load", false, "the load mode: -load-sessions Discord sessions of -load-turns turns, every call approved")
	flag.IntVar(&l.sessions, "load-sessions", 200, "the load mode's sessions")
	flag.IntVar(&l.turns, "load-turns", 2, "the load mode's turns per session, before the read-back")
	flag.DurationVar(&l.For, "load-for", 15*time.Minute, "the most time the load mode's turns may take; it then reads the markers back and reports how far it got")
	flag.Parse()
	if err := run(*long, *onPG, o, l, *seed, *keep, *faults); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// loadOptions are the load mode's flags.
type loadOptions struct {
	on              bool
	sessions, turns int
	For             time.Duration
}

// soakOptions are the soak's flags.
type soakOptions struct {
	on, approve, profiles bool
	turns                 int
	For                   time.Duration
}

func run(long, onPG bool, soak soakOptions, load loadOptions, seed uint64, keep bool, faults string) error {
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	dir, err := os.MkdirTemp("", "sandbot-chaos-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	cfg := chaos.Short(seed, dir)
	switch {
	case load.on:
		cfg = chaos.Load(seed, dir, load.sessions, load.turns)
		cfg.Load.For = load.For
	case soak.on:
		cfg = chaos.Soak(seed, dir, soak.turns)
		cfg.Soak.For = soak.For
		cfg.Soak.Profiles = soak.profiles
		if soak.approve {
			cfg.ApprovalMode = "unless-readonly"
		}
	case long:
		cfg = chaos.Long(seed, dir)
	}
	if onPG {
		cfg = chaos.WithCluster(cfg)
	}
	if faults != "" {
		if cfg.Faults, err = chaos.ParseFaults(faults); err != nil {
			return err
		}
	}
	f, err := os.Create(filepath.Join(dir, "chaos.log"))
	if err != nil {
		return err
	}
	defer f.Close()
	cfg.Log = slog.New(slog.NewTextHandler(f, nil))
	fmt.Fprintf(os.Stderr, "chaos: seed %d, state and logs in %s\n", seed, dir)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Print(rep.Markdown())
	for _, p := range rep.Problems {
		fmt.Println("-", p)
	}
	if fails := rep.Failures(); len(fails) > 0 {
		return fmt.Errorf("seed %d: %v", seed, fails)
	}
	return nil
}
