package chaos

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dockerclient "github.com/moby/moby/client"
	"go.temporal.io/sdk/client"
	"golang.org/x/sys/unix"

	"github.com/sandbot/sandbot/internal/devserver"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/internal/freeport"
	"github.com/sandbot/sandbot/internal/pgtemporal"
	"github.com/sandbot/sandbot/internal/testimage"
	"github.com/sandbot/sandbot/internal/workerapp"
	"github.com/sandbot/sandbot/sandbox/docker"
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
	// cluster is the Temporal server on PostgreSQL (Config.Cluster), in
	// place of srv.
	cluster *pgtemporal.Cluster

	// snapMount is the tmpfs the snapshot store is on (the disk-full
	// fault's), or "".
	snapMount string

	model *fakeopenai.Server
	slack *fakeslack.Server
	// discord is the Discord fake, in place of the Slack fake
	// (Config.Platform, discord.go).
	discord *fakediscord.Server
	// chat is the chat fake the bots are on, as the workload and the
	// checks see it (the Slack fake, or the Discord fake in discord.go).
	chat  chatFake
	hosts []*proc
	bots  []*proc

	// docker is the Docker daemon's client when the stack serves the
	// docker backend (Config.Docker), dockerImage the local test image
	// its sessions run in, and deployment the label value its workers put
	// on their containers: close removes those (and no one else's).
	docker      *dockerclient.Client
	dockerImage string
	deployment  string
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
	if cfg.Docker {
		if err := s.useDocker(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.Cluster {
		if err := s.startCluster(ctx); err != nil {
			s.close()
			return nil, err
		}
	} else {
		addr, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		_, portText, _ := net.SplitHostPort(addr)
		s.port, _ = strconv.Atoi(portText)
		s.dbPath = filepath.Join(s.dir, "temporal", "temporal.db")
		if err := s.startServer(ctx); err != nil {
			return nil, err
		}
	}
	cl, err := client.Dial(client.Options{HostPort: s.hostPort(), Namespace: s.ns, Logger: quietSDK{}})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("dial the Temporal server: %w", err)
	}
	s.cl = cl
	if s.docker != nil {
		if s.deployment, err = workerapp.DeploymentID(ctx, cl, s.ns, s.queue); err != nil {
			s.close()
			return nil, fmt.Errorf("the deployment's ID, which labels its containers: %w", err)
		}
	}

	// The suite reads the model's calls through its responder; the fake
	// keeps only the last few requests, or a soak's thousands of
	// conversations would fill the suite's memory.
	s.model = fakeopenai.New(fakeopenai.WithResponder(w.respond), fakeopenai.WithKeep(100))
	// Over the workspace's chat.update budget the fake answers 429, as
	// Slack does: several bot replicas each pace themselves, and only
	// Slack sees their sum (the report counts those 429s).
	// Slack sends an unacknowledged event again, about 3 s, 1 min and 5
	// min later: an event delivered to a bot that was killed before it
	// handed the event on comes back to a live replica.
	var botEnv []string
	if cfg.Platform == PlatformDiscord {
		botEnv = s.startDiscord()
	} else {
		s.slack = fakeslack.New(fakeslack.Options{TeamID: "TCHAOS", MinUpdateInterval: editInterval, RateLimitOverBudget: true,
			Users:            []fakeslack.User{{ID: approver, Name: "alice"}},
			RedeliverUnacked: []time.Duration{3 * time.Second, time.Minute, 5 * time.Minute}})
		s.chat = slackFake{s.slack}
		o := s.slack.Options()
		botEnv = []string{
			"SANDBOT_SLACK_BOT_TOKEN=" + o.BotToken,
			"SANDBOT_SLACK_APP_TOKEN=" + o.AppToken,
			"SANDBOT_SLACK_API_BASE=" + s.slack.URL(),
		}
	}

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
		maddr, err := freeport.Addr()
		if err != nil {
			s.close()
			return nil, err
		}
		approvals := cfg.ApprovalMode
		if approvals == "" {
			approvals = "unless-readonly"
		}
		env := append(s.env(maddr),
			"SANDBOT_MODEL_BASE_URL="+s.model.URL(),
			"SANDBOT_MODEL_NAME=fake-model",
			"SANDBOT_MODEL_API_KEY=sk-chaos-model-key-0123456789abcdef",
			"SANDBOT_SANDBOX_HOST_ID="+id,
			"SANDBOT_SANDBOX_LOCAL_ROOT="+filepath.Join(s.dir, id, "workspaces"),
			"SANDBOT_SANDBOX_SNAPSHOT_URL=file://"+snap,
			"SANDBOT_SESSION_EXEC_HEARTBEAT=2s",
			"SANDBOT_SESSION_APPROVAL_MODE="+approvals,
		)
		if cfg.HistoryLimit > 0 {
			env = append(env, "SANDBOT_SESSION_HISTORY_LIMIT="+strconv.Itoa(cfg.HistoryLimit))
		}
		if cfg.TranscriptLimit > 0 {
			env = append(env, "SANDBOT_SESSION_TRANSCRIPT_LIMIT="+strconv.Itoa(cfg.TranscriptLimit))
		}
		if s.docker != nil {
			env = append(env, "SANDBOT_DOCKER_IMAGE="+s.dockerImage, "DOCKER_HOST="+s.docker.DaemonHost())
		}
		p := newProc("worker-"+id, workerBin, s.dir, env)
		if err := p.start(ctx, s.workerBanner(id)); err != nil {
			s.close()
			return nil, err
		}
		s.hosts = append(s.hosts, p)
	}
	for i := range cfg.Bots {
		maddr, err := freeport.Addr()
		if err != nil {
			s.close()
			return nil, err
		}
		env := append(s.env(maddr), botEnv...)
		p := newProc(fmt.Sprintf("bot-%d", i+1), botBin, s.dir, env)
		if err := p.start(ctx, ""); err != nil {
			s.close()
			return nil, err
		}
		s.bots = append(s.bots, p)
	}
	// Every replica has its connection open before the workload starts.
	if err := s.waitBotsConnected(ctx, cfg.Bots); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *stack) waitSlackConnected(ctx context.Context, bots int) error {
	if _, err := s.slack.WaitFor(ctx, func(sn fakeslack.Snapshot) bool { return sn.Open >= bots }); err != nil {
		return fmt.Errorf("bots connecting to Slack: %w", err)
	}
	return nil
}

