package local

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/blobstore"
)

// Snapshot and restore benchmarks, each beside GNU tar doing the same work
// on the same tree in the same run, so the ratio is meaningful:
//
//	go test -run '^$' -bench Snapshot ./sandbox/local
//	SANDBOT_BENCH_FILES=20000 SANDBOT_BENCH_MB=200 go test -run '^$' -bench . -benchtime 5x ./sandbox/local
//
// The workspace has SANDBOT_BENCH_FILES files (default 2000) holding
// SANDBOT_BENCH_MB MiB in total (default 20), 100 files per directory.

func benchSize(b *testing.B) (files int, bytes int64) {
	files, mb := 2000, 20
	if v := os.Getenv("SANDBOT_BENCH_FILES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("SANDBOT_BENCH_FILES=%q: want a positive integer", v)
		}
		files = n
	}
	if v := os.Getenv("SANDBOT_BENCH_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("SANDBOT_BENCH_MB=%q: want a positive integer", v)
		}
		mb = n
	}
	return files, int64(mb) << 20
}

// fillWorkspace writes files of varied sizes (averaging total/files).
func fillWorkspace(b *testing.B, dir string, files int, total int64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	avg := total / int64(files)
	data := make([]byte, 2*avg+1)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	written := int64(0)
	for i := range files {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		size := rng.Int64N(2*avg + 1)
		if i == files-1 {
			size = max(total-written, 0)
			if size > int64(len(data)) {
				data = make([]byte, size)
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%05d.dat", i)), data[:size], 0o644); err != nil {
			b.Fatal(err)
		}
		written += size
	}
}

type benchEnv struct {
	be    *Backend
	h     sandbox.Handle
	store *blobstore.Store
	dir   string // store directory
	total int64
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	files, total := benchSize(b)
	be, err := New(Options{Root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	h, err := be.Create(context.Background(), sandbox.Spec{SessionID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	fillWorkspace(b, h.Workdir, files, total)
	dir := b.TempDir()
	store, err := blobstore.Open(context.Background(), "file://"+dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	b.Logf("workspace: %d files, %d MiB", files, total>>20)
	return &benchEnv{be: be, h: h, store: store, dir: dir, total: total}
}

// snapshot is what the Snapshot activity does: Export piped into Put.
func (e *benchEnv) snapshot(ctx context.Context, key string) (int64, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := e.be.Export(ctx, e.h, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	n, err := e.store.Put(ctx, key, pr)
	if err != nil {
		pr.CloseWithError(err)
	}
	if xerr := <-done; xerr != nil {
		return n, xerr
	}
	return n, err
}

func runTar(b *testing.B, args ...string) {
	b.Helper()
	if out, err := exec.Command("tar", args...).CombinedOutput(); err != nil {
		b.Fatalf("tar %v: %v\n%s", args, err, out)
	}
}

func BenchmarkSnapshot(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		b.Fatal("GNU tar is needed for the comparison benchmark")
	}
	e := newBenchEnv(b)
	ctx := context.Background()
	key := sandbox.SnapshotKey("bench", 1)

	b.Run("export-discard", func(b *testing.B) {
		b.SetBytes(e.total)
		for b.Loop() {
			if err := e.be.Export(ctx, e.h, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sandbot", func(b *testing.B) {
		b.SetBytes(e.total)
		for b.Loop() {
			if _, err := e.snapshot(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gnutar", func(b *testing.B) {
		b.SetBytes(e.total)
		out := filepath.Join(e.dir, "gnutar.tar")
		for b.Loop() {
			runTar(b, "-cf", out, "-C", e.h.Workdir, ".")
		}
	})
}

// extractLoop is GNU tar doing what Import does: extract into a fresh
// directory, then drop the previous one.
func extractLoop(b *testing.B, archive string, total int64) {
	b.SetBytes(total)
	root := b.TempDir()
	prev := ""
	for i := 0; b.Loop(); i++ {
		dest := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(dest, 0o700); err != nil {
			b.Fatal(err)
		}
		runTar(b, "-xf", archive, "-C", dest)
		if prev != "" {
			if err := os.RemoveAll(prev); err != nil {
				b.Fatal(err)
			}
		}
		prev = dest
	}
}

func BenchmarkRestore(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		b.Fatal("GNU tar is needed for the comparison benchmark")
	}
	e := newBenchEnv(b)
	ctx := context.Background()
	key := sandbox.SnapshotKey("bench", 1)
	if _, err := e.snapshot(ctx, key); err != nil {
		b.Fatal(err)
	}
	archive := filepath.Join(e.dir, "gnutar.tar")
	runTar(b, "-cf", archive, "-C", e.h.Workdir, ".")
	target, err := e.be.Create(ctx, sandbox.Spec{SessionID: "bench-restore"})
	if err != nil {
		b.Fatal(err)
	}

	b.Run("sandbot", func(b *testing.B) {
		b.SetBytes(e.total)
		for b.Loop() {
			r, err := e.store.Open(ctx, key)
			if err != nil {
				b.Fatal(err)
			}
			if err := e.be.Import(ctx, target, r); err != nil {
				b.Fatal(err)
			}
			r.Close()
		}
	})
	// The same work as Import: extract into a fresh directory, then drop
	// the previous one.
	b.Run("gnutar", func(b *testing.B) {
		extractLoop(b, archive, e.total)
	})
}

// BenchmarkExecOverhead is the per-command cost of confinement: `sh -c
// true` run directly, the unconfined backend and the confined one, in the
// same run (docs/PERFORMANCE.md, "Local confinement overhead"):
//
//	go test -run '^$' -bench ExecOverhead -benchtime 200x -count 3 ./sandbox/local
//
// confined is what the worker runs: on a root worker with a pids cgroup,
// each command starts in its own (cgroup-<join> names the way in); the
// other variants take one piece away or put an old one back, to show what
// each costs: confined-shell-join joins the cgroup through a shell (the
// fallback, and how every command joined before), confined-no-cgroup has
// RLIMIT_NPROC only (as a non-root worker runs), confined-host-net keeps
// the host's network instead of a network namespace of its own.
func BenchmarkExecOverhead(b *testing.B) {
	ctx := context.Background()
	b.Run("sh-direct", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, mode := range []struct {
		name  string
		opts  Options
		setup func(*confinement) bool // false: the variant does not apply here
	}{
		{"unconfined", Options{Unconfined: true}, nil},
		{"confined", Options{}, nil},
		{"confined-shell-join", Options{}, func(c *confinement) bool {
			c.pidsJoin = joinShell
			return c.pidsBase != ""
		}},
		{"confined-no-cgroup", Options{}, func(c *confinement) bool {
			had := c.pidsBase != ""
			c.pidsBase = ""
			return had
		}},
		{"confined-host-net", Options{Network: true}, nil},
	} {
		b.Run(mode.name, func(b *testing.B) {
			mode.opts.Root = b.TempDir()
			mode.opts.Logger = slog.New(slog.DiscardHandler)
			be, err := New(mode.opts)
			if err != nil {
				b.Fatal(err)
			}
			if mode.setup != nil && !mode.setup(be.conf) {
				b.Skip("no pids cgroup here (not a root worker): the same as confined")
			}
			desc := be.Describe()
			if be.conf != nil && be.conf.pidsBase != "" {
				desc += "; cgroup join: " + be.conf.pidsJoin.String()
			}
			b.Logf("%s", desc)
			h, err := be.Create(ctx, sandbox.Spec{SessionID: "bench-" + mode.name})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				res, err := be.Exec(ctx, h, sandbox.Cmd{Command: "true"})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("%+v, %v", res, err)
				}
			}
		})
	}
}

// BenchmarkIncremental measures incremental snapshots (manifests and
// content objects) on the same generated workspace, beside GNU tar in the
// same run (docs/PERFORMANCE.md, "Incremental snapshots"):
//
//	SANDBOT_BENCH_FILES=20000 SANDBOT_BENCH_MB=200 go test -run '^$' -bench Incremental -benchtime 5x ./sandbox/local
//
// first is a full first snapshot into an empty store; change-one is the
// snapshot after one 10 KB file changed (written-B/op is what reached the
// store); fork copies a manifest (what /fork does to the workspace);
// rewind-10 brings the workspace back 10 turns, each of which changed one
// 10 KB file, and forward again; restore fills a new sandbox from the
// manifest. The gnutar rows are what the same work costs as a full tar:
// create the archive, extract it.
func BenchmarkIncremental(b *testing.B) {
	if _, err := exec.LookPath("tar"); err != nil {
		b.Fatal("GNU tar is needed for the comparison benchmark")
	}
	e := newBenchEnv(b)
	backends, err := sandbox.NewBackends(e.be)
	if err != nil {
		b.Fatal(err)
	}
	acts := &sandbox.Activities{Backends: backends, Store: e.store, Logger: slog.New(slog.DiscardHandler)}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	save := func(b *testing.B, key, base, prev string) sandbox.SnapshotResult {
		val, err := env.ExecuteActivity(acts.SaveWorkspace, sandbox.SnapshotRequest{Handle: e.h, Key: key, Base: base, PrevFingerprint: prev})
		if err != nil {
			b.Fatal(err)
		}
		var res sandbox.SnapshotResult
		if err := val.Get(&res); err != nil {
			b.Fatal(err)
		}
		return res
	}
	ctx := context.Background()
	sid := e.h.SessionID
	change := func(i int) {
		data := make([]byte, 10<<10)
		copy(data, fmt.Sprintf("change %d\n", i))
		if err := os.WriteFile(filepath.Join(e.h.Workdir, "pkg000", "changed.txt"), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}

	var last sandbox.SnapshotResult
	b.Run("first", func(b *testing.B) {
		b.SetBytes(e.total)
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			if _, err := e.store.DeletePrefix(ctx, sandbox.ObjectsPrefix); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			last = save(b, sandbox.SnapshotKey(sid, 1), "", "")
		}
		b.ReportMetric(float64(last.Bytes), "written-B/op")
	})
	b.Run("first-gnutar", func(b *testing.B) {
		b.SetBytes(e.total)
		out := filepath.Join(e.dir, "gnutar.tar")
		for b.Loop() {
			runTar(b, "-cf", out, "-C", e.h.Workdir, ".")
		}
	})
	b.Run("change-one", func(b *testing.B) {
		// The first snapshots left a gigabyte of dirty pages; their
		// write-back is not this benchmark's cost.
		syscall.Sync()
		var written int64
		var took []time.Duration
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			change(1000 + i)
			b.StartTimer()
			start := time.Now()
			res := save(b, sandbox.SnapshotKey(sid, 2+i), last.Key, last.Fingerprint)
			took = append(took, time.Since(start))
			if !res.Written || res.Objects != 1 {
				b.Fatalf("snapshot after one change = %+v, want one object", res)
			}
			written += res.Bytes
			last = res
		}
		slices.Sort(took)
		b.ReportMetric(float64(written)/float64(len(took)), "written-B/op")
		// The mean above is pulled up by the odd snapshot that meets the
		// host's write-back or a collection; the median is the typical one.
		b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-ms")
	})
	b.Run("fork", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := env.ExecuteActivity(acts.CopySnapshot, sandbox.CopySnapshotRequest{From: last.Key, To: sandbox.SnapshotKey(fmt.Sprintf("fork-%d", i), 0)}); err != nil {
				b.Fatal(err)
			}
		}
	})

	// Ten turns, each changing one 10 KB file.
	var turns []sandbox.SnapshotResult
	for i := range 11 {
		change(i)
		if i > 0 {
			if err := os.WriteFile(filepath.Join(e.h.Workdir, fmt.Sprintf("pkg%03d", i), "new.txt"), make([]byte, 10<<10), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		last = save(b, sandbox.SnapshotKey(sid, 100+i), last.Key, "")
		turns = append(turns, last)
	}
	b.Run("rewind-10", func(b *testing.B) {
		from, to := turns[10], turns[0]
		for b.Loop() {
			val, err := env.ExecuteActivity(acts.RestoreWorkspace, sandbox.RestoreRequest{Handle: e.h, Key: to.Key, Current: from.Key})
			if err != nil {
				b.Fatal(err)
			}
			var res sandbox.RestoreResult
			if err := val.Get(&res); err != nil || res.Written < 10 || res.Written > 40 {
				b.Fatalf("rewind = %+v (%v), want about 11 entries written", res, err)
			}
			from, to = to, from
		}
	})
	target, err := e.be.Create(ctx, sandbox.Spec{SessionID: "bench-restore"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("restore", func(b *testing.B) {
		b.SetBytes(e.total)
		for b.Loop() {
			if _, err := env.ExecuteActivity(acts.Ensure, sandbox.EnsureRequest{SessionID: target.SessionID, Backend: Name, Snapshot: turns[10].Key}); err != nil {
				b.Fatal(err)
			}
		}
	})
	archive := filepath.Join(e.dir, "gnutar.tar")
	runTar(b, "-cf", archive, "-C", e.h.Workdir, ".")
	b.Run("restore-gnutar", func(b *testing.B) {
		extractLoop(b, archive, e.total)
	})
}
