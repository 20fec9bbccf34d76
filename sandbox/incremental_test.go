package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/local"
)

// archiveOnly serves the local backend without its Tree capability (and
// without its fingerprint), so snapshots go the way every other backend's
// do: a tar export hashed as it streams, and a restore through Import.
type archiveOnly struct{ sandbox.Backend }

// Both ways through the incremental snapshot code, against the real local
// backend and a real file store.
var snapshotPaths = []struct {
	name string
	wrap func(*local.Backend) sandbox.Backend
}{
	{"tree", func(lb *local.Backend) sandbox.Backend { return lb }},
	{"archive", func(lb *local.Backend) sandbox.Backend { return archiveOnly{lb} }},
}

// writeTree fills dir: files (some sharing content), a nested directory,
// an executable, a symlink and an empty file.
func writeTree(t *testing.T, dir string, files int) {
	t.Helper()
	for i := range files {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%d", i%5))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		k := i % (files/2 + 1)
		body := strings.Repeat(fmt.Sprintf("file %d\n", k), 50+k)
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.txt", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600))
	must(t, os.Symlink("pkg0/f000.txt", filepath.Join(dir, "link")))
	big := bytes.Repeat([]byte("0123456789abcdef"), (3<<20)/16) // over the in-memory size
	must(t, os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// treeState describes a workspace: every entry's type, mode and content
// (or link target), so two workspaces compare equal only if they are.
func treeState(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x", len(data), data[:min(len(data), 32)]) + fmt.Sprint(bytes.Count(data, []byte("\n")))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (f *fixture) save(t *testing.T, req sandbox.SnapshotRequest) sandbox.SnapshotResult {
	t.Helper()
	res, err := run[sandbox.SnapshotResult](f.env, f.acts.SaveWorkspace, req)
	if err != nil {
		t.Fatalf("SaveWorkspace: %v", err)
	}
	return res
}

// objectFiles lists the content objects in the file store.
func (f *fixture) objectFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(filepath.Join(f.storeDir, "objects"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestIncrementalSnapshotWritesWhatChanged(t *testing.T) {
	for _, path := range snapshotPaths {
		t.Run(path.name, func(t *testing.T) {
			f := newFixtureOf(t, path.wrap)
			sid := "slack:T1:C1:inc-" + path.name
			h := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
			writeTree(t, h.Workdir, 40)

			first := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 1)})
			// 40 files with 21 distinct contents, run.sh, an empty file, big.bin.
			if !first.Written || first.Objects != 21+3 || first.Files != 43 {
				t.Fatalf("first snapshot = %+v, want written with 24 objects for 43 files", first)
			}
			// Small contents and the manifest's parts are packed: one pack
			// each, and big.bin on its own.
			if got := len(f.objectFiles(t)); got != 3 {
				t.Fatalf("%d objects in the store, want a pack of contents, a pack of parts and big.bin", got)
			}

			// One file changed: one object and a manifest.
			must(t, os.WriteFile(filepath.Join(h.Workdir, "pkg1", "f001.txt"), bytes.Repeat([]byte("new"), 3400), 0o644))
			second := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 2), Base: first.Key, PrevFingerprint: first.Fingerprint})
			if !second.Written || second.Objects != 1 {
				t.Fatalf("snapshot after one change = %+v, want written with 1 object", second)
			}
			if second.Bytes > 8<<10 {
				t.Errorf("snapshot after one change wrote %d bytes, want a manifest and one small object", second.Bytes)
			}

			// Content that exists already is not written again.
			must(t, os.WriteFile(filepath.Join(h.Workdir, "copy.txt"), bytes.Repeat([]byte("new"), 3400), 0o644))
			third := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 3), Base: second.Key, PrevFingerprint: second.Fingerprint})
			if !third.Written || third.Objects != 0 {
				t.Fatalf("snapshot adding a copy = %+v, want a manifest and no object", third)
			}
			if path.name == "tree" {
				settle(t, f, h)
				settled := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 4), Base: third.Key})
				again := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 5), Base: settled.Key, PrevFingerprint: settled.Fingerprint})
				if again.Written {
					t.Errorf("unchanged workspace written again: %+v", again)
				}
			}
			want := treeState(t, h.Workdir)

			// A new sandbox (another host, a lost one) restores from the store alone.
			lost := f.ensure(t, sandbox.EnsureRequest{SessionID: sid + "-copy", Backend: local.Name, Snapshot: third.Key})
			if !lost.Restored {
				t.Fatalf("Ensure = %+v, want restored", lost)
			}
			if got := treeState(t, lost.Handle.Workdir); got != want {
				t.Fatalf("restored workspace differs:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestRewindRestoresAnEarlierSnapshot(t *testing.T) {
	for _, path := range snapshotPaths {
		t.Run(path.name, func(t *testing.T) {
			f := newFixtureOf(t, path.wrap)
			sid := "slack:T1:C1:rewind-" + path.name
			h := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
			writeTree(t, h.Workdir, 20)
			first := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 1)})
			state1 := treeState(t, h.Workdir)

			// Later turns change, add, remove and retype entries.
			must(t, os.WriteFile(filepath.Join(h.Workdir, "pkg0", "f000.txt"), []byte("changed"), 0o600))
			must(t, os.Remove(filepath.Join(h.Workdir, "run.sh")))
			must(t, os.RemoveAll(filepath.Join(h.Workdir, "pkg2")))
			must(t, os.WriteFile(filepath.Join(h.Workdir, "pkg2"), []byte("now a file"), 0o644))
			must(t, os.MkdirAll(filepath.Join(h.Workdir, "node_modules", "x"), 0o755))
			must(t, os.WriteFile(filepath.Join(h.Workdir, "node_modules", "x", "index.js"), []byte("module.exports = 1"), 0o644))
			must(t, os.Remove(filepath.Join(h.Workdir, "link")))
			must(t, os.Symlink("/etc/passwd", filepath.Join(h.Workdir, "link")))
			must(t, os.Chmod(filepath.Join(h.Workdir, "pkg1"), 0o500))
			second := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 2), Base: first.Key})

			res, err := run[sandbox.RestoreResult](f.env, f.acts.RestoreWorkspace, sandbox.RestoreRequest{Handle: h, Key: first.Key, Current: second.Key})
			if err != nil {
				t.Fatalf("RestoreWorkspace: %v", err)
			}
			if got := treeState(t, h.Workdir); got != state1 {
				t.Fatalf("rewound workspace differs:\n%s\nwant:\n%s", got, state1)
			}
			if path.name == "tree" && (res.Written <= 0 || res.Written > 12) {
				t.Errorf("rewind wrote %d entries, want only the few that differ", res.Written)
			}
		})
	}
}

