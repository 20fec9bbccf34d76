package sandbox_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/blobstore"
	"github.com/sandbot/sandbot/sandbox/local"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
	"github.com/sandbot/sandbot/session"
)

const hostQueue = "sandbot-host-test"

// fixture wires the real local backend and a real file store into the
// activities, run by the SDK's activity test environment.
type fixture struct {
	env   *testsuite.TestActivityEnvironment
	acts  *sandbox.Activities
	local *local.Backend
	store *blobstore.Store
	// storeDir is the file store's directory.
	storeDir string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOf(t, func(lb *local.Backend) sandbox.Backend { return lb })
}

// newFixtureOf serves the local backend as wrap makes it.
func newFixtureOf(t *testing.T, wrap func(*local.Backend) sandbox.Backend) *fixture {
	t.Helper()
	lb, err := local.New(local.Options{Root: t.TempDir(), Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	storeDir := t.TempDir()
	store, err := blobstore.Open(context.Background(), "file://"+storeDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	backends, err := sandbox.NewBackends(wrap(lb))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	acts := &sandbox.Activities{Backends: backends, Store: store, HostQueue: hostQueue, Logger: logger}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(logger))
	env := suite.NewTestActivityEnvironment()
	// Registering the struct also proves every exported method is a valid
	// activity, as cmd/worker will register it the same way.
	env.RegisterActivity(acts)
	return &fixture{env: env, acts: acts, local: lb, store: store, storeDir: storeDir}
}

func (f *fixture) ensure(t *testing.T, req sandbox.EnsureRequest) sandbox.EnsureResult {
	t.Helper()
	res, err := run[sandbox.EnsureResult](f.env, f.acts.Ensure, req)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return res
}

func (f *fixture) snapshot(t *testing.T, req sandbox.SnapshotRequest) sandbox.SnapshotResult {
	t.Helper()
	res, err := run[sandbox.SnapshotResult](f.env, f.acts.Snapshot, req)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return res
}

func run[T any](env *testsuite.TestActivityEnvironment, fn any, args ...any) (T, error) {
	var out T
	val, err := env.ExecuteActivity(fn, args...)
	if err != nil {
		return out, err
	}
	if val != nil && val.HasValue() {
		err = val.Get(&out)
	}
	return out, err
}

// appErr asserts err is a non-retryable ApplicationError of type typ.
func appErr(t *testing.T, err error, typ string) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an ApplicationError", err)
	}
	if ae.Type() != typ || !ae.NonRetryable() {
		t.Fatalf("error type %q non-retryable=%v (%v), want %q non-retryable", ae.Type(), ae.NonRetryable(), err, typ)
	}
	return ae
}

func TestEnsureCreatesThenReuses(t *testing.T) {
	f := newFixture(t)
	req := sandbox.EnsureRequest{SessionID: "slack:T1:C1:1.1", Backend: local.Name}
	first := f.ensure(t, req)
	if !first.Created || first.Restored || first.Notice != "" {
		t.Errorf("first Ensure = %+v, want Created without notice", first)
	}
	if first.Handle.TaskQueue != hostQueue {
		t.Errorf("TaskQueue = %q, want the host queue %q", first.Handle.TaskQueue, hostQueue)
	}
	if fi, err := os.Stat(first.Handle.Workdir); err != nil || !fi.IsDir() {
		t.Fatalf("workspace not created: %v", err)
	}
	sandboxtest.Sh(t, f.local, first.Handle, "echo kept > f")

	req.Handle = &first.Handle
	second := f.ensure(t, req)
	if second.Created || second.Handle.ID != first.Handle.ID {
		t.Errorf("Ensure with a live handle = %+v, want the same sandbox", second)
	}
	if got := sandboxtest.Sh(t, f.local, second.Handle, "cat f"); got != "kept\n" {
		t.Errorf("workspace lost across Ensure: %q", got)
	}
}

