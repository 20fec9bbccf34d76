package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// The load mode (issue 16): many sessions at once, each a Discord thread
// running turns of 5–10 tool calls, every call approved by the scripted
// user clicking the card's Approve button (a Discord interaction through
// the fake), on the chaos stack with no faults unless asked for. It
// answers what the other modes cannot: whether anything is lost or done
// twice when hundreds of sessions share the workers, the bots and the
// platform's limits, and how the latencies and memory grow.
//
// Why Discord: on Slack every bot shares one workspace budget for
// chat.update (about 50 a minute, which the Slack fake enforces with
// 429s), and every approval needs card edits of its own, so 200 sessions
// in one workspace would measure Slack's budget, about 25 calls a minute.
// Discord limits edits per channel (each session is its own thread) and
// per bot (50 requests a second), both of which the Discord fake keeps.

// LoadConfig is what the load mode adds to a run.
type LoadConfig struct {
	// StartEvery is the pace sessions start at: a session's first message
	// every StartEvery, not all at once. All at once would measure the
	// bots' own start-up pacing (every first message opens a thread and
	// starts a workflow, and Discord's global budget holds a bot to 50
	// requests a second) rather than sessions running side by side.
	StartEvery time.Duration
	// For bounds the run: no session starts and no turn begins after it
	// has passed (nor within loadReserve of the run's deadline); turns
	// under way end, every started session still reads its markers back,
	// and the report says how far it got.
	For time.Duration
}

// loadReserve is the time left, before the run's deadline, for the turns
// under way to end, the read-back and the checks.
const loadReserve = 5 * time.Minute

// Load is the load mode: sessions sessions (200 is the issue's) of turns
// turns each, on Discord, two worker hosts and two bot replicas, no faults
// and no redeliveries of the user's messages beyond Discord's own (each
// reaches both replicas).
func Load(seed uint64, dir string, sessions, turns int) Config {
	c := Short(seed, dir)
	c.Platform = PlatformDiscord
	c.Sessions, c.Turns, c.Hosts, c.Bots = sessions, turns, 2, 2
	c.Faults = nil
	c.MaxDeliveries = 1
	// A turn of 10 approved calls among 200 sessions on two shared
	// cores takes minutes (each call waits for its click, its command and
	// a model call, all queued behind the other sessions'): lost means
	// not ended in 15 minutes.
	c.TurnTimeout = 15 * time.Minute
	c.Load = &LoadConfig{StartEvery: 250 * time.Millisecond, For: 15 * time.Minute}
	return c
}

func (lc *LoadConfig) describe(cfg Config) string {
	faults := "no faults"
	if len(cfg.Faults) > 0 {
		faults = fmt.Sprintf("a fault every ~%s (%s)", cfg.FaultEvery, strings.Join(cfg.Faults, ", "))
	}
	lo, hi := cfg.callRange()
	return fmt.Sprintf("load on %s: %d sessions × %d turns of %d–%d approved calls, one session started every %s, no turn started after %s; %d worker hosts, %d bot replicas; %s",
		cfg.Platform, cfg.Sessions, cfg.Turns, lo, hi, lc.StartEvery, lc.For, cfg.Hosts, cfg.Bots, faults)
}

// loadState is the load mode's record, under its own lock.
type loadState struct {
	stop    time.Time
	mu      sync.Mutex
	started int
	// stopped are the sessions the bound stopped before their last turn.
	stopped map[string]bool
}

// over reports whether the bound has passed for session sid (nil: the
// other modes, never), and records it for the report.
func (ls *loadState) over(sid string) bool {
	if ls == nil || time.Now().Before(ls.stop) {
		return false
	}
	ls.mu.Lock()
	ls.stopped[sid] = true
	ls.mu.Unlock()
	return true
}

// driveLoad starts the sessions at the configured pace, each running its
// turns as the short mode's users do (driveSession), until the bound.
func (w *workload) driveLoad(ctx context.Context, s *stack, start time.Time) {
	stop := start.Add(w.cfg.Load.For)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-loadReserve).Before(stop) {
		stop = dl.Add(-loadReserve)
	}
	w.load = &loadState{stop: stop, stopped: map[string]bool{}}
	var users sync.WaitGroup
	tick := time.NewTicker(w.cfg.Load.StartEvery)
	defer tick.Stop()
	for i := range w.cfg.Sessions {
		if ctx.Err() != nil || time.Now().After(stop) {
			break
		}
		sid := fmt.Sprintf("s%03d", i+1)
		rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(i)+2))
		w.load.mu.Lock()
		w.load.started++
		w.load.mu.Unlock()
		users.Go(func() { w.driveSession(ctx, s, rng, sid) })
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	users.Wait()
}

// LoadReport is how far a load run got.
type LoadReport struct {
	Sessions, Started int
	// Complete sessions ran every turn; Stopped were stopped by the bound
	// before their last turn.
	Complete, Stopped int
	TurnsPlanned      int
}

func (w *workload) loadReport() *LoadReport {
	w.load.mu.Lock()
	defer w.load.mu.Unlock()
	lr := &LoadReport{Sessions: w.cfg.Sessions, Started: w.load.started, Stopped: len(w.load.stopped), TurnsPlanned: w.cfg.Sessions * w.cfg.Turns}
	w.mu.Lock()
	runs := map[string]int{}
	for _, t := range w.turns {
		if t.Outcome == "answered" {
			runs[t.Session]++
		}
	}
	w.mu.Unlock()
	for _, n := range runs {
		if n == w.cfg.Turns {
			lr.Complete++
		}
	}
	return lr
}

func (lr *LoadReport) markdown(b *strings.Builder, r Report) {
	row := func(k string, v any) { fmt.Fprintf(b, "| %s | %v |\n", k, v) }
	row("sessions started / planned", fmt.Sprintf("%d / %d", lr.Started, lr.Sessions))
	row("sessions that ran every turn / stopped by the time bound", fmt.Sprintf("%d / %d", lr.Complete, lr.Stopped))
	row("turns run / planned", fmt.Sprintf("%d / %d", r.Turns, lr.TurnsPlanned))
}