// corruptObjects damages every object in the store, so whichever
// contents a restore needs are damaged.
func corruptObjects(t *testing.T, f *fixture, how func(path string)) {
	t.Helper()
	objs := f.objectFiles(t)
	if len(objs) == 0 {
		t.Fatal("no objects to corrupt")
	}
	for _, p := range objs {
		how(p)
	}
}

func TestCorruptOrMissingObjectIsNeverRestored(t *testing.T) {
	for _, path := range snapshotPaths {
		for _, damage := range []struct {
			name string
			how  func(string)
		}{
			{"flipped", func(p string) {
				data, _ := os.ReadFile(p)
				for i := 3; i < len(data); i += 7 { // a byte in every content
					data[i] ^= 0xff
				}
				_ = os.WriteFile(p, data, 0o600)
			}},
			{"replaced", func(p string) { _ = os.WriteFile(p, append([]byte{0}, "other content"...), 0o600) }},
			{"missing", func(p string) { _ = os.Remove(p) }},
		} {
			t.Run(path.name+"/"+damage.name, func(t *testing.T) {
				f := newFixtureOf(t, path.wrap)
				sid := "slack:T1:C1:corrupt-" + path.name + damage.name
				h := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
				writeTree(t, h.Workdir, 10)
				first := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 1)})
				must(t, os.WriteFile(filepath.Join(h.Workdir, "later.txt"), []byte("later"), 0o644))
				must(t, os.RemoveAll(filepath.Join(h.Workdir, "pkg0")))
				before := treeState(t, h.Workdir)
				corruptObjects(t, f, damage.how)

				_, err := run[sandbox.RestoreResult](f.env, f.acts.RestoreWorkspace, sandbox.RestoreRequest{Handle: h, Key: first.Key})
				ae := appErr(t, err, sandbox.ErrTypeRestoreFailed)
				if !strings.Contains(ae.Error(), "corrupt workspace object") {
					t.Errorf("restore error %q does not say an object is corrupt", ae.Error())
				}
				if got := treeState(t, h.Workdir); got != before {
					t.Errorf("a failed rewind changed the workspace:\n%s\nwant:\n%s", got, before)
				}
				_, err = run[sandbox.EnsureResult](f.env, f.acts.Ensure, sandbox.EnsureRequest{SessionID: sid + "-b", Backend: local.Name, Snapshot: first.Key})
				appErr(t, err, sandbox.ErrTypeRestoreFailed)
			})
		}
	}
}