// chatFake is the stack's chat fake; a stack built with only its Slack
// fake (the check tests') reads that.
func (s *stack) chatFake() chatFake {
	if s.chat == nil {
		return slackFake{s.slack}
	}
	return s.chat
}

func (s *stack) workerBanner(id string) string {
	return "sandbot worker: serving backends [" + strings.Join(s.backends(), ", ") + "] on host queue " + session.HostQueue(s.queue, id)
}

// backends are the backends the workers serve and the bots offer, sorted
// as a worker's banner lists them (new sessions start on local).
func (s *stack) backends() []string {
	if s.docker != nil {
		return []string{"docker", "local"}
	}
	return []string{"local"}
}

// useDocker connects to the Docker daemon (DOCKER_HOST, or the default
// socket, as the docker CLI does) and imports the local test image: no
// registry is reachable, so the image is made from the host's static
// busybox, as the integration tests do.
func (s *stack) useDocker(ctx context.Context) error {
	cli, err := dockerclient.New(dockerclient.FromEnv)
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	_, err = cli.Ping(pctx, dockerclient.PingOptions{NegotiateAPIVersion: true})
	cancel()
	if err != nil {
		cli.Close()
		return fmt.Errorf("the docker backend needs a Docker daemon (bash .ci/docker.sh starts one); none answers at %s: %w", cli.DaemonHost(), err)
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if s.dockerImage, err = testimage.Ensure(ictx, cli); err != nil {
		cli.Close()
		return fmt.Errorf("the docker backend's test image: %w", err)
	}
	s.docker = cli
	return nil
}

// removeContainers removes every container of this stack's deployment:
// sessions left on docker (the soak's forks) keep theirs after the run.
func (s *stack) removeContainers() {
	if s.docker == nil || s.deployment == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.docker.ContainerList(ctx, dockerclient.ContainerListOptions{All: true,
		Filters: make(dockerclient.Filters).Add("label", workerapp.LabelDeployment+"="+s.deployment).Add("label", docker.LabelManaged+"=true")})
	if err != nil {
		s.log.Warn("chaos: list the run's containers", "err", err)
		return
	}
	for _, c := range res.Items {
		if _, err := s.docker.ContainerRemove(ctx, c.ID, dockerclient.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			s.log.Warn("chaos: remove a container of the run", "id", c.ID, "err", err)
		}
	}
}

// env is what every sandbot process gets.
func (s *stack) env(metricsAddr string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir, "TMPDIR=" + os.TempDir(),
		"SANDBOT_TEMPORAL_ADDRESS=" + s.hostPort(),
		"SANDBOT_TEMPORAL_NAMESPACE=" + s.ns,
		"SANDBOT_TEMPORAL_TASK_QUEUE=" + s.queue,
		"SANDBOT_DECISION_KEY=" + s.key,
		"SANDBOT_SANDBOX_BACKENDS=" + strings.Join(s.backends(), ","),
		"SANDBOT_METRICS_ADDR=" + metricsAddr,
		// CHAOS_LOG_LEVEL=debug shows each watcher's lease and card
		// steps, which tracing a duplicate card needs.
		"SANDBOT_LOG_LEVEL=" + cmp.Or(os.Getenv("CHAOS_LOG_LEVEL"), "info"),
		// Profiles on a free loopback port, named in the process's log
		// ("debug profiles"): how the soak's memory growth was found.
		"SANDBOT_DEBUG_ADDR=127.0.0.1:0",
	}
}

