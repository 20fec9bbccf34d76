// Package docker is the sandbox backend that runs each session in its own
// Docker container on the worker host, through the Docker Engine API
// (github.com/moby/moby/client).
//
// What a container gets, and why:
//   - one long-lived container per session, kept across turns (a keepalive
//     process holds it up; commands run as separate execs), labelled
//     sandbot.managed=true and sandbot.session=<session ID> so Sweep can
//     find containers whose session is gone;
//   - no network by default (NetworkMode "none"), CPU, memory (no extra
//     swap) and PID limits, a non-root numeric user, all capabilities
//     dropped, no-new-privileges, and an init process (docker-init) that
//     reaps the zombies commands leave behind;
//   - a writable root file system. A read-only root would need the
//     workspace on a volume, and a volume is one more object to create,
//     sweep and lose; the non-root user without capabilities can only
//     write the workspace, /tmp and other world-writable places anyway;
//   - commands see HOME (the workspace), LANG and TERM plus the image's
//     own environment (its PATH); nothing from the worker's environment.
//
// Docker has no API to kill an exec. Exec therefore starts every command
// in its own session and process group (setsid) and records that group in
// a pid file; a timeout or a cancellation runs a second exec that kills the
// group, and a command that ends takes its background jobs with it, as in
// the local backend. A process that calls setsid itself escapes the group
// kill, but not Destroy or Suspend.
//
// A stopped container (Suspend, a daemon restart) is still Alive: Exec,
// Import and Fingerprint start it again on demand, and Export reads it
// without starting it.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Name is the backend's registry name.
const Name = "docker"

// Defaults for zero Options fields.
const (
	DefaultImage     = "debian:bookworm-slim"
	DefaultWorkdir   = "/workspace"
	DefaultNetwork   = "none"
	DefaultUser      = "1000:1000"
	DefaultCPUs      = 1.0
	DefaultMemory    = 1 << 30
	DefaultPidsLimit = 512
)

// Labels every container of this backend carries.
const (
	LabelManaged = "sandbot.managed"
	LabelSession = "sandbot.session"
)

// Options configures a Backend. Zero values mean the documented defaults.
type Options struct {
	// Image is the image sessions run in (default DefaultImage). It must
	// provide /bin/sh and the usual POSIX tools (find, stat, sort, kill,
	// setsid, rm, chmod): Debian, Ubuntu, Alpine and busybox images do.
	Image string
	// PullMissing pulls Image when it is not on the host. Off by default,
	// so a worker never reaches out to a registry unless asked to.
	PullMissing bool
	// Workdir is the workspace path inside the container (default
	// DefaultWorkdir). It is created owned by User.
	Workdir string
	// Network is the container's network mode (default "none"): "bridge"
	// or a user-defined network name. "host" and "container:..." are
	// refused, since they would share another namespace's network.
	Network string
	// CPUs, MemoryBytes and PidsLimit bound the container; a negative
	// value means no limit. Memory includes swap (no extra swap).
	CPUs        float64
	MemoryBytes int64
	PidsLimit   int64
	// MaxFileBytes bounds the size of any one file a command writes
	// (RLIMIT_FSIZE; zero: no limit): a runaway write fails with "File
	// too large" there instead of filling the daemon's disk. The workspace
	// as a whole is bounded by the snapshot activity's quota; Docker's own
	// per-container disk quota (--storage-opt size) needs overlay2 on XFS
	// with project quotas, which few daemons have.
	MaxFileBytes int64
	// User runs the keepalive and every command, as numeric "uid" or
	// "uid:gid" (default DefaultUser). Names are refused: the image may
	// not know them, and file ownership on Import needs numbers. uid 0 is
	// refused.
	User string
	// DefaultTimeout applies to commands without their own (default
	// DefaultTimeout).
	DefaultTimeout time.Duration
	// DefaultOutputCap bounds each stream of commands without their own
	// cap (default sandbox.DefaultOutputCap).
	DefaultOutputCap int
	// Labels are added to every container (Spec.Labels and the backend's
	// own labels take precedence).
	Labels map[string]string
	// Logger receives lifecycle events. Default slog.Default().
	Logger *slog.Logger
}

