// Package workerapp assembles the worker process from configuration: the
// session workflow and the model activity on the session queue, and the
// sandbox activities of every backend it can serve on the backend and host
// queues. cmd/worker and cmd/dev run it, and the integration tests start
// the very same assembly against an embedded Temporal server.
package workerapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/redact"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/blobstore"
	"github.com/sandbot/sandbot/sandbox/local"
	"github.com/sandbot/sandbot/session"
	"github.com/sandbot/sandbot/workflows"
)

// Worker is a running set of Temporal workers: one on the session task
// queue, one per served backend queue, and one on this host's own queue.
type Worker struct {
	workers []worker.Worker
	// Served lists the backends this worker serves, sorted.
	Served []string
	// Unavailable maps backends that were configured but could not start
	// to the reason.
	Unavailable map[string]string
	// HostQueue is this worker host's task queue.
	HostQueue string
	// deployment identifies this installation (see DeploymentID); empty
	// when it could not be told, and then nothing is swept.
	deployment string
	store      *blobstore.Store
	// collected is when this worker last collected unreferenced objects.
	collected time.Time
	backends  []sandbox.Backend
	cancel    context.CancelFunc
	client    client.Client
	namespace string
	taskQueue string
	log       *slog.Logger
}

// Options let tests and cmd/dev adjust the assembly. The zero value is
// production's.
type Options struct {
	// Backends, when set, replaces the backends built from the config
	// (tests inject a preconfigured backend).
	Backends []sandbox.Backend
	// Model, when set, replaces the model activities built from the config.
	Model *agent.Activities
	// Temporal tunes the Temporal workers.
	Temporal worker.Options
	// Policy, when set, adjusts the session policy this worker serves
	// (tests use limits that configuration would refuse).
	Policy func(*session.Policy)
}

