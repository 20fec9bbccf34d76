// Package local is the sandbox backend that runs commands as processes
// on the worker host, one workspace directory per session, each command
// confined with bubblewrap (bwrap).
//
// What it confines. Every command runs in new user, mount, PID, IPC, UTS
// (and, where the kernel has them, cgroup) namespaces and, unless
// Options.Network, a network namespace of its own with only loopback:
//   - it runs as uid 1000 with no capabilities and no_new_privs (setuid
//     bits do nothing); the user namespace maps that uid to the worker's,
//     so files it creates belong to the worker on the host;
//   - it sees its workspace read-write at the workspace's host path, /usr
//     and the /bin, /lib* links read-only, an allowlisted, read-only /etc
//     (no shadow, sudoers, ssh or TLS keys; generated passwd and group), a
//     private memory-backed /tmp, a minimal /dev and a /proc of its own PID
//     namespace, so no worker process (and no worker environment) is
//     visible; nothing else: not the data directory, not other workspaces,
//     not the home directory;
//   - it cannot make namespaces of its own (no mount, no unshare);
//   - the environment is built from scratch (PATH, HOME, LANG, TERM,
//     TMPDIR and the configured extras), so worker secrets never reach it;
//   - limits: processes per command (RLIMIT_NPROC, or a pids cgroup for a
//     root worker, which RLIMIT_NPROC does not bind), data segment per
//     process (RLIMIT_DATA), no core dumps, the size of /tmp, the command
//     timeout and the output kept in memory, and, with
//     Options.MaxFileBytes, the size of each file written (RLIMIT_FSIZE,
//     unconfined commands too); CPU time is bounded by the timeout only,
//     and the workspace's total disk use is not bounded here;
//   - a command ends with everything it started: the PID namespace dies
//     with its init when the command's shell exits, on timeout, on
//     cancellation and when the worker dies (bwrap --die-with-parent).
//
// Where bubblewrap is missing or the kernel forbids the namespaces, New
// fails with ErrCannotConfine, unless Options.Unconfined is set: then
// commands run as before confinement, as the worker's user on the whole
// host, in a process group killed as a whole (Describe says so). Export,
// Import and Fingerprint run on the host side and never follow symlinks
// out of the workspace.
package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Name is the backend's registry name.
const Name = "local"

// Defaults for zero Options fields.
const (
	DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// DefaultOutputGrace is how long Exec keeps reading output after the
	// command's process group was killed, for escaped processes that still
	// hold the output pipes.
	DefaultOutputGrace = 2 * time.Second
)

// markerVar is set in every command's environment to the workspace path,
// so processes that escaped their process group can still be found.
const markerVar = "SANDBOT_SANDBOX"

// Options configures a Backend.
type Options struct {
	// Root holds one directory per session (required). It is created if
	// missing.
	Root string
	// DefaultTimeout applies to commands without their own (default
	// DefaultTimeout).
	DefaultTimeout time.Duration
	// DefaultOutputCap bounds each stream of commands without their own
	// cap (default sandbox.DefaultOutputCap).
	DefaultOutputCap int
	// Path is the PATH commands see (default DefaultPath).
	Path string
	// Env lists extra KEY=VALUE variables for commands. It may override
	// PATH, LANG and TERM, but not HOME, TMPDIR, PWD or SANDBOT_SANDBOX.
	// Nothing is inherited from the worker's environment.
	Env []string
	// OutputGrace: see DefaultOutputGrace.
	OutputGrace time.Duration
	// Logger receives warnings (stray processes, unreadable files). Default
	// slog.Default().
	Logger *slog.Logger

	// Unconfined runs commands without namespaces, as the worker's user
	// with the worker's view of the host. Only for hosts that cannot
	// confine (New logs a warning).
	Unconfined bool
	// Network shares the host's network with confined commands instead of
	// giving them their own loopback only (New logs a warning).
	Network bool
	// Bwrap is the bubblewrap binary (default: bwrap on the worker's PATH).
	Bwrap string
	// MaxProcesses bounds the processes and threads of one confined
	// command (default DefaultMaxProcesses).
	MaxProcesses int
	// MaxDataBytes bounds each confined process's data segment (default
	// DefaultMaxDataBytes).
	MaxDataBytes int64
	// TmpSize bounds a confined command's /tmp and /dev/shm (default
	// DefaultTmpSize).
	TmpSize int64
	// MaxFileBytes bounds the size of any file a command (confined or not)
	// writes (RLIMIT_FSIZE, rounded down to a multiple of 512 bytes): a
	// write past it fails with EFBIG, "File too large". Zero: no limit.
	MaxFileBytes int64
	// Deployment identifies the installation this backend serves (the
	// worker's deployment ID). The first backend to use a root claims it
	// for its deployment; Sweep removes workspaces only in a root its own
	// deployment owns. Empty: never sweep.
	Deployment string
}

