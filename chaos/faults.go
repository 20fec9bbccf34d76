package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// Fault kinds. Each is injected at random moments of the run, drawn from
// the run's seed; the log line of every injection names it, so a failing
// run can be read back against its faults.
const (
	FaultWorkerKill    = "worker-sigkill"
	FaultBotRestart    = "bot-restart"
	FaultServerRestart = "temporal-restart"
	FaultSocketDrop    = "slack-socket-drop"
	FaultRateLimit     = "slack-429-storm"
	FaultModel500      = "model-500s"
	FaultModel401      = "model-401-window"
	FaultDiskFull      = "snapshot-disk-full"
	FaultBotsOnEvent   = "bots-killed-on-event"
	// FaultDockerRestart stops the Docker daemon the docker sessions run
	// on and starts it again (dockerd.go); a run that names it serves the
	// docker backend (Config.Docker) and moves some sessions there.
	FaultDockerRestart = "docker-restart"
	// FaultPostgresRestart stops the PostgreSQL the Temporal server is on
	// and starts it again: only on the cluster shape (Config.Cluster),
	// whose runs add it to their faults (ClusterFaults).
	FaultPostgresRestart = "postgres-restart"
)

// AllFaults is every kind the suite knows, in a fixed order (the seed's
// draws depend on it).
var AllFaults = []string{FaultWorkerKill, FaultBotRestart, FaultServerRestart, FaultSocketDrop, FaultRateLimit, FaultModel500, FaultModel401, FaultDiskFull, FaultBotsOnEvent, FaultDockerRestart}

// ClusterFaults are the faults only the cluster shape (Config.Cluster)
// has; a cluster run injects them besides its mode's own.
var ClusterFaults = []string{FaultPostgresRestart}

