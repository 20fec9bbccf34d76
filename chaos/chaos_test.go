package chaos

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

var (
	run    = flag.Bool("chaos", false, "run the chaos suite's short mode (.ci/run runs it, last)")
	long   = flag.Bool("long", false, "run the long mode (docs/RELIABILITY.md's figures) instead of the short one")
	seed   = flag.Uint64("seed", 0, "the run's seed (0: from the clock, printed)")
	faults = flag.String("faults", "", "the faults to inject, comma-separated, or \"all\" (default: the mode's own; none in the soak)")
	onPG   = flag.Bool("cluster", false, "run the short or long mode on the Temporal server on PostgreSQL (the production shape) instead of the embedded server on SQLite; adds the postgres-restart fault")

	soak         = flag.Bool("soak", false, "run the soak: one session of -soak-turns turns with forks and backend switches (not in CI; give -timeout 90m for 1,000 turns)")
	soakTurns    = flag.Int("soak-turns", 1000, "the soak's turns")
	soakFor      = flag.Duration("soak-for", 75*time.Minute, "the most time the soak's turns may take; it then reads the markers back and reports how far it got")
	soakProfiles = flag.Bool("soak-profiles", false, "at every memory sample, save each worker's and bot's heap and goroutine profiles in the run's profiles/ (keep it with CHAOS_KEEP=1)")
	soakApprove  = flag.Bool("soak-approve", false, "the soak's calls each wait for the card's Approve click (about three times slower)")

	load         = flag.Bool("load", false, "run the load mode: -load-sessions Discord sessions of -load-turns turns, every call approved (not in CI; about 20 minutes for 200 sessions, so give -timeout 30m)")
	loadSessions = flag.Int("load-sessions", 200, "the load mode's sessions")
	loadTurns    = flag.Int("load-turns", 2, "the load mode's turns per session (each of 5–10 approved calls), before the read-back")
	loadFor      = flag.Duration("load-for", 15*time.Minute, "the most time the load mode's turns may take; no session or turn starts after it, and the report says how far it got")
)

// TestChaos runs the stack under faults and fails on any loss or duplicate
// the fakes recorded. The short mode is what CI runs; -long is the mode of
// docs/RELIABILITY.md. A failing run prints its seed: `go test ./chaos
// -seed N` draws the same faults and redeliveries again.
func TestChaos(t *testing.T) {
	if !*run && !*long {
		// Not counted as passing: it reports SKIP. .ci/run runs the short
		// mode as a step of its own, last (it restarts the Docker daemon).
		t.Skip("the chaos suite runs with -chaos (short mode; .ci/run runs it as its last step, because it restarts the Docker daemon) or -long")
	}
	s, dir, log := setUp(t, map[bool]string{true: " -long", false: " -chaos"}[*long]+map[bool]string{true: " -cluster"}[*onPG])
	cfg := Short(s, dir)
	if *long {
		cfg = Long(s, dir)
	}
	cfg.Log = log
	if *onPG {
		cfg = WithCluster(cfg)
	}
	pickFaults(t, &cfg)
	limit := 30 * time.Minute
	if *long {
		limit = time.Hour
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", s, err)
	}
	finish(t, s, dir, rep)
	if rep.Answered == 0 || rep.Calls == 0 || rep.Approvals == 0 {
		t.Fatalf("seed %d: the workload did not run (answered %d, calls %d, approvals %d)", s, rep.Answered, rep.Calls, rep.Approvals)
	}
}

// TestSoak runs the soak (soak.go): one session of -soak-turns turns with
// forks and backend switches, its history and its processes' memory
// measured along the way, and the same must-be-zero checks as the other
// modes. It is bounded by -soak-for and by the test's own -timeout, and
// reports how far it got.
func TestSoak(t *testing.T) {
	if !*soak {
		// Not counted as passing: it reports SKIP. The soak is not part
		// of CI (1,000 turns take about an hour).
		t.Skip("the soak runs with -soak (-soak-turns N, default 1,000: about an hour, so give -timeout 90m); it is not part of CI")
	}
	s, dir, log := setUp(t, " -soak -soak-turns "+strconv.Itoa(*soakTurns))
	cfg := Soak(s, dir, *soakTurns)
	cfg.Log = log
	cfg.Soak.For = *soakFor
	cfg.Soak.Profiles = *soakProfiles
	if *soakApprove {
		cfg.ApprovalMode = "unless-readonly"
	}
	pickFaults(t, &cfg)
	rep := runBounded(t, s, dir, cfg, *soakFor)
	if rep.Answered == 0 || rep.Calls == 0 {
		t.Fatalf("seed %d: the soak did not run (answered %d, calls %d)", s, rep.Answered, rep.Calls)
	}
}

