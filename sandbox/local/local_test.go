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
		"TMPDIR": "/tmp", "SANDBOT_SANDBOX": ws, "EXTRA_VAR": "extra value",
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

// Unconfined, a command's processes are tracked by host PID: the process
// group and the marker sweep are what end them.

func TestUnconfinedFinishedCommandTakesItsBackgroundJobsAlong(t *testing.T) {
	b := newBackend(t, Options{Unconfined: true})
	h := sandboxtest.NewSandbox(t, b)
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "sleep 300 & echo $! > bg.pid; echo done"})
	if res.ExitCode != 0 || res.Stdout != "done\n" || res.TimedOut {
		t.Fatalf("got %+v", res)
	}
	waitGone(t, "background job of a finished command", readPID(t, filepath.Join(h.Workdir, "bg.pid")))
}

func TestUnconfinedEscapedProcessDoesNotHangExecAndDiesWithSandbox(t *testing.T) {
	b := newBackend(t, Options{OutputGrace: 100 * time.Millisecond, Unconfined: true})
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

// Confined, PIDs inside are the namespace's own, so the tests find the
// command's processes from the host by a unique argument.

// hostProcs returns the host PIDs of live processes with arg among their
// arguments (zombies excluded).
func hostProcs(t testing.TB, arg string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !slices.Contains(strings.Split(string(cmdline), "\x00"), arg) || processGone(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// uniqueSleep is a sleep duration no other test uses, to find the process.
func uniqueSleep(t testing.TB) string {
	return strconv.Itoa(3_000_000 + int(time.Now().UnixNano()%1_000_000))
}

// startedSleeps is shell that waits until n background sleeps (PIDs in
// $p1..$pn) have exec'd, so the command does not end before they exist.
const waitSleeps = `for p in $pids; do while [ "$(cat /proc/$p/comm 2>/dev/null)" != sleep ]; do :; done; done`

func TestFinishedCommandTakesEverythingAlong(t *testing.T) {
	b := newBackend(t, Options{OutputGrace: time.Minute})
	h := sandboxtest.NewSandbox(t, b)
	bg, esc := uniqueSleep(t), uniqueSleep(t)+"1"
	// A background job, and one that left the session and process group
	// (setsid), which escaped the unconfined backend until Destroy.
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "sleep " + bg + " & pids=$!; setsid sleep " + esc + " & pids=\"$pids $!\"; " + waitSleeps + "; echo started"})
	if res.ExitCode != 0 || res.Stdout != "started\n" || res.TimedOut {
		t.Fatalf("got %+v", res)
	}
	// No waiting: the PID namespace is gone once Exec returns.
	for _, arg := range []string{bg, esc} {
		if pids := hostProcs(t, arg); len(pids) != 0 {
			t.Errorf("sleep %s outlived its command: host pids %v", arg, pids)
		}
	}
}

func TestTimeoutTakesEverythingAlong(t *testing.T) {
	b := newBackend(t, Options{})
	h := sandboxtest.NewSandbox(t, b)
	esc := uniqueSleep(t)
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "setsid sleep " + esc + " & pids=$!; " + waitSleeps + "; echo started; sleep 600", Timeout: 2 * time.Second})
	if !res.TimedOut || res.Stdout != "started\n" {
		t.Fatalf("got %+v", res)
	}
	if pids := hostProcs(t, esc); len(pids) != 0 {
		t.Errorf("setsid sleep outlived its timed-out command: host pids %v", pids)
	}
}

// TestMain doubles as a stand-in worker for TestWorkerDeathKillsCommandTree:
// run with SANDBOT_LOCAL_HELPER_ROOT set, the test binary starts a command
// in a sandbox under that root and waits to be killed.
func TestMain(m *testing.M) {
	if root := os.Getenv("SANDBOT_LOCAL_HELPER_ROOT"); root != "" {
		sleep, err := os.ReadFile(filepath.Join(root, "sleep.arg"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(helperWorker(root, string(sleep)))
	}
	os.Exit(m.Run())
}

func helperWorker(root, sleep string) int {
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
		Command: "sleep " + sleep + " & pids=$!; setsid sleep " + sleep + " & pids=\"$pids $!\"; sleep " + sleep + " & pids=\"$pids $!\"; " + waitSleeps + "; touch started; wait",
		Timeout: time.Hour,
	})
	fmt.Fprintln(os.Stderr, "the command ended before the worker was killed:", err)
	return 3
}

func TestWorkerDeathKillsCommandTree(t *testing.T) {
	root := t.TempDir()
	sleep := uniqueSleep(t)
	worker := exec.Command(os.Args[0])
	if err := os.WriteFile(filepath.Join(root, "sleep.arg"), []byte(sleep), 0o600); err != nil {
		t.Fatal(err)
	}
	worker.Env = append(os.Environ(), "SANDBOT_LOCAL_HELPER_ROOT="+root)
	worker.Stderr = os.Stderr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Process.Kill() })
	ws := filepath.Join(root, dirName("helper"))
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			worker.Process.Kill()
			t.Fatal("helper worker never started its command")
		}
		time.Sleep(20 * time.Millisecond)
	}
	pids := hostProcs(t, sleep)
	if len(pids) != 3 {
		t.Fatalf("want the command's 3 sleeps running before the worker dies, found %v", pids)
	}
	if err := worker.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = worker.Wait()
	for _, pid := range pids {
		waitGone(t, "a process of the command after the worker died", pid)
	}
	// Once its last process is gone, the next backend on the root sweeps
	// the dead worker's pids cgroup.
	again := newBackend(t, Options{Root: root})
	if again.conf.pidsBase == "" {
		return
	}
	left, _ := filepath.Glob(filepath.Join(again.conf.pidsBase, again.conf.pidsPrefix+"*"))
	for _, cg := range left {
		deadline := time.Now().Add(30 * time.Second)
		for procs, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs")); len(procs) > 0; procs, _ = os.ReadFile(filepath.Join(cg, "cgroup.procs")) {
			if time.Now().After(deadline) {
				t.Fatalf("processes of the dead worker's command still run: %s", procs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	again = newBackend(t, Options{Root: root})
	if left, _ := filepath.Glob(filepath.Join(again.conf.pidsBase, again.conf.pidsPrefix+"*")); len(left) != 0 {
		t.Errorf("pids cgroups of the dead worker left behind: %v", left)
	}
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
