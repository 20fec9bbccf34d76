package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"sync/atomic"
	"time"

	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/session"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// ApplicationError types the sandbox activities fail with. All of them are
// non-retryable: retrying cannot help, the workflow has to react (tell the
// user, restore elsewhere, pick another backend). Errors without one of
// these types are transient and retried by the activity's retry policy.
const (
	// ErrTypeBadRequest: the request itself is malformed.
	ErrTypeBadRequest = "SandboxBadRequest"
	// ErrTypeUnknownBackend: this worker does not serve the backend.
	ErrTypeUnknownBackend = "SandboxUnknownBackend"
	// ErrTypeUnavailable: the backend cannot serve requests right now
	// (daemon down, image missing, root unusable).
	ErrTypeUnavailable = "SandboxUnavailable"
	// ErrTypeNotFound: the handle's sandbox no longer exists. From Exec it
	// means no command ran, so the call may be retried after Ensure.
	ErrTypeNotFound = "SandboxNotFound"
	// ErrTypeSnapshotNotFound: a snapshot key does not exist.
	ErrTypeSnapshotNotFound = "SnapshotNotFound"
	// ErrTypeRestoreFailed: a snapshot could not be restored (corrupt or
	// unsafe archive).
	ErrTypeRestoreFailed = "SandboxRestoreFailed"
	// ErrTypeWorkspaceOverQuota: the workspace is larger than its quota,
	// so no snapshot was stored.
	ErrTypeWorkspaceOverQuota = "WorkspaceOverQuota"
	// ErrTypeSnapshotTooLarge: the compressed snapshot passed its cap, so
	// none was stored.
	ErrTypeSnapshotTooLarge = "SnapshotTooLarge"
)

// Limits bound what a session may keep. Each limit is optional (zero: no
// limit); the setting names only go into messages, so the user learns
// which knob the operator would turn.
type Limits struct {
	// WorkspaceBytes bounds the workspace: the archive a snapshot makes of
	// it (file contents plus 512 bytes of header per entry) must not pass
	// it. Backends also get it as the largest file a command may write
	// (RLIMIT_FSIZE), so one runaway write stops there.
	WorkspaceBytes int64
	// SnapshotBytes bounds one stored, compressed snapshot.
	SnapshotBytes int64
	// WorkspaceSetting and SnapshotSetting name the two settings.
	WorkspaceSetting, SnapshotSetting string
}

// SnapshotStore is what the activities need from the snapshot store
// (sandbox/blobstore implements it). Implementations must be safe for
// concurrent use; a missing key yields an error wrapping
// ErrSnapshotNotFound.
type SnapshotStore interface {
	// Put streams r into key; the object appears only if r reaches EOF.
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// OpenRange reads length bytes of key from offset.
	OpenRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	Copy(ctx context.Context, from, to string) error
	DeletePrefix(ctx context.Context, prefix string) (int, error)
	// Delete removes one key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// ModTime returns when key was last written.
	ModTime(ctx context.Context, key string) (time.Time, error)
	// List calls fn with every key under prefix and when it was written.
	List(ctx context.Context, prefix string, fn func(key string, modTime time.Time) error) error
}

// Activities are the sandbox activities of the session workflow. Register
// one value per worker and reference the methods by value from workflow
// code (workflow.ExecuteActivity(ctx, a.Exec, req)).
type Activities struct {
	// Backends are the backends this worker serves.
	Backends Backends
	// Store holds workspace snapshots.
	Store SnapshotStore
	// HostQueue is this worker's host-specific task queue. Handles of
	// host-bound backends get it as their TaskQueue, so later activities
	// for them run here.
	HostQueue string
	// SessionQueue is the deployment's session task queue. Handles of
	// backends that are not host-bound (cloud sandboxes, reachable from any
	// worker) get its backend queue (session.BackendQueue) as their
	// TaskQueue, so any worker serving the backend runs their activities.
	SessionQueue string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Redactor, when set, scrubs the worker's secrets (model key, chat
	// tokens, store credentials) from everything the activities hand back:
	// command output and error texts. What they return is stored in
	// workflow history, sent to the model and shown in chat, and a command
	// or a backend error can print a secret the worker holds; scrubbing
	// here, on the worker, is the last point before it leaves.
	Redactor Redactor
	// Limits bound workspaces and snapshots.
	Limits Limits
	// Fetcher downloads chat attachments for SaveAttachments (nil: none
	// are downloaded, and each is reported as refused); Attach caps them.
	Fetcher Fetcher
	Attach  AttachLimits
	// ShareMaxBytes caps a file ReadFile reads for share_file when the
	// request names no cap (default DefaultShareMaxBytes).
	ShareMaxBytes int64
}

