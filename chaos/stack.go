package chaos

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/sys/unix"

	"github.com/sandbot/sandbot/internal/devserver"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

// stack is one sandbot deployment built from its real parts: the embedded
// Temporal server on a SQLite file (restartable on the same port), worker
// hosts that are cmd/worker processes with host IDs and workspace roots of
// their own, bot replicas that are cmd/bot processes on the Slack fake's
// Socket Mode, a snapshot store on the file system the hosts share, and the
// OpenAI fake with the workload's responder.
type stack struct {
	dir   string
	log   *slog.Logger
	queue string
	key   string

	srvMu  sync.Mutex
	srv    *devserver.Server
	dbPath string
	port   int
	ns     string
	cl     client.Client

	// snapMount is the tmpfs the snapshot store is on (the disk-full
	// fault's), or "".
	snapMount string

	model *fakeopenai.Server
	slack *fakeslack.Server
	hosts []*proc
	bots  []*proc
}

// hostIDs name the worker hosts.
func hostID(i int) string { return fmt.Sprintf("host-%c", 'a'+i) }

// editInterval is the pace the bots keep per Slack message; the fake checks
// it (sandbot's default, SANDBOT_SLACK_EDIT_INTERVAL).
const editInterval = 1500 * time.Millisecond

func startStack(ctx context.Context, cfg Config, w *workload, log *slog.Logger) (*stack, error) {
	root, err := moduleRoot(".")
	if err != nil {
		return nil, err
	}
	s := &stack{dir: cfg.Dir, log: log, queue: "sandbot-chaos", key: rand.Text() + rand.Text()}
	workerBin, botBin, err := buildCommands(ctx, root, s.dir)
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, portText, _ := net.SplitHostPort(addr)
	s.port, _ = strconv.Atoi(portText)
	s.dbPath = filepath.Join(s.dir, "temporal", "temporal.db")
	if err := s.startServer(ctx); err != nil {
		return nil, err
	}
	cl, err := client.Dial(client.Options{HostPort: s.hostPort(), Namespace: s.ns, Logger: quietSDK{}})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("dial the embedded server: %w", err)
	}
	s.cl = cl

	s.model = fakeopenai.New(fakeopenai.WithResponder(w.respond))
	// Over the workspace's chat.update budget the fake answers 429, as
	// Slack does: several bot replicas each pace themselves, and only
	// Slack sees their sum (the report counts those 429s).
	// Slack sends an unacknowledged event again, about 3 s, 1 min and 5
	// min later: an event delivered to a bot that was killed before it
	// handed the event on comes back to a live replica.
	s.slack = fakeslack.New(fakeslack.Options{TeamID: "TCHAOS", MinUpdateInterval: editInterval, RateLimitOverBudget: true,
		Users:            []fakeslack.User{{ID: approver, Name: "alice"}},
		RedeliverUnacked: []time.Duration{3 * time.Second, time.Minute, 5 * time.Minute}})

	snap := filepath.Join(s.dir, "snapshots")
	if slices.Contains(cfg.Faults, FaultDiskFull) {
		if s.snapMount, snap, err = snapshotFS(s.dir); err != nil {
			s.close()
			return nil, err
		}
	} else if err := os.MkdirAll(snap, 0o700); err != nil {
		s.close()
		return nil, err
	}
	for i := range cfg.Hosts {
		id := hostID(i)
		maddr, err := freeAddr()
		if err != nil {
			s.close()
			return nil, err
		}
		env := append(s.env(maddr),
			"SANDBOT_MODEL_BASE_URL="+s.model.URL(),
			"SANDBOT_MODEL_NAME=fake-model",
			"SANDBOT_MODEL_API_KEY=sk-chaos-model-key-0123456789abcdef",
			"SANDBOT_SANDBOX_HOST_ID="+id,
			"SANDBOT_SANDBOX_LOCAL_ROOT="+filepath.Join(s.dir, id, "workspaces"),
			"SANDBOT_SANDBOX_SNAPSHOT_URL=file://"+snap,
			"SANDBOT_SESSION_EXEC_HEARTBEAT=2s",
			"SANDBOT_SESSION_APPROVAL_MODE=unless-readonly",
		)
		p := newProc("worker-"+id, workerBin, s.dir, env)
		if err := p.start(ctx, s.workerBanner(id)); err != nil {
			s.close()
			return nil, err
		}
		s.hosts = append(s.hosts, p)
	}
	for i := range cfg.Bots {
		maddr, err := freeAddr()
		if err != nil {
			s.close()
			return nil, err
		}
		o := s.slack.Options()
		env := append(s.env(maddr),
			"SANDBOT_SLACK_BOT_TOKEN="+o.BotToken,
			"SANDBOT_SLACK_APP_TOKEN="+o.AppToken,
			"SANDBOT_SLACK_API_BASE="+s.slack.URL(),
		)
		p := newProc(fmt.Sprintf("bot-%d", i+1), botBin, s.dir, env)
		if err := p.start(ctx, ""); err != nil {
			s.close()
			return nil, err
		}
		s.bots = append(s.bots, p)
	}
	// Every replica has its Socket Mode connection open before the
	// workload starts.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := s.slack.WaitFor(wctx, func(sn fakeslack.Snapshot) bool { return sn.Open >= cfg.Bots }); err != nil {
		s.close()
		return nil, fmt.Errorf("bots connecting to Slack: %w", err)
	}
	return s, nil
}