// A session whose last snapshot is a full tar from before manifests goes on:
// it restores, and its first incremental snapshot starts from it.
func TestFullTarSnapshotsStillRestore(t *testing.T) {
	f := newFixture(t)
	sid := "slack:T1:C1:oldtar"
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
	writeTree(t, h.Workdir, 10)
	old := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 1)})
	want := treeState(t, h.Workdir)

	res := f.ensure(t, sandbox.EnsureRequest{SessionID: sid + "-b", Backend: local.Name, Snapshot: old.Key})
	if got := treeState(t, res.Handle.Workdir); !res.Restored || got != want {
		t.Fatalf("full tar restored = %+v:\n%s\nwant:\n%s", res, got, want)
	}
	next := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 2), Base: old.Key, PrevFingerprint: old.Fingerprint})
	if !next.Written {
		t.Fatalf("first incremental snapshot after a tar = %+v, want written", next)
	}
	must(t, os.WriteFile(filepath.Join(h.Workdir, "x"), []byte("x"), 0o644))
	if _, err := run[sandbox.RestoreResult](f.env, f.acts.RestoreWorkspace, sandbox.RestoreRequest{Handle: h, Key: old.Key, Current: next.Key}); err != nil {
		t.Fatalf("rewind to a full tar: %v", err)
	}
	if got := treeState(t, h.Workdir); got != want {
		t.Fatalf("rewound to a full tar:\n%s\nwant:\n%s", got, want)
	}
}

// A manifest is data from the store; one crafted to write outside the
// workspace (a path with "..", a hard link out, an entry under a symlink
// that points outside) is refused before anything is written.
func TestCraftedManifestCannotLeaveTheWorkspace(t *testing.T) {
	outside := t.TempDir()
	for _, tc := range []struct {
		name    string
		entries []sandbox.ManifestEntry
	}{
		{"dotdot", []sandbox.ManifestEntry{{Path: "../escape", Type: sandbox.EntryFile, Mode: 0o644, Size: 1}}},
		{"absolute", []sandbox.ManifestEntry{{Path: outside + "/escape", Type: sandbox.EntryFile, Mode: 0o644, Size: 1}}},
		{"hardlink-out", []sandbox.ManifestEntry{{Path: "a", Type: sandbox.EntryFile, Mode: 0o644, Size: 1}, {Path: "h", Type: sandbox.EntryHardlink, Link: "../../etc/passwd"}}},
		{"under-symlink", []sandbox.ManifestEntry{{Path: "l", Type: sandbox.EntrySymlink, Link: outside}, {Path: "l/escape", Type: sandbox.EntryFile, Mode: 0o644, Size: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			sid := "slack:T1:C1:crafted-" + tc.name
			h := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
			must(t, os.WriteFile(filepath.Join(h.Workdir, "x"), []byte("x"), 0o644))
			base := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 1)})
			// The object every crafted file names exists, so only the
			// paths can stop the restore.
			bm, err := sandbox.LoadManifest(context.Background(), f.store, base.Key)
			if err != nil || len(bm.Entries) != 1 {
				t.Fatalf("base manifest %v: %v", bm, err)
			}
			for i := range tc.entries {
				if tc.entries[i].Type == sandbox.EntryFile {
					tc.entries[i].Hash, tc.entries[i].Location = bm.Entries[0].Hash, bm.Entries[0].Location
				}
			}
			key := sandbox.SnapshotKey(sid, 2)
			if _, err := sandbox.StoreManifest(context.Background(), f.store, key, &sandbox.Manifest{Entries: tc.entries}); err != nil {
				t.Fatal(err)
			}
			_, err = run[sandbox.RestoreResult](f.env, f.acts.RestoreWorkspace, sandbox.RestoreRequest{Handle: h, Key: key, Current: base.Key})
			appErr(t, err, sandbox.ErrTypeRestoreFailed)
			if _, err := os.Lstat(filepath.Join(outside, "escape")); err == nil {
				t.Fatal("a crafted manifest wrote outside the workspace")
			}
			if got, _ := os.ReadFile(filepath.Join(h.Workdir, "x")); string(got) != "x" {
				t.Errorf("a refused manifest changed the workspace: x = %q", got)
			}
		})
	}
}