// Backend runs sandboxes as directories under Options.Root. It keeps no
// state beyond its options, so any Backend with the same Root serves any
// handle it created; it is safe for concurrent use.
type Backend struct {
	root     string
	tmp      string
	opts     Options
	env      []string // fixed part of every command's environment
	host     string
	instance string // identity of root, see rootInstance
	owner    string // deployment owning root, see claimRoot
	log      *slog.Logger
	shell    string
	conf     *confinement // nil when unconfined
	describe string
}

var (
	_ sandbox.Backend       = (*Backend)(nil)
	_ sandbox.Fingerprinter = (*Backend)(nil)
	_ sandbox.HostBound     = (*Backend)(nil)
)

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New checks opts, creates the root directory and returns a Backend.
func New(opts Options) (*Backend, error) {
	if opts.Root == "" {
		return nil, errors.New("local: new: Options.Root is empty; set it to a directory for session workspaces")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("local: new: root %q: %w", opts.Root, err)
	}
	if opts.DefaultTimeout < 0 || opts.DefaultOutputCap < 0 || opts.OutputGrace < 0 ||
		opts.MaxProcesses < 0 || opts.MaxDataBytes < 0 || opts.TmpSize < 0 || opts.MaxFileBytes < 0 {
		return nil, errors.New("local: new: DefaultTimeout, DefaultOutputCap, OutputGrace, MaxProcesses, MaxDataBytes, TmpSize and MaxFileBytes must not be negative (zero means the default, or no limit for MaxFileBytes)")
	}
	if opts.MaxProcesses == 0 {
		opts.MaxProcesses = DefaultMaxProcesses
	}
	if opts.MaxDataBytes == 0 {
		opts.MaxDataBytes = DefaultMaxDataBytes
	}
	if opts.TmpSize == 0 {
		opts.TmpSize = DefaultTmpSize
	}
	if opts.DefaultTimeout == 0 {
		opts.DefaultTimeout = session.DefaultCommandTimeout
	}
	if opts.DefaultOutputCap == 0 {
		opts.DefaultOutputCap = sandbox.DefaultOutputCap
	}
	if opts.OutputGrace == 0 {
		opts.OutputGrace = DefaultOutputGrace
	}
	if opts.Path == "" {
		opts.Path = DefaultPath
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	env := map[string]string{"PATH": opts.Path, "LANG": "C.UTF-8", "TERM": "dumb"}
	order := []string{"PATH", "LANG", "TERM"}
	for _, kv := range opts.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !envKey.MatchString(k) {
			return nil, fmt.Errorf("local: new: Env entry %q: want KEY=VALUE with KEY made of letters, digits and _", kv)
		}
		switch k {
		case "HOME", "TMPDIR", "PWD", markerVar:
			return nil, fmt.Errorf("local: new: Env entry %q: %s is set by the backend and cannot be overridden", kv, k)
		}
		if _, seen := env[k]; !seen {
			order = append(order, k)
		}
		env[k] = v
	}
	b := &Backend{root: root, tmp: filepath.Join(root, ".tmp"), opts: opts, log: opts.Logger, shell: "/bin/sh"}
	for _, k := range order {
		b.env = append(b.env, k+"="+env[k])
	}
	if err := os.MkdirAll(b.tmp, 0o700); err != nil {
		return nil, fmt.Errorf("local: new: create root: %w", err)
	}
	if _, err := os.Stat(b.shell); err != nil {
		return nil, fmt.Errorf("local: new: %s is needed to run commands: %w", b.shell, err)
	}
	b.host, _ = os.Hostname()
	if b.instance, err = rootInstance(root); err != nil {
		return nil, fmt.Errorf("local: new: %w", err)
	}
	if opts.Deployment != "" {
		if b.owner, err = claimRoot(root, opts.Deployment); err != nil {
			return nil, fmt.Errorf("local: new: %w", err)
		}
	}
	if err := closeInheritedOnExec(); err != nil {
		return nil, fmt.Errorf("local: new: close inherited descriptors on exec: %w", err)
	}
	if opts.Unconfined {
		b.describe = "UNCONFINED: commands run as the worker's user (uid " + strconv.Itoa(os.Geteuid()) +
			") and see the whole host: its files, processes and network"
		b.log.Warn("local: sandbox confinement is off; commands run as the worker's user with access to the host's files, processes and network")
		return b, nil
	}
	if b.conf, err = b.prepareConfinement(); err != nil {
		return nil, fmt.Errorf("local: new: %w", err)
	}
	b.describe = b.conf.describe
	if opts.Network {
		b.log.Warn("local: confined commands share the host's network; they can reach every service the worker can, the Temporal frontend included")
	}
	return b, nil
}

