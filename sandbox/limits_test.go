package sandbox_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/local"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// TestSnapshotOverQuotaIsRefused: a workspace past its quota gets no
// snapshot, the error says which setting bounds it and what to do, and the
// session's previous snapshot is still there to restore from.
func TestSnapshotOverQuotaIsRefused(t *testing.T) {
	f := newFixture(t)
	f.acts.Limits = sandbox.Limits{WorkspaceBytes: 1 << 20, WorkspaceSetting: "SANDBOT_SANDBOX_WORKSPACE_QUOTA"}
	ctx := context.Background()
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "q", Backend: local.Name}).Handle
	sandboxtest.Sh(t, f.local, h, "head -c 100000 /dev/zero > small")
	first := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("q", 1)})
	if !first.Written {
		t.Fatalf("snapshot under the quota = %+v", first)
	}

	sandboxtest.Sh(t, f.local, h, "head -c 3000000 /dev/zero > big")
	_, err := run[sandbox.SnapshotResult](f.env, f.acts.Snapshot, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("q", 2)})
	ae := appErr(t, err, sandbox.ErrTypeWorkspaceOverQuota)
	for _, want := range []string{"quota of 1 MiB", "SANDBOT_SANDBOX_WORKSPACE_QUOTA", "no snapshot was stored", "delete files"} {
		if !strings.Contains(ae.Message(), want) {
			t.Errorf("over-quota message %q lacks %q", ae.Message(), want)
		}
	}
	if ok, _ := f.store.Exists(ctx, sandbox.SnapshotKey("q", 2)); ok {
		t.Error("a snapshot of the over-quota workspace was stored")
	}
	if ok, _ := f.store.Exists(ctx, first.Key); !ok {
		t.Error("the previous snapshot is gone")
	}

	// Back under the quota, snapshots work again.
	sandboxtest.Sh(t, f.local, h, "rm big")
	if res := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("q", 3)}); !res.Written {
		t.Fatalf("snapshot after deleting = %+v", res)
	}
}

// TestSnapshotCapCountsCompressedBytes: the cap bounds what is stored, so
// a workspace of zeros far larger than the cap passes (it compresses to
// almost nothing), while random bytes of twice the cap are refused.
func TestSnapshotCapCountsCompressedBytes(t *testing.T) {
	f := newFixture(t)
	f.acts.Limits = sandbox.Limits{SnapshotBytes: 1 << 20, SnapshotSetting: "SANDBOT_SANDBOX_SNAPSHOT_MAX"}
	ctx := context.Background()
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "c", Backend: local.Name}).Handle
	sandboxtest.Sh(t, f.local, h, "head -c 20000000 /dev/zero > zeros")
	res := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("c", 1)})
	if !res.Written || res.Bytes >= 1<<20 {
		t.Fatalf("snapshot of 20 MB of zeros = %+v, want written and under 1 MiB stored", res)
	}

	sandboxtest.Sh(t, f.local, h, "head -c 2000000 /dev/urandom > noise")
	_, err := run[sandbox.SnapshotResult](f.env, f.acts.Snapshot, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("c", 2)})
	ae := appErr(t, err, sandbox.ErrTypeSnapshotTooLarge)
	for _, want := range []string{"cap of 1 MiB", "SANDBOT_SANDBOX_SNAPSHOT_MAX", "none was stored"} {
		if !strings.Contains(ae.Message(), want) {
			t.Errorf("over-cap message %q lacks %q", ae.Message(), want)
		}
	}
	if ok, _ := f.store.Exists(ctx, sandbox.SnapshotKey("c", 2)); ok {
		t.Error("a snapshot over the cap was stored")
	}
}

// TestRestoreReadsEveryStoredFormat: snapshots written before compression
// (plain tar) and gzip streams restore as well as zstd ones, so sessions
// older than this build keep their workspaces.
func TestRestoreReadsEveryStoredFormat(t *testing.T) {
	plain := sandboxtest.BuildTar(t, sandboxtest.TarEntry{Name: "hello.txt", Body: "from an old snapshot\n"})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	for name, data := range map[string][]byte{"plain": plain, "gzip": gz.Bytes()} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			key := sandbox.SnapshotKey(name, 1)
			if _, err := f.store.Put(context.Background(), key, bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			res := f.ensure(t, sandbox.EnsureRequest{SessionID: name, Backend: local.Name, Snapshot: key})
			if out := sandboxtest.Sh(t, f.local, res.Handle, "cat hello.txt"); out != "from an old snapshot\n" {
				t.Errorf("restored hello.txt = %q", out)
			}
		})
	}
}

// TestSnapshotRoundTripIsCompressed: what the store holds is zstd, smaller
// than the tar for a compressible workspace, and restores byte for byte.
func TestSnapshotRoundTripIsCompressed(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "z", Backend: local.Name}).Handle
	sandboxtest.Sh(t, f.local, h, "mkdir src && for i in $(seq 1 300); do echo \"line $i of a source file that repeats itself\"; done > src/a.txt && cksum src/a.txt > sum")
	res := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("z", 1)})
	r, err := f.store.Open(ctx, res.Key)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	plain, err := sandbox.ReadSnapshot(r)
	if err != nil {
		t.Fatal(err)
	}
	var tarBytes int64
	tr := tar.NewReader(plain)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		tarBytes += 512 + hdr.Size
	}
	if res.Bytes <= 0 || res.Bytes*3 > tarBytes {
		t.Errorf("stored %d bytes for a tar of at least %d: want under a third", res.Bytes, tarBytes)
	}
	other := f.ensure(t, sandbox.EnsureRequest{SessionID: "z2", Backend: local.Name, Snapshot: res.Key})
	if out := sandboxtest.Sh(t, f.local, other.Handle, "cksum src/a.txt | cmp - sum && echo same"); out != "same\n" {
		t.Errorf("restored workspace differs: %q", out)
	}
}