// Redactor replaces known secrets in a text (redact.Redactor implements
// it).
type Redactor interface {
	Redact(s string) string
}

// Notices the Ensure activity returns for the user.
const (
	NoticeRestoredAfterLoss = "The sandbox was lost; restored the workspace from the last snapshot."
	NoticeLostNoSnapshot    = "The sandbox was lost and there was no snapshot to restore; starting with an empty workspace."
	NoticeSnapshotMissing   = "The workspace snapshot could not be found; starting with an empty workspace."
	noticeSwitched          = "Switched to the %s sandbox; restored the workspace from the last snapshot."
)

func (a *Activities) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

func badRequest(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrTypeBadRequest, nil)
}

func (a *Activities) backend(name string) (Backend, error) {
	b, err := a.Backends.Get(name)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeUnknownBackend, nil)
	}
	return b, nil
}

// classify turns a backend error into an activity error: permanent
// conditions become typed non-retryable errors, the rest stay plain so the
// retry policy handles them. The typed errors carry the cause as text only
// (Go error chains do not cross the wire, and a cause would repeat it).
func classify(op string, err error) error {
	msg := fmt.Sprintf("sandbox: %s: %v", op, err)
	switch {
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrUnauthenticated):
		// A refused key (revoked while the worker runs) is no better for
		// waiting: the session must move, or an operator fix the key the
		// message names.
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeUnavailable, nil)
	case errors.Is(err, ErrNotFound):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeNotFound, nil)
	case errors.Is(err, ErrSnapshotNotFound):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeSnapshotNotFound, nil)
	case errors.Is(err, ErrUnknownBackend):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeUnknownBackend, nil)
	}
	return fmt.Errorf("sandbox: %s: %w", op, err)
}

// Ensure returns a live sandbox for the session: the current one if it is
// still alive, otherwise a new one filled from req.Snapshot. For a handle
// of a host-bound backend it must run on the handle's TaskQueue; when that
// host is gone the workflow calls it again on the shared queue without the
// handle, and the session continues from its snapshot on another host.
func (a *Activities) Ensure(ctx context.Context, req EnsureRequest) (res EnsureResult, err error) {
	defer func() { err = RedactError(a.Redactor, err) }()
	if req.SessionID == "" || req.Backend == "" {
		return EnsureResult{}, badRequest("sandbox: ensure: session_id and backend are required")
	}
	b, err := a.backend(req.Backend)
	if err != nil {
		return EnsureResult{}, err
	}
	defer func() {
		if err == nil {
			res.Confinement, res.Warning = describeConfinement(b)
		}
	}()
	stop := heartbeatWhileRunning(ctx, nil)
	defer stop()

	lost := false
	if h := req.Handle; h != nil && h.Backend == req.Backend {
		alive, err := b.Alive(ctx, *h)
		if err != nil {
			return EnsureResult{}, classify("ensure: alive", err)
		}
		if alive {
			// This worker sees the sandbox, so for a host-bound backend its
			// queue is the right one, whatever the handle said before.
			out := *h
			out.TaskQueue = a.taskQueue(b)
			return EnsureResult{Handle: out}, nil
		}
		lost = true
		a.log().Warn("sandbox lost; creating a new one", "session_id", req.SessionID, "sandbox", h.ID, "backend", h.Backend)
	}

	h, err := b.Create(ctx, Spec{SessionID: req.SessionID, Labels: req.Labels})
	if err != nil {
		return EnsureResult{}, classify("ensure: create", err)
	}
	h.TaskQueue = a.taskQueue(b)
	res = EnsureResult{Handle: h, Created: true}
	if req.Snapshot == "" {
		if lost {
			res.Notice = NoticeLostNoSnapshot
		}
		return res, nil
	}
	if err := a.restore(ctx, b, h, req.Snapshot); err != nil {
		if errors.Is(err, ErrSnapshotNotFound) {
			a.log().Warn("snapshot missing; continuing with an empty workspace", "session_id", req.SessionID, "key", req.Snapshot)
			res.Notice = NoticeSnapshotMissing
			return res, nil
		}
		// Do not leave a half-made sandbox nobody holds a handle to.
		if derr := b.Destroy(context.WithoutCancel(ctx), h); derr != nil {
			a.log().Warn("cannot destroy sandbox after failed restore", "sandbox", h.ID, "error", derr)
		}
		if errors.Is(err, ErrUnsafeArchive) || errors.Is(err, ErrBadKey) || errors.Is(err, ErrCorruptObject) || errors.Is(err, ErrBadManifest) {
			msg := fmt.Sprintf("sandbox: ensure: restore %s: %v", req.Snapshot, err)
			return EnsureResult{}, temporal.NewNonRetryableApplicationError(msg, ErrTypeRestoreFailed, nil)
		}
		return EnsureResult{}, classify("ensure: restore "+req.Snapshot, err)
	}
	res.Restored = true
	switch {
	case lost:
		res.Notice = NoticeRestoredAfterLoss
	case req.Handle != nil:
		res.Notice = fmt.Sprintf(noticeSwitched, req.Backend)
	}
	a.log().Info("sandbox restored from snapshot", "session_id", req.SessionID, "sandbox", h.ID, "key", req.Snapshot)
	return res, nil
}