// Describe says how commands are confined, for /status and the logs.
func (b *Backend) Describe() string { return b.describe }

// Confined reports whether commands run confined.
func (b *Backend) Confined() bool { return b.conf != nil }

// SharesNetwork reports whether commands reach the host's network (always,
// when unconfined).
func (b *Backend) SharesNetwork() bool { return b.conf == nil || b.opts.Network }

// instanceFile names the file holding the root's identity.
const instanceFile = ".instance"

// rootInstance returns the random identity of a root directory, creating
// it on first use. Handles carry it, so a handle from another host (or
// another root) is recognized as not ours even when a directory of the
// same name happens to exist here, e.g. left from an earlier stay of the
// session on this host.
func rootInstance(root string) (string, error) {
	path := filepath.Join(root, instanceFile)
	if data, err := os.ReadFile(path); err == nil && validInstance.Match(data) {
		return string(data), nil
	}
	id := randomSuffix() + randomSuffix()
	tmp := path + "." + randomSuffix()
	if err := os.WriteFile(tmp, []byte(id), 0o600); err != nil {
		return "", err
	}
	// Link, not rename: if another process created the file meanwhile, its
	// identity wins and we read it back.
	err := os.Link(tmp, path)
	os.Remove(tmp)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if !validInstance.Match(data) {
		return "", fmt.Errorf("%s is corrupt; remove it to let the backend recreate it", path)
	}
	return string(data), nil
}

var validInstance = regexp.MustCompile(`^[0-9a-f]{24}$`)

// Name returns "local".
func (b *Backend) Name() string { return Name }

// HostBound reports true: workspaces live on this host's disk.
func (b *Backend) HostBound() bool { return true }

// Root is the directory holding the workspaces.
func (b *Backend) Root() string { return b.root }

