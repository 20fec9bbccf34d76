// Package sandbox owns where the agent's shell commands run: the Backend
// interface every sandbox implementation satisfies, the serializable Handle a
// session keeps in its workflow state, the snapshot store that carries a
// workspace between turns, hosts and backends, and the Temporal activities
// the session workflow calls.
//
// Backends live in sub-packages named for what they drive (sandbox/local,
// sandbox/docker, ...). Only cmd/* wires concrete backends in.
package sandbox

import (
	"context"
	"errors"
	"io"
	"time"
)

// Handle identifies a live sandbox. It is plain data so it can live in
// workflow state; a backend must be able to rebuild everything it needs from
// the handle alone (after a worker restart, for example).
type Handle struct {
	// Backend is the backend name ("local", "docker", ...).
	Backend string `json:"backend"`
	// ID is the backend's own identifier (a directory, a container ID...).
	ID string `json:"id"`
	// SessionID is the owning session's workflow ID.
	SessionID string `json:"session_id"`
	// TaskQueue is where activities for this sandbox must run. For a
	// host-bound backend it is the holding worker's host queue.
	TaskQueue string `json:"task_queue,omitempty"`
	// Workdir is the workspace root inside the sandbox.
	Workdir string `json:"workdir,omitempty"`
	// Meta carries backend-specific details.
	Meta map[string]string `json:"meta,omitempty"`
}

// Spec describes a sandbox to create.
type Spec struct {
	// SessionID is the owning session's workflow ID; backends use it to name
	// and label what they create.
	SessionID string
	// Labels are attached where the backend supports labels (session,
	// platform, ...), so orphan sweepers can find what belongs to whom.
	Labels map[string]string
}

// Cmd is one shell command.
type Cmd struct {
	// Command is run by /bin/sh -c in the workspace root.
	Command string
	// Timeout kills the command (and everything it started) when exceeded.
	// Zero means the backend default.
	Timeout time.Duration
	// OutputCap bounds how many bytes of stdout and of stderr are kept;
	// anything beyond is drained and counted, not stored. Zero means the
	// backend default.
	OutputCap int
}

// Result is the outcome of a command. A non-zero exit code is a Result, not
// an error; errors mean the command could not be run at all.
type Result struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	// TimedOut reports that Timeout killed the command.
	TimedOut bool `json:"timed_out,omitempty"`
	// Truncated reports that output beyond OutputCap was dropped.
	Truncated bool `json:"truncated,omitempty"`
	// DroppedBytes counts output bytes beyond the cap.
	DroppedBytes int64         `json:"dropped_bytes,omitempty"`
	Duration     time.Duration `json:"duration"`
	// Binary reports that the output held bytes that are not UTF-8 text
	// (invalid sequences or NULs); they were replaced by U+FFFD so the
	// strings stay valid for JSON, chat and the model.
	Binary bool `json:"binary,omitempty"`
}

// Backend is a kind of sandbox. Implementations must be safe for concurrent
// use by many sessions. Exec must honour ctx cancellation by killing the
// command.
type Backend interface {
	// Name is the backend's registry name.
	Name() string
	// Create makes a fresh sandbox with an empty workspace.
	Create(ctx context.Context, spec Spec) (Handle, error)
	// Exec runs one command in the workspace root. When ctx is canceled
	// the command and everything it started are killed, and Exec returns
	// the partial Result together with an error wrapping ctx.Err(). A
	// handle whose sandbox is gone yields an error wrapping ErrNotFound.
	Exec(ctx context.Context, h Handle, cmd Cmd) (Result, error)
	// Destroy removes the sandbox. Destroying one that is already gone is
	// not an error.
	Destroy(ctx context.Context, h Handle) error
	// Export writes the workspace as a tar stream (paths relative to the
	// workspace root).
	Export(ctx context.Context, h Handle, w io.Writer) error
	// Import replaces the workspace with the contents of a tar stream. It
	// must refuse (with an error, see CheckArchiveName) entries that would
	// land outside the workspace: absolute names, ".." components, hard
	// links to outside, and writes through a symlink that leaves the root.
	// Symlink targets themselves are restored verbatim: they are resolved
	// by the sandbox's own commands, never followed by Import.
	Import(ctx context.Context, h Handle, r io.Reader) error
	// Alive reports whether the sandbox still exists and can run commands.
	// It returns (false, nil) when it is gone, and an error only when the
	// backend itself cannot be asked.
	Alive(ctx context.Context, h Handle) (bool, error)
}

// Suspender is an optional capability: stop a sandbox without losing its
// workspace, and start it again.
type Suspender interface {
	Suspend(ctx context.Context, h Handle) error
	Resume(ctx context.Context, h Handle) error
}

// HostBound is an optional capability of backends whose sandboxes live on
// the worker host that created them (local directories, Docker containers
// on the host's daemon). Activities for their handles must run on that
// host's task queue, which the Ensure activity records in Handle.TaskQueue.
type HostBound interface {
	HostBound() bool
}

// Fingerprinter is an optional capability: a cheap digest of the workspace
// (paths, sizes, modes, mtimes) used to skip snapshots when nothing changed.
type Fingerprinter interface {
	Fingerprint(ctx context.Context, h Handle) (string, error)
}

// Checker is an optional capability: a cheap check that the backend can
// make sandboxes now (the Docker daemon answers and has the image), for the
// worker's readiness. It returns nil when it can, else why not; it must be
// safe for concurrent use.
type Checker interface {
	Check(ctx context.Context) error
}

// ErrUnavailable is returned (wrapped) when a backend cannot serve requests
// right now, for example when the Docker daemon is down or an image is
// missing. Callers show the wrapped message to the user.
var ErrUnavailable = errors.New("sandbox backend unavailable")

// ErrUnauthenticated is returned (wrapped) when a backend's provider
// refuses its credentials. The message names the setting that holds them;
// a worker does not start with a configured backend that fails this way,
// since no later retry can succeed.
var ErrUnauthenticated = errors.New("sandbox backend credentials refused")

// ErrNotFound is returned (wrapped) when a handle names a sandbox that no
// longer exists.
var ErrNotFound = errors.New("sandbox not found")

// ErrOutcomeUnknown is returned (wrapped) by Exec for a command that was
// started but whose end the backend could not see (the Docker daemon went
// away while it ran). The command may have run to its end: it must not be
// run again, nor reported as not run or as finished.
var ErrOutcomeUnknown = errors.New("the command's outcome is unknown")

// SweepGrace is how old a sandbox or snapshot must be before a sweeper may
// remove it for belonging to an ended session. A session ID can be used
// again (a new workflow for the same thread), and a fork's snapshot is
// copied just before its workflow starts: what was written within the
// grace may belong to a session the sweeper's look-up has not seen yet.
const SweepGrace = time.Hour
