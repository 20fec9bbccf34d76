package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

func newBackend(t testing.TB, opts Options) *Backend {
	t.Helper()
	if opts.Root == "" {
		opts.Root = t.TempDir()
	}
	b, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend { return newBackend(t, Options{}) })
}

func TestNewRejectsBadOptions(t *testing.T) {
	for name, opts := range map[string]Options{
		"no root":          {},
		"env without =":    {Root: t.TempDir(), Env: []string{"FOO"}},
		"env bad key":      {Root: t.TempDir(), Env: []string{"1FOO=x"}},
		"env reserved":     {Root: t.TempDir(), Env: []string{"HOME=/root"}},
		"negative timeout": {Root: t.TempDir(), DefaultTimeout: -time.Second},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("%s: New accepted %+v", name, opts)
		}
	}
}

func TestEnvironmentIsScrubbed(t *testing.T) {
	secrets := map[string]string{
		"SANDBOT_MODEL_API_KEY": "sk-sandbot-test-secret-1",
		"OPENAI_API_KEY":        "sk-openai-test-secret-2",
		"SLACK_BOT_TOKEN":       "xoxb-test-secret-3",
		"DISCORD_TOKEN":         "discord-test-secret-4",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	b := newBackend(t, Options{Env: []string{"EXTRA_VAR=extra value", "LANG=en_US.UTF-8"}})
	h := sandboxtest.NewSandbox(t, b)
	out := sandboxtest.Sh(t, b, h, "env")
	for k, v := range secrets {
		if strings.Contains(out, v) || strings.Contains(out, k) {
			t.Errorf("worker secret %s reached the command's environment", k)
		}
	}
	vars := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	ws := filepath.Join(b.Root(), h.ID)
	want := map[string]string{
		"PATH": DefaultPath, "HOME": ws, "LANG": "en_US.UTF-8", "TERM": "dumb",
		"TMPDIR": filepath.Join(b.Root(), ".tmp", h.ID), "SANDBOT_SANDBOX": ws, "EXTRA_VAR": "extra value",
	}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("%s=%q, want %q", k, vars[k], v)
		}
	}
	shellOwn := []string{"PWD", "SHLVL", "OLDPWD", "_"}
	for k := range vars {
		if _, ok := want[k]; !ok && !slices.Contains(shellOwn, k) {
			t.Errorf("unexpected variable %s in the command's environment", k)
		}
	}
	if got := sandboxtest.Sh(t, b, h, `echo x > "$TMPDIR/t" && cat "$TMPDIR/t"`); got != "x\n" {
		t.Errorf("TMPDIR not writable: %q", got)
	}
}

// processGone reports whether pid no longer runs (a zombie counts as gone:
// it holds no resources and only waits for its reaper).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFinishedCommandTakesItsBackgroundJobsAlong(t *testing.T) {
	b := newBackend(t, Options{})
	h := sandboxtest.NewSandbox(t, b)
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "sleep 300 & echo $! > bg.pid; echo done"})
	if res.ExitCode != 0 || res.Stdout != "done\n" || res.TimedOut {
		t.Fatalf("got %+v", res)
	}
	waitGone(t, "background job of a finished command", readPID(t, filepath.Join(h.Workdir, "bg.pid")))
}

func TestEscapedProcessDoesNotHangExecAndDiesWithSandbox(t *testing.T) {
	b := newBackend(t, Options{OutputGrace: 100 * time.Millisecond})
	h := sandboxtest.NewSandbox(t, b)
	// setsid leaves the process group, so only the output grace period
	// ends the read, and only the marker sweep finds the process.
	// The loop waits until setsid has exec'd sleep, i.e. left the group,
	// before the command ends and its group is killed.
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: `setsid sleep 300 & pid=$!; echo $pid > esc.pid
while [ "$(cat /proc/$pid/comm)" != sleep ]; do :; done; echo started`})
	if res.ExitCode != 0 || res.Stdout != "started\n" {
		t.Fatalf("got %+v", res)
	}
	pid := readPID(t, filepath.Join(h.Workdir, "esc.pid"))
	if processGone(pid) {
		t.Fatalf("the escaped process is already gone; the test proves nothing")
	}
	if err := b.Destroy(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "escaped process after Destroy", pid)
}

// TestMain doubles as a stand-in worker for TestWorkerDeathKillsCommandTree:
// run with SANDBOT_LOCAL_HELPER_ROOT set, the test binary starts a command
// in a sandbox under that root and waits to be killed.
func TestMain(m *testing.M) {
	if root := os.Getenv("SANDBOT_LOCAL_HELPER_ROOT"); root != "" {
		os.Exit(helperWorker(root))
	}
	os.Exit(m.Run())
}