func TestEnsureRestoresLostSandboxFromSnapshot(t *testing.T) {
	f := newFixture(t)
	sid := "discord:G1:C1:42"
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
	sandboxtest.Sh(t, f.local, h, "mkdir -p src && echo 'print(1)' > src/main.py")
	key := sandbox.SnapshotKey(sid, 3)
	if res := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: key}); !res.Written || res.Bytes == 0 {
		t.Fatalf("Snapshot = %+v, want written", res)
	}

	if err := os.RemoveAll(h.Workdir); err != nil { // lost behind the session's back
		t.Fatal(err)
	}
	res := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name, Handle: &h, Snapshot: key})
	if !res.Created || !res.Restored || res.Notice != sandbox.NoticeRestoredAfterLoss {
		t.Errorf("Ensure after loss = %+v, want Created, Restored and the loss notice", res)
	}
	if got := sandboxtest.Sh(t, f.local, res.Handle, "cat src/main.py"); got != "print(1)\n" {
		t.Errorf("restored workspace reads %q", got)
	}
}

func TestEnsureNoticesWithoutSnapshot(t *testing.T) {
	f := newFixture(t)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s1", Backend: local.Name}).Handle
	if err := f.local.Destroy(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	res := f.ensure(t, sandbox.EnsureRequest{SessionID: "s1", Backend: local.Name, Handle: &h})
	if !res.Created || res.Restored || res.Notice != sandbox.NoticeLostNoSnapshot {
		t.Errorf("Ensure after loss without snapshot = %+v", res)
	}
	res = f.ensure(t, sandbox.EnsureRequest{SessionID: "s2", Backend: local.Name, Snapshot: sandbox.SnapshotKey("s2", 9)})
	if !res.Created || res.Restored || res.Notice != sandbox.NoticeSnapshotMissing {
		t.Errorf("Ensure with a missing snapshot = %+v", res)
	}
}

func TestEnsureRefusesUnknownAndUnavailableBackends(t *testing.T) {
	f := newFixture(t)
	_, err := run[sandbox.EnsureResult](f.env, f.acts.Ensure, sandbox.EnsureRequest{SessionID: "s", Backend: "e2b"})
	if ae := appErr(t, err, sandbox.ErrTypeUnknownBackend); !strings.Contains(ae.Error(), `"e2b"`) || !strings.Contains(ae.Error(), "local") {
		t.Errorf("message %q should name the backend and list the served ones", ae.Error())
	}

	if err := os.RemoveAll(f.local.Root()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.local.Root(), []byte("oops"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = run[sandbox.EnsureResult](f.env, f.acts.Ensure, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name})
	appErr(t, err, sandbox.ErrTypeUnavailable)

	_, err = run[sandbox.EnsureResult](f.env, f.acts.Ensure, sandbox.EnsureRequest{Backend: local.Name})
	appErr(t, err, sandbox.ErrTypeBadRequest)
}

func TestEnsureRefusesUnsafeSnapshot(t *testing.T) {
	f := newFixture(t)
	key := sandbox.SnapshotKey("s", 1)
	evil := sandboxtest.BuildTar(t, sandboxtest.TarEntry{Name: "../../escape", Body: "x"})
	if _, err := f.store.Put(context.Background(), key, bytes.NewReader(evil)); err != nil {
		t.Fatal(err)
	}
	_, err := run[sandbox.EnsureResult](f.env, f.acts.Ensure, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name, Snapshot: key})
	appErr(t, err, sandbox.ErrTypeRestoreFailed)
	entries, _ := os.ReadDir(f.local.Root())
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			t.Errorf("failed restore left workspace %s behind", e.Name())
		}
	}
}