func (s *stack) hostPort() string {
	if s.cluster != nil {
		return s.cluster.HostPort()
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// clusterNamespace is the namespace of a -cluster run.
const clusterNamespace = "sandbot-chaos"

// startCluster starts the Temporal server on a throwaway PostgreSQL
// (internal/pgtemporal: the server is a child process, this program run
// again) and creates the run's namespace with sandbot's search attributes.
func (s *stack) startCluster(ctx context.Context) error {
	dir := filepath.Join(s.dir, "temporal")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	start := time.Now()
	c, err := pgtemporal.New(dir, pgtemporal.Options{})
	if err != nil {
		return fmt.Errorf("start the Temporal server on PostgreSQL: %w", err)
	}
	s.cluster, s.ns = c, clusterNamespace
	nctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := c.CreateNamespace(nctx, s.ns, session.SearchAttributeTypes()); err != nil {
		return err
	}
	s.log.Info("chaos: Temporal server on PostgreSQL up", "took", time.Since(start).Round(time.Millisecond), "frontend", c.HostPort())
	return nil
}

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
func (s *stack) restartServer(ctx context.Context, down time.Duration, crash bool) error {
	if s.cluster != nil {
		if crash {
			s.cluster.Kill()
		} else {
			s.cluster.Stop()
		}
		sleep(ctx, down)
		return s.cluster.Start()
	}
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
	// After the workers: none can start a container behind it.
	s.removeContainers()
	if s.docker != nil {
		s.docker.Close()
	}
	if s.cl != nil {
		s.cl.Close()
	}
	if s.slack != nil {
		s.slack.Close()
	}
	if s.discord != nil {
		s.discord.Close()
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
	if s.cluster != nil {
		s.cluster.Close()
		s.cluster = nil
	}
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