// The reader refuses what the writer would never write, and round-trips
// names with any bytes in them.
func TestManifestRoundTripAndGarbage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for i, body := range []string{"", "not a manifest", "\x00sandbot-manifest\nnot zstd"} {
		key := sandbox.SnapshotKey("garbage", i)
		if _, err := f.store.Put(ctx, key, strings.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := sandbox.LoadManifest(ctx, f.store, key); err == nil {
			t.Errorf("LoadManifest(%q) succeeded", body)
		}
	}
	m := &sandbox.Manifest{Entries: []sandbox.ManifestEntry{
		{Path: "d", Type: sandbox.EntryDir, Mode: 0o755, MTime: time.Now().UnixNano()},
		{Path: "d/line\nbreak \"q\" ü", Type: sandbox.EntryFile, Mode: 0o1644, Size: 1, Hash: strings.Repeat("ab", 32), Stat: "x.y"},
		{Path: "d/l", Type: sandbox.EntrySymlink, Mode: 0o777, Link: "../sp ace"},
	}}
	for i := range 1000 { // several parts
		m.Entries = append(m.Entries, sandbox.ManifestEntry{Path: fmt.Sprintf("d/f%04d", i), Type: sandbox.EntryFile, Mode: 0o644, Size: 1, Hash: strings.Repeat("cd", 32)})
	}
	key := sandbox.SnapshotKey("roundtrip", 1)
	full, err := sandbox.StoreManifest(ctx, f.store, key, m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sandbox.LoadManifest(ctx, f.store, key)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Entries) != fmt.Sprint(m.Entries) {
		t.Fatalf("round trip differs")
	}
	if got.Fingerprint() != m.Fingerprint() {
		t.Error("fingerprint changed in the round trip")
	}
	// One entry changed: one part is written again, not the whole list.
	got.Entries[500].MTime++
	again, err := sandbox.StoreManifest(ctx, f.store, sandbox.SnapshotKey("roundtrip", 2), got)
	if err != nil {
		t.Fatal(err)
	}
	if again*3 > full {
		t.Errorf("storing a manifest with one entry changed wrote %d bytes, the whole one %d: want only its part", again, full)
	}
}

// backdate makes every object in the file store older than the
// collector's grace.
func (f *fixture) backdate(t *testing.T) {
	t.Helper()
	old := time.Now().Add(-2 * sandbox.SweepGrace)
	for _, p := range f.objectFiles(t) {
		must(t, os.Chtimes(p, old, old))
	}
}

// The collector deletes only objects no manifest names, and only old
// ones: a fork's copied manifest keeps the contents alive after its
// source is destroyed, and the contents go once the fork goes too.
func TestCollectObjectsKeepsWhatAManifestNames(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sid := "slack:T1:C1:gc"
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
	writeTree(t, h.Workdir, 10)
	first := f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 1)})
	fork := sandbox.SnapshotKey(sid+"-fork", 0)
	if _, err := run[any](f.env, f.acts.CopySnapshot, sandbox.CopySnapshotRequest{From: first.Key, To: fork}); err != nil {
		t.Fatal(err)
	}
	objects := len(f.objectFiles(t))

	// Young objects stay even when nothing names them.
	if _, err := f.store.DeletePrefix(ctx, sandbox.SessionPrefix(sid)); err != nil {
		t.Fatal(err)
	}
	rep, err := sandbox.CollectObjects(ctx, f.store, time.Now())
	if err != nil || rep.Deleted != 0 || rep.Manifests != 1 {
		t.Fatalf("collect = %+v, %v; want the fork's manifest read and nothing deleted", rep, err)
	}
	// Old objects the fork names stay, and its workspace still restores.
	f.backdate(t)
	if rep, err = sandbox.CollectObjects(ctx, f.store, time.Now()); err != nil || rep.Deleted != 0 {
		t.Fatalf("collect = %+v, %v; want nothing deleted while the fork names them", rep, err)
	}
	res := f.ensure(t, sandbox.EnsureRequest{SessionID: sid + "-fork", Backend: local.Name, Snapshot: fork})
	if !res.Restored {
		t.Fatalf("the fork does not restore after a collection: %+v", res)
	}
	// Unnamed old objects go.
	if _, err := f.store.DeletePrefix(ctx, sandbox.SessionPrefix(sid+"-fork")); err != nil {
		t.Fatal(err)
	}
	if rep, err = sandbox.CollectObjects(ctx, f.store, time.Now()); err != nil || rep.Deleted != objects {
		t.Fatalf("collect = %+v, %v; want all %d objects deleted", rep, err, objects)
	}
	if left := f.objectFiles(t); len(left) != 0 {
		t.Fatalf("objects left: %v", left)
	}
}