// settle waits until the workspace fingerprint stops changing: files just
// written are deliberately "racy" for a moment (see local.Fingerprint).
func settle(t *testing.T, f *fixture, h sandbox.Handle) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err1 := f.local.Fingerprint(context.Background(), h)
		b, err2 := f.local.Fingerprint(context.Background(), h)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if a == b {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("fingerprint never settled")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSnapshotSkipsUnchangedWorkspace(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	sandboxtest.Sh(t, f.local, h, "printf v1 > state")
	settle(t, f, h)

	first := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("s", 1)})
	if !first.Written || first.Fingerprint == "" || first.Key != sandbox.SnapshotKey("s", 1) {
		t.Fatalf("first Snapshot = %+v", first)
	}
	second := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("s", 2), PrevFingerprint: first.Fingerprint})
	if second.Written || second.Fingerprint != first.Fingerprint {
		t.Errorf("Snapshot of an unchanged workspace = %+v, want not written", second)
	}
	if ok, _ := f.store.Exists(ctx, sandbox.SnapshotKey("s", 2)); ok {
		t.Error("skipped snapshot was stored anyway")
	}

	sandboxtest.Sh(t, f.local, h, "printf v2 > state") // same size, new content
	third := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("s", 3), PrevFingerprint: first.Fingerprint})
	if !third.Written {
		t.Fatalf("Snapshot after a change = %+v, want written", third)
	}
	r, err := f.store.Open(ctx, sandbox.SnapshotKey("s", 3))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if head := make([]byte, 4); func() error { _, err := io.ReadFull(r, head); return err }() != nil || !bytes.Equal(head, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Fatalf("snapshot does not start with the zstd magic number: % x", head)
	}
	r.Close()
	if r, err = f.store.Open(ctx, sandbox.SnapshotKey("s", 3)); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	plain, err := sandbox.ReadSnapshot(r)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	tr := tar.NewReader(plain)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != "state" {
		t.Fatalf("snapshot's first entry %v, %v", hdr, err)
	}
	if body := new(bytes.Buffer); func() error { _, err := body.ReadFrom(tr); return err }() != nil || body.String() != "v2" {
		t.Errorf("snapshot holds %q, want v2", body)
	}
}

func TestSnapshotOfLostSandboxFails(t *testing.T) {
	f := newFixture(t)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	if err := os.RemoveAll(h.Workdir); err != nil {
		t.Fatal(err)
	}
	_, err := run[sandbox.SnapshotResult](f.env, f.acts.Snapshot, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("s", 1)})
	appErr(t, err, sandbox.ErrTypeNotFound)
	if ok, _ := f.store.Exists(context.Background(), sandbox.SnapshotKey("s", 1)); ok {
		t.Error("a failed snapshot left an object")
	}
	_, err = run[sandbox.SnapshotResult](f.env, f.acts.Snapshot, sandbox.SnapshotRequest{Handle: h, Key: "../x"})
	appErr(t, err, sandbox.ErrTypeBadRequest)
}

func TestCopySnapshotGivesForkItsOwnCopy(t *testing.T) {
	f := newFixture(t)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "parent", Backend: local.Name}).Handle
	sandboxtest.Sh(t, f.local, h, "echo from-parent > f")
	src := sandbox.SnapshotKey("parent", 1)
	f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: src})
	dst := sandbox.SnapshotKey("fork", 0)
	if _, err := run[struct{}](f.env, f.acts.CopySnapshot, sandbox.CopySnapshotRequest{From: src, To: dst}); err != nil {
		t.Fatalf("CopySnapshot: %v", err)
	}
	// Destroying the parent's snapshots leaves the fork's copy intact.
	if _, err := run[struct{}](f.env, f.acts.Destroy, sandbox.DestroyRequest{SessionID: "parent", Handle: &h, DeleteSnapshots: true}); err != nil {
		t.Fatal(err)
	}
	res := f.ensure(t, sandbox.EnsureRequest{SessionID: "fork", Backend: local.Name, Snapshot: dst})
	if !res.Restored {
		t.Fatalf("fork Ensure = %+v", res)
	}
	if got := sandboxtest.Sh(t, f.local, res.Handle, "cat f"); got != "from-parent\n" {
		t.Errorf("fork workspace reads %q", got)
	}

	_, err := run[struct{}](f.env, f.acts.CopySnapshot, sandbox.CopySnapshotRequest{From: sandbox.SnapshotKey("nobody", 1), To: dst})
	appErr(t, err, sandbox.ErrTypeSnapshotNotFound)
	_, err = run[struct{}](f.env, f.acts.CopySnapshot, sandbox.CopySnapshotRequest{From: dst, To: dst})
	appErr(t, err, sandbox.ErrTypeBadRequest)
}