func helperWorker(root string) int {
	b, err := New(Options{Root: root})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	h, err := b.Create(context.Background(), sandbox.Spec{SessionID: "helper"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, err = b.Exec(context.Background(), h, sandbox.Cmd{
		Command: "sleep 300 & echo $! > bg.pid; echo $$ > sh.pid; sleep 300",
		Timeout: time.Hour,
	})
	fmt.Fprintln(os.Stderr, "the command ended before the worker was killed:", err)
	return 3
}

func TestWorkerDeathKillsCommandTree(t *testing.T) {
	root := t.TempDir()
	worker := exec.Command(os.Args[0])
	worker.Env = append(os.Environ(), "SANDBOT_LOCAL_HELPER_ROOT="+root)
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, dirName("helper"))
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err1 := os.Stat(filepath.Join(ws, "bg.pid"))
		_, err2 := os.Stat(filepath.Join(ws, "sh.pid"))
		if err1 == nil && err2 == nil {
			break
		}
		if time.Now().After(deadline) {
			worker.Process.Kill()
			t.Fatal("helper worker never started its command")
		}
		time.Sleep(20 * time.Millisecond)
	}
	bg, sh := readPID(t, filepath.Join(ws, "bg.pid")), readPID(t, filepath.Join(ws, "sh.pid"))
	if processGone(bg) || processGone(sh) {
		t.Fatal("command processes gone before the worker died; the test proves nothing")
	}
	if err := worker.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = worker.Wait()
	waitGone(t, "the command's shell after the worker died", sh)
	waitGone(t, "the command's background job after the worker died", bg)
}

func TestSignalExitCode(t *testing.T) {
	b := newBackend(t, Options{})
	h := sandboxtest.NewSandbox(t, b)
	if res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "kill -s TERM $$"}); res.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code %d, want %d", res.ExitCode, 128+int(syscall.SIGTERM))
	}
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "sleep 30", Timeout: 200 * time.Millisecond})
	if !res.TimedOut || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("timed-out command: %+v, want TimedOut and exit %d", res, 128+int(syscall.SIGKILL))
	}
}

func TestFailedImportLeavesWorkspaceAlone(t *testing.T) {
	b := newBackend(t, Options{})
	h := sandboxtest.NewSandbox(t, b)
	sandboxtest.Sh(t, b, h, "echo keep > keep.txt")
	bad := sandboxtest.BuildTar(t, sandboxtest.TarEntry{Name: "ok.txt", Body: "ok"}, sandboxtest.TarEntry{Name: "../evil", Body: "x"})
	err := b.Import(context.Background(), h, strings.NewReader(string(bad)))
	if !errors.Is(err, sandbox.ErrUnsafeArchive) {
		t.Fatalf("Import: %v, want an error wrapping ErrUnsafeArchive", err)
	}
	if got := sandboxtest.Sh(t, b, h, "ls -A"); got != "keep.txt\n" {
		t.Errorf("workspace after a refused import lists %q, want keep.txt only", got)
	}
	truncated := sandboxtest.BuildTar(t, sandboxtest.TarEntry{Name: "big.txt", Body: strings.Repeat("x", 10000)})
	if err := b.Import(context.Background(), h, strings.NewReader(string(truncated[:3000]))); err == nil {
		t.Error("Import accepted a truncated archive")
	}
	if got := sandboxtest.Sh(t, b, h, "ls -A"); got != "keep.txt\n" {
		t.Errorf("workspace after a truncated import lists %q, want keep.txt only", got)
	}
	leftovers, _ := filepath.Glob(filepath.Join(b.Root(), ".import-*"))
	if len(leftovers) != 0 {
		t.Errorf("staging directories left behind: %v", leftovers)
	}
}

func TestImportKeepsAbsoluteSymlinkTargetsWithoutFollowing(t *testing.T) {
	b := newBackend(t, Options{})
	h := sandboxtest.NewSandbox(t, b)
	outside := t.TempDir()
	archive := sandboxtest.BuildTar(t,
		sandboxtest.TarEntry{Name: "venv/bin/python", Type: '2', Linkname: "/usr/bin/python3"},
		sandboxtest.TarEntry{Name: "out", Type: '2', Linkname: outside},
	)
	if err := b.Import(context.Background(), h, strings.NewReader(string(archive))); err != nil {
		t.Fatalf("Import: %v", err)
	}
	if got, err := os.Readlink(filepath.Join(h.Workdir, "venv/bin/python")); err != nil || got != "/usr/bin/python3" {
		t.Errorf("symlink restored as %q, %v", got, err)
	}
	// Writing through the restored link is refused even in a later archive.
	through := sandboxtest.BuildTar(t,
		sandboxtest.TarEntry{Name: "out", Type: '2', Linkname: outside},
		sandboxtest.TarEntry{Name: "out/planted", Body: "x"},
	)
	if err := b.Import(context.Background(), h, strings.NewReader(string(through))); err == nil {
		t.Error("Import wrote through a symlink to outside the workspace")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file planted outside the workspace: %v", err)
	}
}