func (a *Activities) taskQueue(b Backend) string {
	if hb, ok := b.(HostBound); ok && hb.HostBound() {
		return a.HostQueue
	}
	if a.SessionQueue != "" {
		return session.BackendQueue(a.SessionQueue, b.Name())
	}
	return ""
}

func (a *Activities) restore(ctx context.Context, b Backend, h Handle, key string) error {
	if a.Store == nil {
		return errors.New("no snapshot store configured")
	}
	if err := CheckKey(key); err != nil {
		return err
	}
	r, err := a.Store.Open(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	if head, _ := br.Peek(len(manifestMagic)); IsManifest(head) {
		m, err := readManifest(ctx, a.Store, path.Dir(key), br)
		if err != nil {
			return err
		}
		return a.restoreManifest(ctx, b, h, m)
	}
	tr, err := ReadSnapshot(br)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnsafeArchive, err)
	}
	defer tr.Close()
	return b.Import(ctx, h, tr)
}

// Snapshot writes the workspace to req.Key unless its fingerprint still
// equals req.PrevFingerprint. The archive streams from the backend into
// the store through a pipe; nothing holds the whole workspace in memory.
func (a *Activities) Snapshot(ctx context.Context, req SnapshotRequest) (res SnapshotResult, err error) {
	defer func() { err = RedactError(a.Redactor, err) }()
	if err := CheckKey(req.Key); err != nil {
		return SnapshotResult{}, badRequest("sandbox: snapshot: %v", err)
	}
	if a.Store == nil {
		return SnapshotResult{}, badRequest("sandbox: snapshot: no snapshot store configured")
	}
	b, err := a.backend(req.Handle.Backend)
	if err != nil {
		return SnapshotResult{}, err
	}
	start := time.Now()
	defer func() { countSnapshot(req.Handle.Backend, res, err, time.Since(start)) }()
	stop := heartbeatWhileRunning(ctx, nil)
	defer stop()

	var fp string
	if f, ok := b.(Fingerprinter); ok {
		if fp, err = f.Fingerprint(ctx, req.Handle); err != nil {
			return SnapshotResult{}, classify("snapshot: fingerprint", err)
		}
		if fp != "" && fp == req.PrevFingerprint {
			return SnapshotResult{Written: false, Fingerprint: fp}, nil
		}
	}
	n, err := a.export(ctx, b, req.Handle, req.Key)
	if err != nil {
		return SnapshotResult{}, err
	}
	return SnapshotResult{Written: true, Key: req.Key, Fingerprint: fp, Bytes: n}, nil
}