// dirName derives a workspace directory name from a session ID: readable
// (sanitized and shortened ID) and unique (hash of the full ID). It is
// deterministic, so a retried Create reuses the directory instead of
// leaking one.
func dirName(sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	var b strings.Builder
	for _, r := range sessionID {
		if b.Len() >= 40 {
			break
		}
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String() + "-" + hex.EncodeToString(sum[:6])
}

// metaInstance is the Handle.Meta key of the root's identity.
const metaInstance = "instance"

var validID = regexp.MustCompile(`^[A-Za-z0-9_-]{0,40}-[0-9a-f]{12}$`)

// paths resolves a handle to its workspace and temp directories, refusing
// handles this backend could not have made (handles come from workflow
// history, so they are checked rather than trusted as paths).
func (b *Backend) paths(h sandbox.Handle) (ws, tmp string, err error) {
	if h.Backend != Name {
		return "", "", fmt.Errorf("handle is for backend %q, not %q", h.Backend, Name)
	}
	if !validID.MatchString(h.ID) {
		return "", "", fmt.Errorf("handle ID %q is not a local workspace name", h.ID)
	}
	return filepath.Join(b.root, h.ID), filepath.Join(b.tmp, h.ID), nil
}

// ours reports whether h was made under this root (handles without the
// identity, made by hand, are taken at their word).
func (b *Backend) ours(h sandbox.Handle) bool {
	id := h.Meta[metaInstance]
	return id == "" || id == b.instance
}

// Create makes an empty workspace for spec.SessionID. An existing
// directory of the same session (a lost handle, a retried activity) is
// emptied first, and processes still running from it are killed.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	if spec.SessionID == "" {
		return sandbox.Handle{}, errors.New("local: create: empty session ID")
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Handle{}, fmt.Errorf("local: create: %w", err)
	}
	if err := os.MkdirAll(b.tmp, 0o700); err != nil {
		// The root is unusable (gone read-only, replaced by a file...):
		// nothing this backend can do until an operator fixes it.
		return sandbox.Handle{}, fmt.Errorf("local: create: %w: root %s: %w", sandbox.ErrUnavailable, b.root, err)
	}
	name := dirName(spec.SessionID)
	ws, tmp := filepath.Join(b.root, name), filepath.Join(b.tmp, name)
	killStrays(ws, b.log)
	for _, dir := range []string{ws, tmp} {
		if err := removeAll(dir); err != nil {
			return sandbox.Handle{}, fmt.Errorf("local: create: clear %s: %w", dir, err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			return sandbox.Handle{}, fmt.Errorf("local: create: %w", err)
		}
	}
	if err := b.recordSession(name, spec.SessionID); err != nil {
		return sandbox.Handle{}, fmt.Errorf("local: create: note the session: %w", err)
	}
	return sandbox.Handle{
		Backend:   Name,
		ID:        name,
		SessionID: spec.SessionID,
		Workdir:   ws,
		Meta:      map[string]string{"host": b.host, metaInstance: b.instance},
	}, nil
}

// Destroy kills the sandbox's processes and removes its directories.
// Destroying one that is already gone is not an error.
func (b *Backend) Destroy(ctx context.Context, h sandbox.Handle) error {
	ws, tmp, err := b.paths(h)
	if err != nil {
		return fmt.Errorf("local: destroy: %w", err)
	}
	if !b.ours(h) {
		return nil // not here; the host that holds it must destroy it
	}
	killStrays(ws, b.log)
	for _, dir := range []string{ws, tmp} {
		if err := removeAll(dir); err != nil {
			return fmt.Errorf("local: destroy: %w", err)
		}
	}
	if err := b.forgetSession(h.ID); err != nil {
		return fmt.Errorf("local: destroy: %w", err)
	}
	return nil
}

// Alive reports whether the workspace directory exists.
func (b *Backend) Alive(ctx context.Context, h sandbox.Handle) (bool, error) {
	ws, _, err := b.paths(h)
	if err != nil {
		return false, fmt.Errorf("local: alive: %w", err)
	}
	if !b.ours(h) {
		return false, nil
	}
	fi, err := os.Lstat(ws)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("local: alive: %w", err)
	}
	return fi.IsDir(), nil
}

// workspace returns the workspace of a live handle, or an error wrapping
// sandbox.ErrNotFound.
func (b *Backend) workspace(h sandbox.Handle) (ws, tmp string, err error) {
	ws, tmp, err = b.paths(h)
	if err != nil {
		return "", "", err
	}
	if !b.ours(h) {
		return "", "", fmt.Errorf("workspace %s belongs to another host or root: %w", h.ID, sandbox.ErrNotFound)
	}
	fi, err := os.Lstat(ws)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return "", "", fmt.Errorf("workspace %s: %w", h.ID, sandbox.ErrNotFound)
	}
	if err != nil {
		return "", "", err
	}
	return ws, tmp, nil
}

// removeAll is os.RemoveAll that also copes with directories a command
// made read-only (chmod -R a-w), which would otherwise make a workspace
// impossible to delete for a non-root worker.
func removeAll(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// TreeDirs implements sandbox.Tree: the workspace is a directory here,
// and the backend's root (private to the worker, on the same file system)
// stages restored files before they are moved in.
func (b *Backend) TreeDirs(h sandbox.Handle) (workspace, staging string, err error) {
	ws, _, err := b.workspace(h)
	if err != nil {
		return "", "", fmt.Errorf("local: %w", err)
	}
	return ws, b.root, nil
}