// A damaged manifest stops the collection: what it names is unknown.
func TestCollectObjectsStopsAtADamagedManifest(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sid := "slack:T1:C1:gc-damaged"
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
	writeTree(t, h.Workdir, 10)
	f.save(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 1)})
	if _, err := f.store.Put(ctx, sandbox.SnapshotKey(sid, 2), strings.NewReader("\x00sandbot-manifest\ngarbage")); err != nil {
		t.Fatal(err)
	}
	f.backdate(t)
	before := len(f.objectFiles(t))
	if _, err := sandbox.CollectObjects(ctx, f.store, time.Now()); err == nil {
		t.Fatal("collection went ahead past a damaged manifest")
	}
	if after := len(f.objectFiles(t)); after != before {
		t.Fatalf("%d of %d objects deleted", before-after, before)
	}
}

// The quotas hold for incremental snapshots: a workspace over its quota,
// or a snapshot that would write more than its cap, is refused and the
// previous snapshot stays.
func TestIncrementalSnapshotLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits sandbox.Limits
		typ    string
	}{
		{"workspace", sandbox.Limits{WorkspaceBytes: 1 << 20, WorkspaceSetting: "SANDBOT_SANDBOX_WORKSPACE_QUOTA"}, sandbox.ErrTypeWorkspaceOverQuota},
		{"snapshot", sandbox.Limits{SnapshotBytes: 64 << 10, SnapshotSetting: "SANDBOT_SANDBOX_SNAPSHOT_MAX"}, sandbox.ErrTypeSnapshotTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.acts.Limits = tc.limits
			sid := "slack:T1:C1:limits-" + tc.name
			h := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
			writeTree(t, h.Workdir, 10)    // 3 MiB of it in big.bin
			noise := make([]byte, 256<<10) // and 256 KiB that do not compress
			_, _ = rand.Read(noise)
			must(t, os.WriteFile(filepath.Join(h.Workdir, "noise.bin"), noise, 0o644))
			_, err := run[sandbox.SnapshotResult](f.env, f.acts.SaveWorkspace, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, 1)})
			ae := appErr(t, err, tc.typ)
			if setting := tc.limits.WorkspaceSetting + tc.limits.SnapshotSetting; !strings.Contains(ae.Error(), setting) {
				t.Errorf("refusal %q does not name %s", ae.Error(), setting)
			}
			if _, err := f.store.Open(context.Background(), sandbox.SnapshotKey(sid, 1)); err == nil {
				t.Error("a refused snapshot left a manifest")
			}
		})
	}
}

// TestSnapshotsDoNotKeepEarlierManifests: a worker's memory does not grow
// with every snapshot it takes. Each snapshot's changed manifest parts were
// cached as windows on the manifest's entries, so every cached part kept
// its whole manifest: the soak's worker grew by a manifest a turn (about
// 0.35 MB here, 2,000 files), up to hundreds of them. The heap is read
// after a collection, from the 20th snapshot to the 80th: 60 manifests
// kept would be over 20 MB; the parts cache's copies of changed parts
// (bounded by entries) add about 1.5 MB.
func TestSnapshotsDoNotKeepEarlierManifests(t *testing.T) {
	for _, path := range snapshotPaths {
		t.Run(path.name, func(t *testing.T) {
			f := newFixtureOf(t, path.wrap)
			sid := "slack:T1:C1:mem-" + path.name
			h := f.ensure(t, sandbox.EnsureRequest{SessionID: sid, Backend: local.Name}).Handle
			for i := range 2000 {
				must(t, os.WriteFile(filepath.Join(h.Workdir, fmt.Sprintf("f%05d", i)), []byte(fmt.Sprint(i)), 0o644))
			}
			heap := func() uint64 {
				runtime.GC()
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				return ms.HeapAlloc
			}
			var prev sandbox.SnapshotResult
			var at20 uint64
			for turn := 1; turn <= 80; turn++ {
				must(t, os.WriteFile(filepath.Join(h.Workdir, fmt.Sprintf("n%05d", turn)), []byte(fmt.Sprint(turn)), 0o644))
				req := sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey(sid, turn)}
				if turn > 1 {
					req.Base, req.PrevFingerprint = prev.Key, prev.Fingerprint
				}
				prev = f.save(t, req)
				if turn == 20 {
					at20 = heap()
				}
			}
			grew := int64(heap()) - int64(at20)
			t.Logf("heap grew %.1f MB over 60 snapshots of 2,000 files", float64(grew)/(1<<20))
			if grew > 6<<20 {
				t.Errorf("heap grew %.1f MB over 60 snapshots: earlier manifests are kept", float64(grew)/(1<<20))
			}
		})
	}
}