// Client is the part of the Docker Engine API the backend uses;
// *client.Client implements it.
type Client interface {
	DaemonHost() string
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImagePull(ctx context.Context, ref string, opts client.ImagePullOptions) (client.ImagePullResponse, error)
	ContainerCreate(ctx context.Context, opts client.ContainerCreateOptions) (client.ContainerCreateResult, error)
	ContainerStart(ctx context.Context, id string, opts client.ContainerStartOptions) (client.ContainerStartResult, error)
	ContainerStop(ctx context.Context, id string, opts client.ContainerStopOptions) (client.ContainerStopResult, error)
	ContainerUnpause(ctx context.Context, id string, opts client.ContainerUnpauseOptions) (client.ContainerUnpauseResult, error)
	ContainerRemove(ctx context.Context, id string, opts client.ContainerRemoveOptions) (client.ContainerRemoveResult, error)
	ContainerInspect(ctx context.Context, id string, opts client.ContainerInspectOptions) (client.ContainerInspectResult, error)
	ContainerList(ctx context.Context, opts client.ContainerListOptions) (client.ContainerListResult, error)
	ExecCreate(ctx context.Context, id string, opts client.ExecCreateOptions) (client.ExecCreateResult, error)
	ExecAttach(ctx context.Context, execID string, opts client.ExecAttachOptions) (client.ExecAttachResult, error)
	ExecInspect(ctx context.Context, execID string, opts client.ExecInspectOptions) (client.ExecInspectResult, error)
	CopyToContainer(ctx context.Context, id string, opts client.CopyToContainerOptions) (client.CopyToContainerResult, error)
	CopyFromContainer(ctx context.Context, id string, opts client.CopyFromContainerOptions) (client.CopyFromContainerResult, error)
}

var _ Client = (*client.Client)(nil)

// NewClient connects to the daemon at host ("unix:///var/run/docker.sock",
// "tcp://..."), or, when host is empty, where the docker CLI would:
// DOCKER_HOST, DOCKER_TLS_VERIFY and DOCKER_CERT_PATH, else the default
// socket. The API version is negotiated on first use, so old daemons (API
// 1.40+) work. Nothing is dialed until the first call.
func NewClient(host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker: client for %q: %w", host, err)
	}
	return c, nil
}

// Backend runs sandboxes as containers. It keeps no state beyond its
// options: every method works from the handle alone, so any Backend on the
// same daemon serves any handle. It is safe for concurrent use.
type Backend struct {
	cli      Client
	opts     Options
	uid, gid int
	log      *slog.Logger

	// reaped holds, per container, the one-time clean-up of commands a
	// previous worker process left running (see reapLeftovers).
	mu     sync.Mutex
	reaped map[string]*reap
}

type reap struct {
	once sync.Once
	err  error
}

var (
	_ sandbox.Backend       = (*Backend)(nil)
	_ sandbox.Suspender     = (*Backend)(nil)
	_ sandbox.Fingerprinter = (*Backend)(nil)
	_ sandbox.Checker       = (*Backend)(nil)
	_ sandbox.HostBound     = (*Backend)(nil)
)