// TestLoad runs the load mode (load.go): -load-sessions sessions on the
// Discord fake, each -load-turns turns of approved calls, bounded by
// -load-for and the test's -timeout, with the same must-be-zero checks as
// the other modes.
func TestLoad(t *testing.T) {
	if !*load {
		// Not counted as passing: it reports SKIP. The load mode is not
		// part of CI (200 sessions take about 20 minutes).
		t.Skip("the load mode runs with -load (-load-sessions N, default 200: about 20 minutes, so give -timeout 30m); it is not part of CI")
	}
	s, dir, log := setUp(t, fmt.Sprintf(" -load -load-sessions %d -load-turns %d -load-for %s", *loadSessions, *loadTurns, *loadFor))
	cfg := Load(s, dir, *loadSessions, *loadTurns)
	cfg.Log = log
	cfg.Load.For = *loadFor
	pickFaults(t, &cfg)
	rep := runBounded(t, s, dir, cfg, *loadFor)
	if rep.Answered == 0 || rep.Calls == 0 || rep.Approvals == 0 {
		t.Fatalf("seed %d: the load did not run (answered %d, calls %d, approvals %d)", s, rep.Answered, rep.Calls, rep.Approvals)
	}
}

// runBounded runs a soak or load configuration and reports it. The
// test's own deadline bounds the run too (else the mode's bound plus ten
// minutes), leaving time to stop the stack and print the report.
func runBounded(t *testing.T, s uint64, dir string, cfg Config, bound time.Duration) Report {
	t.Helper()
	deadline := time.Now().Add(bound + 10*time.Minute)
	if dl, ok := t.Deadline(); ok {
		deadline = dl.Add(-90 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", s, err)
	}
	finish(t, s, dir, rep)
	return rep
}

// setUp checks the tools a run needs and returns its seed (printed with
// the command that replays it), directory and log.
func setUp(t *testing.T, mode string) (uint64, string, *slog.Logger) {
	t.Helper()
	for _, tool := range []string{"bwrap", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the chaos suite needs %s on PATH (.ci/run installs it): %v", tool, err)
		}
	}
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./chaos -run %s -seed %d%s)", s, t.Name(), s, mode)
	dir := t.TempDir()
	logFile, err := os.Create(filepath.Join(dir, "chaos.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	return s, dir, slog.New(slog.NewTextHandler(logFile, nil))
}

func pickFaults(t *testing.T, cfg *Config) {
	t.Helper()
	if *faults == "" {
		return
	}
	fs, err := ParseFaults(*faults)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Faults = fs
}

// finish prints the report and fails the test on any must-be-zero count,
// keeping the run's state and logs with CHAOS_KEEP=1.
func finish(t *testing.T, s uint64, dir string, rep Report) {
	t.Helper()
	t.Logf("\n%s", rep.Markdown())
	for _, p := range rep.Problems {
		t.Log(p)
	}
	seen := map[string]int{}
	for _, r := range rep.Replies {
		seen[r]++
	}
	for r, n := range seen {
		t.Logf("a private reply the user read after a click (%d×): %.300q", n, r)
	}
	if f := rep.Failures(); len(f) > 0 {
		if os.Getenv("CHAOS_KEEP") != "" {
			keep := filepath.Join(os.TempDir(), "chaos-"+strconv.FormatUint(s, 10)+"-"+time.Now().Format("150405"))
			_ = os.Rename(dir, keep)
			t.Logf("state and logs kept in %s", keep)
		}
		t.Fatalf("seed %d: %v", s, f)
	}
}