// ParseFaults reads a comma-separated list of fault names, or "all".
func ParseFaults(list string) ([]string, error) {
	if strings.TrimSpace(list) == "all" {
		return AllFaults, nil
	}
	var out []string
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(AllFaults, f) && !slices.Contains(ClusterFaults, f) {
			return nil, fmt.Errorf("chaos: unknown fault %q; the faults are %s (and, with -cluster, %s), or all", f, strings.Join(AllFaults, ", "), strings.Join(ClusterFaults, ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

type injector struct {
	s   *stack
	w   *workload
	rng *rand.Rand
	cfg Config

	mu     sync.Mutex
	counts map[string]int
	errs   []string
}

// run injects one fault every FaultEvery (±50 %) until ctx ends. Faults
// run one at a time: each finishes (the killed process is back) before the
// next is drawn, so the stack is never left without a worker host or a bot
// for longer than one fault takes.
func (in *injector) run(ctx context.Context) {
	for {
		d := in.cfg.FaultEvery/2 + time.Duration(in.rng.Int64N(int64(in.cfg.FaultEvery)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		kind := in.pick()
		if err := in.inject(ctx, kind); err != nil && ctx.Err() == nil {
			in.mu.Lock()
			in.errs = append(in.errs, fmt.Sprintf("%s: %v", kind, err))
			in.mu.Unlock()
		}
	}
}

// weights make some faults likelier than others: process deaths and
// platform trouble are common; a refused model key (which fails the turn
// visibly, so the user asks again) and a server restart less so.
var weights = map[string]int{FaultWorkerKill: 3, FaultBotRestart: 2, FaultServerRestart: 1, FaultSocketDrop: 2,
	FaultRateLimit: 2, FaultModel500: 2, FaultModel401: 1, FaultDiskFull: 1, FaultBotsOnEvent: 1, FaultDockerRestart: 1, FaultPostgresRestart: 1}

func (in *injector) pick() string {
	total := 0
	for _, k := range in.cfg.Faults {
		total += max(weights[k], 1)
	}
	n := in.rng.IntN(total)
	for _, k := range in.cfg.Faults {
		if n -= max(weights[k], 1); n < 0 {
			return k
		}
	}
	return in.cfg.Faults[0]
}

func (in *injector) inject(ctx context.Context, kind string) error {
	in.mu.Lock()
	in.counts[kind]++
	in.mu.Unlock()
	log := in.s.log.With("fault", kind)
	switch kind {
	case FaultWorkerKill:
		h := in.s.hosts[in.rng.IntN(len(in.s.hosts))]
		down := time.Duration(200+in.rng.IntN(2000)) * time.Millisecond
		log.Info("chaos: SIGKILL", "proc", h.name, "pid", h.pid(), "down", down)
		h.kill()
		sleep(ctx, down)
		return h.start(ctx, in.s.workerBanner(h.name[len("worker-"):]))
	case FaultBotRestart:
		b := in.s.bots[in.rng.IntN(len(in.s.bots))]
		log.Info("chaos: SIGKILL", "proc", b.name, "pid", b.pid())
		b.kill()
		sleep(ctx, time.Duration(in.rng.IntN(1500))*time.Millisecond)
		return b.start(ctx, "")
	case FaultServerRestart:
		down := time.Duration(500+in.rng.IntN(2500)) * time.Millisecond
		// The server on PostgreSQL (-cluster) is a process of its own:
		// it is stopped, or killed as a crash would.
		crash := in.s.cluster != nil && in.rng.IntN(2) == 0
		log.Info("chaos: Temporal server restart", "down", down, "crash", crash)
		return in.s.restartServer(ctx, down, crash)
	case FaultPostgresRestart:
		if in.s.cluster == nil {
			return fmt.Errorf("%s needs the Temporal server on PostgreSQL (-cluster)", kind)
		}
		down := time.Duration(500+in.rng.IntN(2500)) * time.Millisecond
		crash := in.rng.IntN(2) == 0
		log.Info("chaos: PostgreSQL restart", "down", down, "crash", crash)
		pg := in.s.cluster.Postgres()
		var err error
		if crash {
			err = pg.Kill()
		} else {
			err = pg.Stop()
		}
		if err != nil {
			return err
		}
		sleep(ctx, down)
		return pg.Start()
	case FaultSocketDrop:
		if in.s.discord != nil {
			log.Info("chaos: every gateway connection dropped")
			in.s.discord.DropConnections()
			return nil
		}
		log.Info("chaos: every Socket Mode connection dropped")
		in.s.slack.DropConnections()
	case FaultRateLimit:
		u, p := 3+in.rng.IntN(8), 1+in.rng.IntN(4)
		if in.s.discord != nil {
			log.Info("chaos: 429 storm", "edits", u, "messages", p)
			in.s.discord.RateLimitNext(fakediscord.RouteEditMessage, u, time.Second, false)
			in.s.discord.RateLimitNext(fakediscord.RouteCreateMessage, p, time.Second, false)
			return nil
		}
		log.Info("chaos: 429 storm", "chat.update", u, "chat.postMessage", p)
		in.s.slack.RateLimit("chat.update", 1, u)
		in.s.slack.RateLimit("chat.postMessage", 1, p)
	case FaultModel500:
		n := 2 + in.rng.IntN(5)
		log.Info("chaos: model answers 500", "requests", n)
		in.w.flaps.serverErrors(n)
	case FaultModel401:
		d := time.Duration(500+in.rng.IntN(1500)) * time.Millisecond
		log.Info("chaos: model refuses the key (401)", "window", d)
		in.w.flaps.authWindow(d)
	case FaultBotsOnEvent:
		if in.s.discord == nil {
			return in.killBotsOnEvent(ctx, log)
		}
		return fmt.Errorf("%s needs the Slack fake's delivery hooks; the Discord fake has none", kind)
	case FaultDockerRestart:
		if in.s.docker == nil {
			return fmt.Errorf("%s needs the docker backend (Config.Docker)", kind)
		}
		down := time.Duration(500+in.rng.IntN(4500)) * time.Millisecond
		crash := in.rng.IntN(2) == 0
		how := map[bool]string{true: "SIGKILL", false: "SIGTERM"}[crash]
		log.Info("chaos: Docker daemon stopped", "how", how, "down", down)
		if err := restartDockerd(ctx, in.s.docker, down, crash); err != nil {
			return err
		}
		log.Info("chaos: Docker daemon answers again")
	case FaultDiskFull:
		hold := time.Duration(1000+in.rng.IntN(4000)) * time.Millisecond
		log.Info("chaos: snapshot store full", "hold", hold)
		return fillDisk(ctx, in.s.snapMount, hold)
	default:
		return fmt.Errorf("unknown fault %q", kind)
	}
	return nil
}

// killBotsOnEvent is FaultBotsOnEvent on the Slack fake.
func (in *injector) killBotsOnEvent(ctx context.Context, log *slog.Logger) error {
	// Every replica dies the moment Slack delivers the next event or
	// click, before any could hand it on (Slack must resend an event
	// nobody acknowledged; the user clicks again), or the moment a bot
	// acknowledges one (an acknowledged event must already be in the
	// session: Slack never sends it again).
	fired := make(chan string, 1)
	var armMu sync.Mutex
	armed := true
	killAll := func(what string) {
		armMu.Lock()
		defer armMu.Unlock()
		if !armed {
			return
		}
		armed = false
		for _, b := range in.s.bots {
			b.kill()
		}
		fired <- what
	}
	onAck := in.rng.IntN(2) == 0
	if onAck {
		in.s.slack.AfterNextAck(func(a fakeslack.Ack) { killAll("ack of " + a.EnvelopeID) })
	} else {
		in.s.slack.AfterNextSend(func(e fakeslack.Envelope) { killAll("delivery of " + e.ID + " (" + e.Type + ")") })
	}
	// disarm reports whether the kill had not happened (and now will
	// not); if it had, the bots must be started again.
	disarm := func() bool {
		armMu.Lock()
		defer armMu.Unlock()
		in.s.slack.AfterNextAck(nil)
		in.s.slack.AfterNextSend(nil)
		was := armed
		armed = false
		return was
	}
	var what string
	select {
	case what = <-fired:
	case <-ctx.Done():
		if disarm() {
			return nil
		}
		what = <-fired
	case <-time.After(time.Minute):
		if disarm() {
			log.Info("chaos: no event in a minute; nothing killed")
			return nil
		}
		what = <-fired
	}
	log.Info("chaos: every bot SIGKILLed", "on", what)
	sleep(ctx, time.Duration(in.rng.IntN(1500))*time.Millisecond)
	for _, b := range in.s.bots {
		if err := b.start(ctx, ""); err != nil {
			return err
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