func (s *stack) workerBanner(id string) string {
	return "sandbot worker: serving backends [local] on host queue " + session.HostQueue(s.queue, id)
}

// env is what every sandbot process gets.
func (s *stack) env(metricsAddr string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir, "TMPDIR=" + os.TempDir(),
		"SANDBOT_TEMPORAL_ADDRESS=" + s.hostPort(),
		"SANDBOT_TEMPORAL_NAMESPACE=" + s.ns,
		"SANDBOT_TEMPORAL_TASK_QUEUE=" + s.queue,
		"SANDBOT_DECISION_KEY=" + s.key,
		"SANDBOT_SANDBOX_BACKENDS=local",
		"SANDBOT_METRICS_ADDR=" + metricsAddr,
		"SANDBOT_LOG_LEVEL=info",
	}
}

func (s *stack) hostPort() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// startServer starts the embedded Temporal server on the stack's port and
// database file (again after restartServer stopped it).
func (s *stack) startServer(ctx context.Context) error {
	srv, err := devserver.Start(ctx, devserver.Options{DBPath: s.dbPath, Port: s.port,
		SearchAttributes: session.SearchAttributeTypes(), Logger: s.log.With("part", "temporal")})
	if err != nil {
		return fmt.Errorf("start the embedded Temporal server: %w", err)
	}
	s.srvMu.Lock()
	s.srv, s.ns = srv, srv.Namespace()
	s.srvMu.Unlock()
	return nil
}

// restartServer stops the Temporal server and starts it again after down;
// every client (workers, bots, the suite) reconnects by itself.
func (s *stack) restartServer(ctx context.Context, down time.Duration) error {
	s.srvMu.Lock()
	srv := s.srv
	s.srv = nil
	s.srvMu.Unlock()
	if srv != nil {
		if err := srv.Stop(); err != nil {
			return fmt.Errorf("stop the Temporal server: %w", err)
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(down):
	}
	// The port may linger for a moment after the stop.
	var err error
	for range 50 {
		if err = s.startServer(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return err
}

func (s *stack) close() {
	for _, p := range s.bots {
		p.stop()
	}
	for _, p := range s.hosts {
		p.stop()
	}
	if s.cl != nil {
		s.cl.Close()
	}
	if s.slack != nil {
		s.slack.Close()
	}
	if s.model != nil {
		s.model.Close()
	}
	s.srvMu.Lock()
	if s.srv != nil {
		_ = s.srv.Stop()
		s.srv = nil
	}
	s.srvMu.Unlock()
	if s.snapMount != "" {
		_ = unix.Unmount(s.snapMount, unix.MNT_DETACH)
		s.snapMount = ""
	}
}

// quietSDK drops the SDK client's own logging (reconnect warnings while the
// server restarts are expected).
type quietSDK struct{}

func (quietSDK) Debug(string, ...any) {}
func (quietSDK) Info(string, ...any)  {}
func (quietSDK) Warn(string, ...any)  {}
func (quietSDK) Error(string, ...any) {}