// countSnapshot counts a snapshot activity's outcome: written (with its
// stored size and duration), unchanged, or the error's type.
func countSnapshot(backend string, res SnapshotResult, err error, d time.Duration) {
	outcome := metrics.SnapshotUnchanged
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && (appErr.Type() == ErrTypeWorkspaceOverQuota || appErr.Type() == ErrTypeSnapshotTooLarge):
		outcome = appErr.Type()
	case err != nil:
		outcome = metrics.SnapshotError
	case res.Written:
		outcome = metrics.SnapshotWritten
	}
	metrics.Snapshot(backend, outcome, res.Bytes, d)
}

// export streams the workspace from the backend through the compressor
// into the store: backend tar → workspace limit → zstd → snapshot limit →
// pipe → store. Nothing holds the whole workspace in memory, and the store
// makes the object appear only if the stream ends cleanly, so a workspace
// over its quota or a snapshot over its cap leaves the previous snapshot
// the session's latest. It returns the stored (compressed) size.
func (a *Activities) export(ctx context.Context, b Backend, h Handle, key string) (int64, error) {
	pr, pw := io.Pipe()
	stored := &limitWriter{w: pw, limit: a.Limits.SnapshotBytes, err: ErrOverLimit}
	enc, err := compressSnapshot(stored)
	if err != nil {
		return 0, classify("snapshot", err)
	}
	archive := &limitWriter{w: enc, limit: a.Limits.WorkspaceBytes, err: ErrOverLimit}
	exported := make(chan error, 1)
	go func() {
		err := b.Export(ctx, h, archive)
		if cerr := enc.Close(); err == nil {
			err = cerr // the last frame failed to reach the store
		}
		pw.CloseWithError(err) // nil: the reader sees EOF
		exported <- err
	}()
	n, putErr := a.Store.Put(ctx, key, pr)
	if putErr != nil {
		pr.CloseWithError(putErr) // unblock the exporter
	}
	exportErr := <-exported
	// The limits are read from the counters, not from the error: a
	// backend may wrap a writer's error any way it likes.
	switch {
	case archive.over():
		a.log().Warn("workspace over quota; snapshot not stored", "session_id", h.SessionID, "key", key, "quota", a.Limits.WorkspaceBytes)
		return 0, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the workspace is over its quota of %s (%s), so no snapshot was stored; delete files such as build output, caches or downloads to get under it, or ask the operator to raise the quota",
			FormatBytes(a.Limits.WorkspaceBytes), a.Limits.WorkspaceSetting), ErrTypeWorkspaceOverQuota, nil)
	case stored.over():
		a.log().Warn("snapshot over its cap; not stored", "session_id", h.SessionID, "key", key, "cap", a.Limits.SnapshotBytes)
		return 0, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the compressed snapshot of the workspace grew past its cap of %s (%s), so none was stored; delete files (large or already-compressed ones count the most) to get under it, or ask the operator to raise the cap",
			FormatBytes(a.Limits.SnapshotBytes), a.Limits.SnapshotSetting), ErrTypeSnapshotTooLarge, nil)
	case exportErr != nil:
		return 0, classify("snapshot: export", exportErr)
	case putErr != nil:
		return 0, classify("snapshot: store", putErr)
	}
	return n, nil
}

// CopySnapshot copies a snapshot to a new key, so a fork owns its own copy
// and never shares a key with its source.
func (a *Activities) CopySnapshot(ctx context.Context, req CopySnapshotRequest) (err error) {
	defer func() { err = RedactError(a.Redactor, err) }()
	for _, k := range []string{req.From, req.To} {
		if err := CheckKey(k); err != nil {
			return badRequest("sandbox: copy snapshot: %v", err)
		}
	}
	if req.From == req.To {
		return badRequest("sandbox: copy snapshot: from and to are the same key %q", req.From)
	}
	if a.Store == nil {
		return badRequest("sandbox: copy snapshot: no snapshot store configured")
	}
	// Housekeeping activities run with a heartbeat timeout (a dead host is
	// noticed in minutes, not after StartToClose), so they must beat while
	// they work, however long a large copy or delete takes.
	stop := heartbeatWhileRunning(ctx, nil)
	defer stop()
	if err := a.Store.Copy(ctx, req.From, req.To); err != nil {
		return classify("copy snapshot", err)
	}
	return nil
}