// New checks opts and returns a Backend. It does not contact the daemon:
// a daemon that is down makes each call fail with sandbox.ErrUnavailable,
// so the worker can start and serve other backends meanwhile.
func New(cli Client, opts Options) (*Backend, error) {
	if cli == nil {
		return nil, errors.New("docker: new: nil client; use docker.NewClient")
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.Workdir == "" {
		opts.Workdir = DefaultWorkdir
	}
	if !path.IsAbs(opts.Workdir) || path.Clean(opts.Workdir) != opts.Workdir || opts.Workdir == "/" {
		return nil, fmt.Errorf("docker: new: Workdir %q must be a clean absolute path other than \"/\" (e.g. %q)", opts.Workdir, DefaultWorkdir)
	}
	if opts.Network == "" {
		opts.Network = DefaultNetwork
	}
	if opts.Network == "host" || strings.HasPrefix(opts.Network, "container:") {
		return nil, fmt.Errorf("docker: new: Network %q would share a namespace with the host or another container; use \"none\", \"bridge\" or a user-defined network", opts.Network)
	}
	if opts.User == "" {
		opts.User = DefaultUser
	}
	uid, gid, err := parseUser(opts.User)
	if err != nil {
		return nil, fmt.Errorf("docker: new: %w", err)
	}
	if opts.DefaultTimeout < 0 || opts.DefaultOutputCap < 0 {
		return nil, errors.New("docker: new: DefaultTimeout and DefaultOutputCap must not be negative (zero means the default)")
	}
	if opts.MaxFileBytes < 0 {
		return nil, fmt.Errorf("docker: new: MaxFileBytes %d is negative; use a size in bytes, or zero for no limit", opts.MaxFileBytes)
	}
	if opts.DefaultTimeout == 0 {
		opts.DefaultTimeout = session.DefaultCommandTimeout
	}
	if opts.DefaultOutputCap == 0 {
		opts.DefaultOutputCap = sandbox.DefaultOutputCap
	}
	if opts.CPUs == 0 {
		opts.CPUs = DefaultCPUs
	}
	if opts.MemoryBytes == 0 {
		opts.MemoryBytes = DefaultMemory
	}
	if opts.MemoryBytes > 0 && opts.MemoryBytes < 6<<20 {
		return nil, fmt.Errorf("docker: new: MemoryBytes %d is below Docker's minimum of 6 MiB", opts.MemoryBytes)
	}
	if opts.PidsLimit == 0 {
		opts.PidsLimit = DefaultPidsLimit
	}
	for k := range opts.Labels {
		if k == LabelManaged || k == LabelSession {
			return nil, fmt.Errorf("docker: new: label %q is set by the backend", k)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Backend{cli: cli, opts: opts, uid: uid, gid: gid, log: opts.Logger}, nil
}

// parseUser accepts "uid" or "uid:gid", numeric and not root.
func parseUser(s string) (uid, gid int, err error) {
	us, gs, hasGID := strings.Cut(s, ":")
	uid, err = strconv.Atoi(us)
	if err == nil && hasGID {
		gid, err = strconv.Atoi(gs)
	} else {
		gid = uid
	}
	if err != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("user %q: want a numeric \"uid\" or \"uid:gid\" (e.g. %q)", s, DefaultUser)
	}
	if uid == 0 || gid == 0 {
		return 0, 0, fmt.Errorf("user %q is root or the root group; sandboxes run as a non-root user and group (e.g. %q)", s, DefaultUser)
	}
	return uid, gid, nil
}

// Name returns "docker".
func (b *Backend) Name() string { return Name }

// HostBound reports true: a container lives on its worker's daemon.
func (b *Backend) HostBound() bool { return true }

// Image is the image new sandboxes use.
func (b *Backend) Image() string { return b.opts.Image }

// container checks that h is one of ours and returns its container ID and
// workspace path.
func (b *Backend) container(h sandbox.Handle) (id, workdir string, err error) {
	if h.Backend != Name {
		return "", "", fmt.Errorf("handle is for backend %q, not %q", h.Backend, Name)
	}
	if h.ID == "" || strings.ContainsAny(h.ID, "/?#") {
		return "", "", fmt.Errorf("handle ID %q is not a container ID", h.ID)
	}
	workdir = h.Workdir
	if workdir == "" {
		workdir = b.opts.Workdir
	}
	if !path.IsAbs(workdir) || path.Clean(workdir) != workdir || workdir == "/" {
		return "", "", fmt.Errorf("handle workdir %q is not a clean absolute path", workdir)
	}
	return h.ID, workdir, nil
}