func TestDestroyRemovesSandboxAndSnapshots(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "doomed", Backend: local.Name}).Handle
	other := f.ensure(t, sandbox.EnsureRequest{SessionID: "doomed-too-not", Backend: local.Name}).Handle
	sandboxtest.Sh(t, f.local, h, "echo x > f")
	for turn := 1; turn <= 2; turn++ {
		f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("doomed", turn)})
	}
	f.snapshot(t, sandbox.SnapshotRequest{Handle: other, Key: sandbox.SnapshotKey("doomed-too-not", 1)})

	req := sandbox.DestroyRequest{SessionID: "doomed", Handle: &h, DeleteSnapshots: true}
	for i := range 2 { // idempotent
		if _, err := run[struct{}](f.env, f.acts.Destroy, req); err != nil {
			t.Fatalf("Destroy #%d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(h.Workdir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace still exists: %v", err)
	}
	for turn := 1; turn <= 2; turn++ {
		if ok, _ := f.store.Exists(ctx, sandbox.SnapshotKey("doomed", turn)); ok {
			t.Errorf("snapshot of turn %d survived", turn)
		}
	}
	if ok, _ := f.store.Exists(ctx, sandbox.SnapshotKey("doomed-too-not", 1)); !ok {
		t.Error("another session's snapshot was deleted")
	}
	if alive, _ := f.local.Alive(ctx, other); !alive {
		t.Error("another session's sandbox was destroyed")
	}
	_, err := run[struct{}](f.env, f.acts.Destroy, sandbox.DestroyRequest{DeleteSnapshots: true})
	appErr(t, err, sandbox.ErrTypeBadRequest)
}

func TestServedBackends(t *testing.T) {
	f := newFixture(t)
	got, err := run[[]string](f.env, f.acts.ServedBackends)
	if err != nil || !slices.Equal(got, []string{"local"}) {
		t.Errorf("ServedBackends = %v, %v", got, err)
	}
	if _, err := sandbox.NewBackends(f.local, f.local); err == nil {
		t.Error("NewBackends accepted a duplicate name")
	}
}

func TestSnapshotStreamsWithoutBuffering(t *testing.T) {
	// A workspace larger than any buffer in the path proves the archive
	// streams; the restored copy proves nothing was lost on the way.
	f := newFixture(t)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "big", Backend: local.Name}).Handle
	sandboxtest.Sh(t, f.local, h, "head -c 40000000 /dev/urandom > blob && cksum blob > blob.sum")
	res := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("big", 1)})
	if !res.Written || res.Bytes < 40000000 {
		t.Fatalf("Snapshot = %+v", res)
	}
	if err := os.RemoveAll(h.Workdir); err != nil {
		t.Fatal(err)
	}
	got := f.ensure(t, sandbox.EnsureRequest{SessionID: "big", Backend: local.Name, Handle: &h, Snapshot: res.Key})
	if out := sandboxtest.Sh(t, f.local, got.Handle, "cksum blob | cmp - blob.sum && echo same"); out != "same\n" {
		t.Errorf("restored blob differs: %q", out)
	}
	if _, err := os.Stat(filepath.Join(got.Handle.Workdir, "blob")); err != nil {
		t.Fatal(err)
	}
}

// TestEnsureOnAnotherHostRestores covers the host-bound fallback: the
// sandbox's host is gone, so the workflow asks a worker on another host,
// which must not mistake the handle for one of its own.
func TestEnsureOnAnotherHostRestores(t *testing.T) {
	hostA, hostB := newFixture(t), newFixture(t)
	hostB.store = hostA.store
	hostB.acts.Store = hostA.store
	sid := "s"
	h := hostA.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
	sandboxtest.Sh(t, hostA.local, h, "echo from-a > f")
	key := sandbox.SnapshotKey(sid, 1)
	hostA.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: key})

	res := hostB.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name, Handle: &h, Snapshot: key})
	if !res.Created || !res.Restored || res.Notice != sandbox.NoticeRestoredAfterLoss {
		t.Errorf("Ensure on another host = %+v", res)
	}
	if got := sandboxtest.Sh(t, hostB.local, res.Handle, "cat f"); got != "from-a\n" {
		t.Errorf("restored workspace reads %q", got)
	}
}