// Destroy removes the session's sandbox (when a handle is given; for a
// host-bound backend run it on the handle's TaskQueue) and, if asked, all
// snapshots under the session's prefix. Both steps are idempotent.
func (a *Activities) Destroy(ctx context.Context, req DestroyRequest) (err error) {
	defer func() { err = RedactError(a.Redactor, err) }()
	if req.DeleteSnapshots && req.SessionID == "" {
		return badRequest("sandbox: destroy: session_id is required to delete snapshots")
	}
	// Housekeeping activities run with a heartbeat timeout (a dead host is
	// noticed in minutes, not after StartToClose), so they must beat while
	// they work, however long a large copy or delete takes.
	stop := heartbeatWhileRunning(ctx, nil)
	defer stop()
	if req.Handle != nil {
		b, err := a.backend(req.Handle.Backend)
		if err != nil {
			return err
		}
		if err := b.Destroy(ctx, *req.Handle); err != nil {
			return classify("destroy", err)
		}
	}
	if req.DeleteSnapshots {
		if a.Store == nil {
			return badRequest("sandbox: destroy: no snapshot store configured")
		}
		n, err := a.Store.DeletePrefix(ctx, SessionPrefix(req.SessionID))
		if err != nil {
			return classify("destroy: delete snapshots", err)
		}
		a.log().Info("deleted session snapshots", "session_id", req.SessionID, "count", n)
	}
	return nil
}

// ServedBackends returns the names of the backends this worker serves,
// sorted. Workers of one deployment are expected to serve the same set;
// the answer comes from whichever worker runs the activity.
func (a *Activities) ServedBackends(ctx context.Context) ([]string, error) {
	return a.Backends.Names(), nil
}

// HeartbeatEvery is the longest gap between two heartbeats of a running
// sandbox activity.
const HeartbeatEvery = time.Second

// beatAtOnce makes heartbeatWhileRunning send its first beat at the start
// instead of one interval later; only tests set it (export_test.go).
var beatAtOnce atomic.Bool

// heartbeatWhileRunning records a heartbeat regularly until stop is
// called, with details() (if not nil) as the details. The interval is a
// third of the activity's heartbeat timeout (at most HeartbeatEvery), so
// long commands, exports and restores are not mistaken for a dead worker,
// and a cancellation reaches the activity promptly.
//
// The first beat goes out one interval after the start, not at once: the
// SDK makes a worker's first heartbeat a synchronous call to the server
// (a write to its database), and stop waits for it, so a quick command
// or snapshot paid a round trip it did not need — most of a 10-call
// turn's orchestration cost against the real-work floor (docs/
// PERFORMANCE.md, Turn overhead). The server's heartbeat timeout runs
// from the activity's start either way, so a worker that dies before the
// first beat is still found; its exec then reports every command as one
// that may have run, never re-running any (ExecProgress.Outcome).
func heartbeatWhileRunning(ctx context.Context, details func() any) (stop func()) {
	// (beatAtOnce: tests that check what a beat carries send the first
	// one at the start, as quick activities otherwise send none.)
	beat := func() {
		if details != nil {
			activity.RecordHeartbeat(ctx, details())
		} else {
			activity.RecordHeartbeat(ctx)
		}
	}
	interval := activity.GetInfo(ctx).HeartbeatTimeout / 3
	if interval <= 0 {
		interval = session.DefaultExecHeartbeat / 3
	}
	// Beat at least every second: a cancellation (/stop) reaches a running
	// activity only in a heartbeat's response, so this bounds how long a
	// stopped command keeps running. (Workers set MaxHeartbeatThrottleInterval
	// to match, or the SDK would hold beats back.)
	interval = min(max(interval, 100*time.Millisecond), HeartbeatEvery)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		if beatAtOnce.Load() {
			beat()
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// RedactError returns err with r's secrets scrubbed from every text it
// carries, keeping what the workflow acts on: an ApplicationError stays one,
// with its type, retryability, retry delay and category (its cause becomes
// its scrubbed text; details are dropped only if its texts had to change,
// and no error of ours carries any). A cancellation passes unchanged: its
// only text is "canceled", and the partial result it carries was built
// from scrubbed command results. Any other error whose chain holds a
// secret becomes a plain error with the scrubbed text, which still answers
// errors.Is for its original chain but no longer unwraps to it: Temporal
// serialises each unwrapped cause's own text into history.
func RedactError(r Redactor, err error) error {
	if r == nil || err == nil {
		return err
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) && err == error(canceled) {
		return err
	}
	if !chainHolds(r, err) {
		return err
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		msg := appErr.Message()
		if err != error(appErr) {
			msg = err.Error() // wrapped: keep the wrapping context
		}
		var cause error
		if c := appErr.Unwrap(); c != nil && err == error(appErr) {
			cause = errors.New(r.Redact(c.Error()))
		}
		return temporal.NewApplicationErrorWithOptions(r.Redact(msg), appErr.Type(), temporal.ApplicationErrorOptions{
			NonRetryable: appErr.NonRetryable(), Cause: cause,
			NextRetryDelay: appErr.NextRetryDelay(), Category: appErr.Category(),
		})
	}
	return &redactedError{msg: r.Redact(err.Error()), orig: err}
}

// chainHolds reports whether any text in err's chain holds a secret.
func chainHolds(r Redactor, err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s := e.Error(); r.Redact(s) != s {
			return true
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				if chainHolds(r, x) {
					return true
				}
			}
		}
	}
	return false
}