func TestHandlesAreValidated(t *testing.T) {
	b := newBackend(t, Options{})
	h := sandboxtest.NewSandbox(t, b)
	for name, bad := range map[string]sandbox.Handle{
		"traversal":     {Backend: Name, ID: "../" + h.ID},
		"other backend": {Backend: "docker", ID: h.ID},
		"absolute":      {Backend: Name, ID: "/etc"},
	} {
		if _, err := b.Exec(context.Background(), bad, sandbox.Cmd{Command: "true"}); err == nil {
			t.Errorf("%s: Exec accepted handle %+v", name, bad)
		}
		if err := b.Destroy(context.Background(), bad); err == nil {
			t.Errorf("%s: Destroy accepted handle %+v", name, bad)
		}
	}
}

func TestCreateIsIdempotentPerSession(t *testing.T) {
	b := newBackend(t, Options{})
	ctx := context.Background()
	h1, err := b.Create(ctx, sandbox.Spec{SessionID: "slack:T1:C1:1700000000.0001"})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Sh(t, b, h1, "echo old > f")
	h2, err := b.Create(ctx, sandbox.Spec{SessionID: "slack:T1:C1:1700000000.0001"})
	if err != nil {
		t.Fatal(err)
	}
	if h1.ID != h2.ID {
		t.Errorf("retried Create made a second directory: %s vs %s", h1.ID, h2.ID)
	}
	if got := sandboxtest.Sh(t, b, h2, "ls -A"); got != "" {
		t.Errorf("re-created workspace is not empty: %q", got)
	}
	if !strings.HasPrefix(h1.ID, "slack_T1_C1_1700000000_0001-") {
		t.Errorf("directory name %q does not show the session", h1.ID)
	}
	if err := b.Destroy(ctx, h2); err != nil {
		t.Fatal(err)
	}
}

func TestDestroyCopesWithReadOnlyTrees(t *testing.T) {
	b := newBackend(t, Options{})
	h := sandboxtest.NewSandbox(t, b)
	sandboxtest.Sh(t, b, h, "mkdir -p ro/sub && echo x > ro/sub/f && chmod -R a-w ro")
	if err := b.Destroy(context.Background(), h); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if _, err := os.Stat(h.Workdir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace still there: %v", err)
	}
}

func TestCreateReportsUnusableRoot(t *testing.T) {
	root := t.TempDir()
	b := newBackend(t, Options{Root: root})
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := b.Create(context.Background(), sandbox.Spec{SessionID: "s"})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Create on a broken root: %v, want an error wrapping ErrUnavailable", err)
	}
}

func TestHandleFromAnotherRootIsNotAlive(t *testing.T) {
	here := newBackend(t, Options{})
	there := newBackend(t, Options{})
	h, err := there.Create(context.Background(), sandbox.Spec{SessionID: "moved"})
	if err != nil {
		t.Fatal(err)
	}
	// A directory of the same name here, as an earlier stay of the
	// session on this host would leave.
	if err := os.Mkdir(filepath.Join(here.Root(), h.ID), 0o700); err != nil {
		t.Fatal(err)
	}
	if alive, err := here.Alive(context.Background(), h); err != nil || alive {
		t.Errorf("Alive(foreign handle) = %v, %v; want false", alive, err)
	}
	if _, err := here.Exec(context.Background(), h, sandbox.Cmd{Command: "true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Exec(foreign handle): %v, want ErrNotFound", err)
	}
	if alive, err := there.Alive(context.Background(), h); err != nil || !alive {
		t.Errorf("Alive on the owning backend = %v, %v", alive, err)
	}
	// The root's identity survives a restart of the backend.
	again := newBackend(t, Options{Root: there.Root()})
	if alive, err := again.Alive(context.Background(), h); err != nil || !alive {
		t.Errorf("Alive after a restart = %v, %v", alive, err)
	}
}

func TestFingerprintNeverTrustsFreshTimestamps(t *testing.T) {
	b := newBackend(t, Options{})
	h := sandboxtest.NewSandbox(t, b)
	sandboxtest.Sh(t, b, h, "echo x > f")
	// A timestamp at or after the walk could be followed by a change the
	// timestamps do not show, so such fingerprints must never match.
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(h.Workdir, "f"), future, future); err != nil {
		t.Fatal(err)
	}
	a, err1 := b.Fingerprint(context.Background(), h)
	c, err2 := b.Fingerprint(context.Background(), h)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if a == c {
		t.Error("two fingerprints of a workspace with fresh timestamps are equal; a snapshot could be skipped wrongly")
	}
}