// Housekeeping activities run with a heartbeat timeout, so each must
// heartbeat while it works (a long copy or delete would otherwise time out
// and be retried while it still runs).
func TestHousekeepingActivitiesHeartbeat(t *testing.T) {
	sandbox.BeatAtOnce(t) // quick ones otherwise send none
	f := newFixture(t)
	var beats atomic.Int32
	f.env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "hk", Backend: local.Name}).Handle
	sandboxtest.Sh(t, f.local, h, "echo x > f")
	key := sandbox.SnapshotKey("hk", 1)
	f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: key})
	calls := []struct {
		name string
		fn   any
		arg  any
	}{
		{"CopySnapshot", f.acts.CopySnapshot, sandbox.CopySnapshotRequest{From: key, To: sandbox.SnapshotKey("hk-fork", 0)}},
		{"Suspend", f.acts.Suspend, sandbox.SuspendRequest{Handle: h}},
		{"DeleteSnapshots", f.acts.DeleteSnapshots, sandbox.DeleteSnapshotsRequest{Keys: []string{sandbox.SnapshotKey("hk-fork", 0)}}},
		{"Destroy", f.acts.Destroy, sandbox.DestroyRequest{SessionID: "hk", Handle: &h, DeleteSnapshots: true}},
	}
	for _, c := range calls {
		before := beats.Load()
		if _, err := f.env.ExecuteActivity(c.fn, c.arg); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if beats.Load() == before {
			t.Errorf("%s recorded no heartbeat", c.name)
		}
	}
}

// notHostBound hides the local backend's HostBound, as a cloud backend
// has none.
type notHostBound struct{ sandbox.Backend }

func (notHostBound) Name() string { return "cloudish" }

// A sandbox any worker can reach gets its backend's queue, so any worker
// serving the backend runs its commands; only host-bound sandboxes are
// pinned to the host that made them.
func TestEnsureQueuesOfCloudSandboxes(t *testing.T) {
	f := newFixture(t)
	backends, err := sandbox.NewBackends(f.local, notHostBound{f.local})
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Backends = backends
	f.acts.SessionQueue = "sq"
	for backend, want := range map[string]string{local.Name: hostQueue, "cloudish": session.BackendQueue("sq", "cloudish")} {
		res := f.ensure(t, sandbox.EnsureRequest{SessionID: "s-" + backend, Backend: backend})
		if res.Handle.TaskQueue != want {
			t.Errorf("%s: TaskQueue = %q, want %q", backend, res.Handle.TaskQueue, want)
		}
	}
}

// refusing is a backend whose provider refuses the key.
type refusing struct{ sandbox.Backend }

func (refusing) Name() string { return "refusing" }
func (refusing) Create(context.Context, sandbox.Spec) (sandbox.Handle, error) {
	return sandbox.Handle{}, fmt.Errorf("e2b: E2B_API_KEY was refused by https://api.e2b.app (401 Invalid API key): %w", sandbox.ErrUnauthenticated)
}

// A key revoked while the worker runs fails the call at once, as an
// unavailable backend, with the message naming the variable: retrying
// cannot help.
func TestRefusedCredentialsAreUnavailable(t *testing.T) {
	f := newFixture(t)
	backends, err := sandbox.NewBackends(refusing{f.local})
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Backends = backends
	_, err = run[sandbox.EnsureResult](f.env, f.acts.Ensure, sandbox.EnsureRequest{SessionID: "s", Backend: "refusing"})
	if ae := appErr(t, err, sandbox.ErrTypeUnavailable); !strings.Contains(ae.Error(), "E2B_API_KEY was refused") {
		t.Fatalf("error %v does not name the variable", ae)
	}
}