// redactedError is an error whose text had secrets scrubbed. It has no
// Unwrap on purpose (see RedactError) but answers errors.Is, so callers
// still tell ErrNotFound and ErrUnavailable apart.
type redactedError struct {
	msg  string
	orig error
}

func (e *redactedError) Error() string        { return e.msg }
func (e *redactedError) Is(target error) bool { return errors.Is(e.orig, target) }

// cutRedactor is a Redactor that also scrubs the pieces of a secret an
// output cap cut in two (redact.Redactor implements it).
type cutRedactor interface {
	RedactAround(s, cut string) string
}

// redactOutput scrubs a command's captured output, where the output cap
// may have cut a secret at TruncationMarker.
func (b redactingBackend) redactOutput(s string) string {
	if c, ok := b.r.(cutRedactor); ok {
		return c.RedactAround(s, TruncationMarker)
	}
	return b.r.Redact(s)
}

// redacting returns b with the output and errors of its commands scrubbed,
// for Exec: the scrubbing happens as each command returns, before its
// result reaches the heartbeat details, the activity result or an error.
func (a *Activities) redacting(b Backend) Backend {
	if a.Redactor == nil {
		return b
	}
	return redactingBackend{Backend: b, r: a.Redactor}
}

// redactingBackend is a Backend whose Exec scrubs. Only Exec is used
// through it, so hiding the optional capabilities costs nothing.
type redactingBackend struct {
	Backend
	r Redactor
}

func (b redactingBackend) Exec(ctx context.Context, h Handle, cmd Cmd) (Result, error) {
	res, err := b.Backend.Exec(ctx, h, cmd)
	res.Stdout, res.Stderr = b.redactOutput(res.Stdout), b.redactOutput(res.Stderr)
	return res, RedactError(b.r, err)
}

// Describer is an optional Backend capability: how it confines commands,
// for /status, and whether it does at all.
type Describer interface {
	// Describe says in one line what commands can see and do.
	Describe() string
	// Confined is false when commands run with the worker's own rights.
	Confined() bool
	// SharesNetwork is true when commands reach the host's network.
	SharesNetwork() bool
}

// Warnings a session shows on the first card of a sandbox it made.
const (
	WarningUnconfined = "⚠️ This session's sandbox is NOT confined: its commands run with the worker's rights and can read the host's files, see its processes and reach its network. An operator turned confinement off (SANDBOT_SANDBOX_LOCAL_UNCONFINED)."
	WarningNetwork    = "⚠️ This session's sandbox shares the host's network: its commands can reach any service the worker can (SANDBOT_SANDBOX_LOCAL_NETWORK)."
)

func describeConfinement(b Backend) (line, warning string) {
	d, ok := b.(Describer)
	if !ok {
		return "", ""
	}
	line = d.Describe()
	switch {
	case !d.Confined():
		warning = WarningUnconfined
	case d.SharesNetwork():
		warning = WarningNetwork
	}
	return line, warning
}

// HeartbeatWhileRunning is heartbeatWhileRunning without details, for the
// worker's other long activities (the repository loop's clones and pushes).
// Outside an activity it does nothing.
func HeartbeatWhileRunning(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	return heartbeatWhileRunning(ctx, nil)
}