// Start builds and starts the worker. cfg must have been validated for a
// role that reads the worker's variables. Stop it with (*Worker).Stop.
func Start(ctx context.Context, c client.Client, cfg *config.Config, opts Options, log *slog.Logger) (*Worker, error) {
	models := opts.Model
	if models == nil {
		m, err := agent.NewActivities(agent.Config{
			BaseURL: cfg.Model.BaseURL, APIKey: cfg.Model.APIKey, Model: cfg.Model.Name, Allowed: cfg.Model.Allowed,
			Stream: cfg.Model.Stream, RequestTimeout: cfg.Model.Timeout,
			Window: agent.Window{ContextTokens: cfg.Model.ContextTokens, AnswerTokens: cfg.Model.AnswerTokens},
			Vision: cfg.Model.Vision,
		})
		if err != nil {
			return nil, fmt.Errorf("worker: model: %w", err)
		}
		models = m
	}
	known := secrets(cfg)
	red := redact.New(known...)
	if short := red.Skipped(); len(short) > 0 {
		log.Warn("secrets too short to be redacted from agent output", "settings", short, "min_bytes", redact.MinLen)
	}
	// Everything the worker and its backends log is scrubbed too: log
	// lines quote file names, daemon answers and model errors.
	log = slog.New(redact.Handler(log.Handler(), red))
	models.Redactor = red
	store, err := blobstore.Open(ctx, cfg.Sandbox.SnapshotURL)
	if err != nil {
		return nil, fmt.Errorf("worker: snapshot store %s: %w", cfg.Sandbox.SnapshotURL, err)
	}
	if err := store.Check(ctx); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("worker: snapshot store (SANDBOT_SANDBOX_SNAPSHOT_URL): %w", err)
	}
	// Model calls keep their transcripts next to the snapshots (see
	// agent.TranscriptStore), so history holds each message about once.
	models.Transcripts = store
	models.Images = store
	w := &Worker{HostQueue: session.HostQueue(cfg.Temporal.TaskQueue, cfg.Sandbox.HostID), Unavailable: map[string]string{}, store: store, client: c,
		namespace: cfg.Temporal.Namespace, taskQueue: cfg.Temporal.TaskQueue, log: log}
	if cfg.Sandbox.SingleHost {
		// One worker holds every sandbox, so its session queue is also its
		// host queue, and sandbox activities are dispatched eagerly to the
		// worker that just ran the workflow task.
		w.HostQueue = cfg.Temporal.TaskQueue
	}
	w.deployment, err = DeploymentID(ctx, c, cfg.Temporal.Namespace, cfg.Temporal.TaskQueue)
	if err != nil {
		// Without an identity this worker cannot tell its containers from
		// another installation's: it labels them as unidentified and never
		// sweeps.
		log.Warn("cannot identify this deployment; the orphan sweeper is off", "error", err)
	}
	backends := opts.Backends
	if backends == nil {
		if backends, err = w.buildBackends(ctx, cfg, log); err != nil {
			_ = store.Close()
			return nil, fmt.Errorf("worker: %w", err)
		}
	}
	repos, err := repoActivities(cfg, store, red, known, log)
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("worker: %w", err)
	}
	byName, err := sandbox.NewBackends(backends...)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	w.Served = byName.Names()
	w.backends = backends
	acts := &sandbox.Activities{Backends: byName, Store: store, HostQueue: w.HostQueue, SessionQueue: cfg.Temporal.TaskQueue, Logger: log, Redactor: red,
		Limits: sandbox.Limits{
			WorkspaceBytes: int64(cfg.Sandbox.WorkspaceQuota), WorkspaceSetting: "SANDBOT_SANDBOX_WORKSPACE_QUOTA",
			SnapshotBytes: int64(cfg.Sandbox.SnapshotMax), SnapshotSetting: "SANDBOT_SANDBOX_SNAPSHOT_MAX",
		}}
	if err := configureFiles(acts, cfg); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("worker: %w", err)
	}

	SizeSessionCache(cfg)
	wo := opts.Temporal
	if wo.MaxHeartbeatThrottleInterval == 0 {
		// Let sandbox heartbeats through every second so /stop kills a
		// running command promptly (the SDK's default holds them up to 60 s).
		wo.MaxHeartbeatThrottleInterval = sandbox.HeartbeatEvery
	}
	// Only updates the bot signed reach a session (see DecisionGuard).
	wo.Interceptors = append(append([]interceptor.WorkerInterceptor(nil), wo.Interceptors...), workflows.NewDecisionGuard([]byte(cfg.DecisionKey)))
	main := worker.New(c, cfg.Temporal.TaskQueue, wo)
	main.RegisterWorkflowWithOptions(workflows.Session, workflow.RegisterOptions{Name: session.WorkflowName})
	main.RegisterActivity(models)
	policy := cfg.SessionPolicy()
	if opts.Policy != nil {
		opts.Policy(&policy)
	}
	main.RegisterActivity(&workflows.PolicyActivities{Policy: policy})
	w.workers = append(w.workers, main)
	var queues []string
	if w.HostQueue == cfg.Temporal.TaskQueue {
		main.RegisterActivity(acts)
	} else {
		queues = append(queues, w.HostQueue)
	}
	for _, name := range w.Served {
		queues = append(queues, session.BackendQueue(cfg.Temporal.TaskQueue, name))
	}
	for _, q := range queues {
		sw := worker.New(c, q, wo)
		sw.RegisterActivity(acts)
		w.workers = append(w.workers, sw)
	}
	if git, err := exec.LookPath(repos.Git.Binary()); err != nil {
		log.Warn("no git binary: this worker does not serve the repository loop (clone, /diff, /pr); run one from an image with git, such as worker-local", "error", err)
	} else {
		rw := worker.New(c, session.RepoQueue(cfg.Temporal.TaskQueue), wo)
		rw.RegisterActivity(repos)
		w.workers = append(w.workers, rw)
		log.Debug("serving the repository loop", "git", git)
	}
	for _, x := range w.workers {
		if err := x.Start(); err != nil {
			w.Stop()
			return nil, fmt.Errorf("worker: start: %w", err)
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	if w.deployment != "" {
		go w.runSweeper(sctx, SweepEvery)
	}
	go w.runSessionCounter(sctx, SessionsEvery)
	log.Info("worker started", "task_queue", cfg.Temporal.TaskQueue, "host_queue", w.HostQueue,
		"backends", strings.Join(w.Served, ","), "model", cfg.Model.Name)
	for name, why := range w.Unavailable {
		log.Warn("backend not served", "backend", name, "reason", why)
	}
	return w, nil
}

// SizeSessionCache sizes the process's Temporal workflow cache to
// SANDBOT_SESSION_CACHE (nothing when it is 0, as in a Config not from
// Load). Idle sessions stay in that cache, each with its state and
// goroutines, until evicted; the SDK's own bound (10,000) let a worker's
// memory grow with every session it had served. The cache belongs to the
// process and takes its size when the process's first SDK worker is
// created: Start calls this before its own, and cmd/dev before its
// embedded server, which runs SDK workers of its own.
func SizeSessionCache(cfg *config.Config) {
	if cfg.Session.Cache > 0 {
		worker.SetStickyWorkflowCacheSize(cfg.Session.Cache)
	}
}

// buildBackends builds the configured backends. One that cannot run yet
// is left unserved with its reason, so the worker serves the others; one
// that could only run unsafely (the local backend where commands cannot be
// confined) or whose provider refuses the configured credentials stops
// start-up, naming the setting to fix.
func (w *Worker) buildBackends(ctx context.Context, cfg *config.Config, log *slog.Logger) ([]sandbox.Backend, error) {
	var out []sandbox.Backend
	for _, name := range cfg.Backends() {
		b, err := newBackend(ctx, name, cfg, w.deployment, log)
		if errors.Is(err, local.ErrCannotConfine) {
			return nil, fmt.Errorf("backend %s: %w", name, err)
		}
		if err != nil {
			w.Unavailable[name] = err.Error()
			continue
		}
		if err := checkAtStart(ctx, b, log); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func newBackend(ctx context.Context, name string, cfg *config.Config, deployment string, log *slog.Logger) (sandbox.Backend, error) {
	switch name {
	case "local":
		return newLocalBackend(cfg, deployment, log.With("backend", "local"))
	case "docker":
		return newDockerBackend(ctx, cfg, deployment, log.With("backend", "docker"))
	case "daytona":
		return newDaytonaBackend(cfg, deployment, log.With("backend", "daytona"))
	case "e2b":
		return newE2BBackend(cfg, deployment, log.With("backend", "e2b"))
	}
	return nil, errors.New("unknown backend")
}

// SweepEvery is how often a worker sweeps what ended sessions left.
const SweepEvery = 10 * time.Minute

// Swept is what one sweep removed.
type Swept struct {
	// Sandboxes are the removed sandboxes (container IDs, workspace names).
	Sandboxes []string
	// Snapshots are the sessions whose snapshots were deleted.
	Snapshots []string
	// Objects counts the deleted workspace objects no snapshot named.
	Objects int
}

// Sweep removes what sessions that ended without /destroy left behind on
// this worker: their sandboxes on every backend that can sweep (Docker
// containers, local workspaces) and their snapshots. It does nothing when
// the deployment could not be identified. The worker sweeps at start and
// every SweepEvery; tests and operators may call it at any time.
func (w *Worker) Sweep(ctx context.Context) Swept {
	if w.deployment == "" {
		return Swept{}
	}
	swept := Swept{
		Sandboxes: SweepOrphans(ctx, w.client, w.backends, w.log),
		Snapshots: SweepSnapshots(ctx, w.client, w.store, w.deployment, w.log),
	}
	// Collecting reads every manifest of the deployment, so it runs at
	// most once per grace (objects younger than it stay anyway).
	if now := time.Now(); now.Sub(w.collected) >= sandbox.SweepGrace {
		w.collected = now
		swept.Objects = CollectObjects(ctx, w.store, w.deployment, w.log)
	}
	return swept
}

// runSweeper sweeps at start and then every interval until ctx ends.
func (w *Worker) runSweeper(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		w.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stop stops every Temporal worker and waits for running activities.
func (w *Worker) Stop() {
	if w.cancel != nil {
		w.cancel()
	}
	for _, x := range w.workers {
		x.Stop()
	}
	if w.store != nil {
		_ = w.store.Close()
	}
}

// Describe is the start-up banner: what this worker serves.
func (w *Worker) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sandbot worker: serving backends [%s] on host queue %s\n", strings.Join(w.Served, ", "), w.HostQueue)
	names := make([]string, 0, len(w.Unavailable))
	for n := range w.Unavailable {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  ! backend %s is not served: %s\n", n, w.Unavailable[n])
	}
	return b.String()
}
