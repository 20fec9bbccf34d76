package local

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// Attacks on the confinement itself, against the real backend; each one
// succeeds against Options{Unconfined: true} on a root worker (see
// TestAttacksSucceedUnconfined), so they prove the boundary, not the host.

// attacks are commands that must print "blocked" when confined; each
// prints something else when it got through.
func attacks(t *testing.T, outside string) map[string]string {
	// A name of our own, removed afterwards: unconfined, the write lands.
	sysPlant := fmt.Sprintf("/etc/sandbot-attack-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(sysPlant) })
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("host-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"read a file outside":  `cat ` + secret + ` 2>/dev/null | grep -q host-secret && echo leaked || echo blocked`,
		"symlink out and read": `ln -s ` + secret + ` s && (cat s 2>/dev/null | grep -q host-secret && echo leaked || echo blocked)`,
		"write outside":        `echo x > ` + filepath.Join(outside, "planted") + ` 2>/dev/null; [ -e ` + filepath.Join(outside, "planted") + ` ] && echo wrote || echo blocked`,
		"write system dirs":    `touch ` + sysPlant + ` 2>/dev/null && echo wrote || echo blocked`,
		"read /etc/shadow":     `cat /etc/shadow >/dev/null 2>&1 && echo read || echo blocked`,
		"run as root":          `[ "$(id -u)" != 0 ] && echo blocked || echo root`,
		"mount":                `mkdir -p m && mount -t tmpfs none m 2>/dev/null && umount m && echo mounted || echo blocked`,
		"new namespaces":       `unshare -Urm true 2>/dev/null && echo unshared || echo blocked`,
		"see worker processes": `[ "$(ls -d /proc/[0-9]* | wc -l)" -lt 10 ] && echo blocked || echo visible`,
		"kill worker":          `kill -0 ` + strconv.Itoa(os.Getpid()) + ` 2>/dev/null && [ -e /proc/` + strconv.Itoa(os.Getpid()) + `/environ ] && echo reachable || echo blocked`,
		"network interfaces":   `[ "$(tail -n +3 /proc/net/dev | grep -vc ' lo:')" = 0 ] && echo blocked || echo shared`,
		"home directory":       `ls /root >/dev/null 2>&1 && echo visible || echo blocked`,
	}
}

func runAttacks(t *testing.T, b *Backend) map[string]string {
	h := sandboxtest.NewSandbox(t, b)
	got := map[string]string{}
	for name, cmd := range attacks(t, t.TempDir()) {
		res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: cmd})
		got[name] = strings.TrimSpace(res.Stdout)
	}
	return got
}

func TestConfinedAttacksAreBlocked(t *testing.T) {
	b := newBackend(t, Options{})
	for name, out := range runAttacks(t, b) {
		if out != "blocked" {
			t.Errorf("%s: got %q, want blocked", name, out)
		}
	}
}

// TestAttacksSucceedUnconfined shows that the attacks above test the
// confinement: without it, on a root worker, each gets through.
func TestAttacksSucceedUnconfined(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Log("the worker is not root: only the attacks a normal user can make are checked")
	}
	b := newBackend(t, Options{Unconfined: true})
	rootOnly := map[string]bool{"write system dirs": true, "read /etc/shadow": true, "run as root": true, "mount": true, "home directory": true}
	for name, out := range runAttacks(t, b) {
		if os.Geteuid() != 0 && rootOnly[name] {
			continue
		}
		if name == "network interfaces" || name == "new namespaces" {
			continue // depends on the host (interfaces, userns sysctl), not on the backend
		}
		if out == "blocked" {
			t.Errorf("%s: blocked even unconfined; the attack proves nothing", name)
		}
	}
}

func TestConfinedIdentityAndOwnership(t *testing.T) {
	b := newBackend(t, Options{})
	h := sandboxtest.NewSandbox(t, b)
	if got := sandboxtest.Sh(t, b, h, "id -u; id -g; id -un"); got != "1000\n1000\nsandbox\n" {
		t.Errorf("id: %q", got)
	}
	// A setuid-root binary planted from the host does nothing (nosuid,
	// no_new_privs, and host root is not root inside).
	idBin := "/usr/bin/id"
	data, err := os.ReadFile(idBin)
	if err != nil {
		t.Fatal(err)
	}
	suid := filepath.Join(h.Workdir, "suid-id")
	if err := os.WriteFile(suid, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o4755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if got := sandboxtest.Sh(t, b, h, "./suid-id -u"); got != "1000\n" {
		t.Errorf("setuid binary ran as uid %q", got)
	}
	sandboxtest.Sh(t, b, h, "echo made > made.txt && mkdir d")
	for _, name := range []string{"made.txt", "d"} {
		fi, err := os.Stat(filepath.Join(h.Workdir, name))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != os.Geteuid() || int(st.Gid) != os.Getegid() {
			t.Errorf("%s is owned by %d:%d on the host, want the worker's %d:%d", name, st.Uid, st.Gid, os.Geteuid(), os.Getegid())
		}
	}
}

func TestOtherWorkspacesAreInvisible(t *testing.T) {
	b := newBackend(t, Options{})
	a, other := sandboxtest.NewSandbox(t, b), sandboxtest.NewSandbox(t, b)
	sandboxtest.Sh(t, b, other, "echo other-secret > mine.txt")
	cmd := fmt.Sprintf(`cat %s/mine.txt 2>/dev/null; ls -A %s; ls -A %s 2>/dev/null; true`, other.Workdir, b.Root(), filepath.Join(b.Root(), ".tmp"))
	got := sandboxtest.Sh(t, b, a, cmd)
	if strings.Contains(got, "other-secret") || strings.Contains(got, other.ID) || strings.Contains(got, ".instance") {
		t.Errorf("a sandbox sees another's workspace or the root: %q", got)
	}
	if strings.TrimSpace(got) != a.ID {
		t.Errorf("the backend root lists %q inside a sandbox, want only its own workspace %s", got, a.ID)
	}
}

func TestForkLoopIsBounded(t *testing.T) {
	const limit = 40
	b := newBackend(t, Options{MaxProcesses: limit})
	if strings.Contains(b.Describe(), "processes not limited") {
		t.Fatalf("no process limit applies here: %s", b.Describe())
	}
	// Every way into the pids cgroup binds: the one New chose and the
	// shell it falls back to.
	joins := []cgroupJoin{b.conf.pidsJoin}
	if b.conf.pidsBase != "" && b.conf.pidsJoin != joinShell {
		joins = append(joins, joinShell)
	}
	for _, join := range joins {
		name := "rlimit"
		if b.conf.pidsBase != "" {
			name = "cgroup-" + join.String()
		}
		t.Run(name, func(t *testing.T) {
			b.conf.pidsJoin = join
			h := sandboxtest.NewSandbox(t, b)
			res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: `(n=0; while [ $n -lt 200 ]; do sleep 1000 & n=$((n+1)); done) 2>/dev/null; set -- /proc/[0-9]*; echo $#`})
			n, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
			if err != nil {
				t.Fatalf("got %+v", res)
			}
			t.Logf("%d processes under a limit of %d (%s)", n, limit, b.Describe())
			if n > limit { // counted with a glob: the count itself forks nothing
				t.Errorf("%d processes ran under a limit of %d", n, limit)
			}
			if n < limit/2 {
				t.Errorf("only %d processes ran; the loop did not reach the limit of %d", n, limit)
			}
		})
	}
}

// TestStartInPidsCgroup starts a process with each way into a pids cgroup
// and checks from the host that it was born inside, and that no worker
// thread stays there (a thread left in would count against the command's
// limit and put every later child of the worker in that cgroup).
func TestStartInPidsCgroup(t *testing.T) {
	ci := os.Getenv("CI") == "true"
	if os.Geteuid() != 0 {
		if ci {
			t.Fatal("only a root worker uses pids cgroups, and CI runs as root (CI=true: this must run)")
		}
		t.Skip("only a root worker uses pids cgroups; with CI=true this fails instead")
	}
	base, v2, err := pidsCgroupBase()
	if err != nil {
		if ci {
			t.Fatalf("no writable pids cgroup: %v (CI=true: this must run)", err)
		}
		t.Skipf("no writable pids cgroup: %v; with CI=true this fails instead", err)
	}
	mount, key := "/sys/fs/cgroup/pids", ":pids:"
	cheap := joinThread
	if v2 {
		mount, key, cheap = "/sys/fs/cgroup", "0::", joinClone
	}
	for _, join := range []cgroupJoin{cheap, joinShell} {
		t.Run(join.String(), func(t *testing.T) {
			c := &confinement{shell: "/bin/sh", pidsBase: base, pidsJoin: join, pidsPrefix: "sandbot-test-" + randomSuffix() + "-"}
			var wg sync.WaitGroup
			for range 4 { // concurrently, as Execs run
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						cg, err := c.pidsCgroup(10)
						if err != nil {
							t.Error(err)
							return
						}
						if got := startedCgroup(t, c, cg, mount, key); got != cg {
							t.Errorf("the process started in %s, want %s", got, cg)
						}
						if err := removeCgroup(cg); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			threadsIn(t, base, mount, key)
		})
	}
	// A hybrid host (pids on v1, as here) still has a cgroup v2 hierarchy:
	// CLONE_INTO_CGROUP is checked there.
	if unified := "/sys/fs/cgroup/unified"; !v2 {
		own, err := os.ReadFile("/proc/self/cgroup")
		rel := ""
		for line := range strings.SplitSeq(string(own), "\n") {
			if after, ok := strings.CutPrefix(line, "0::"); ok {
				rel = after
			}
		}
		cg := filepath.Join(unified, rel, "sandbot-test-"+randomSuffix())
		if err != nil || rel == "" || os.Mkdir(cg, 0o755) != nil {
			t.Log("no writable cgroup v2 hierarchy: CLONE_INTO_CGROUP not checked")
			return
		}
		defer removeCgroup(cg)
		t.Run("clone-unified", func(t *testing.T) {
			c := &confinement{pidsJoin: joinClone}
			if got := startedCgroup(t, c, cg, unified, "0::"); got != cg {
				t.Errorf("the process started in %s, want %s", got, cg)
			}
		})
	}
}

// startedCgroup starts cat /proc/self/cgroup in cg with c's join and
// returns the cgroup it reports (key: the hierarchy's line prefix), as a
// directory under mount.
func startedCgroup(t *testing.T, c *confinement, cg, mount, key string) string {
	cmd := exec.Command("/bin/cat", "/proc/self/cgroup")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.startIn(cmd, cg); err != nil {
		t.Errorf("start in %s: %v", cg, err)
		return ""
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("%v: %s", err, out.String())
		return ""
	}
	return cgroupLine(out.String(), mount, key)
}

func cgroupLine(procCgroup, mount, key string) string {
	for line := range strings.SplitSeq(procCgroup, "\n") {
		if i := strings.Index(line, key); i >= 0 && (key != "0::" || i == 0) {
			return filepath.Join(mount, line[i+len(key):])
		}
	}
	return ""
}

// threadsIn checks that every thread of the worker is in cgroup dir.
func threadsIn(t *testing.T, dir, mount, key string) {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/cgroup")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no threads found: %v", err)
	}
	for _, f := range tasks {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		if got := cgroupLine(string(data), mount, key); got != dir {
			t.Errorf("worker thread %s is in cgroup %s, want %s", f, got, dir)
		}
	}
}

// TestMaxFileBytes checks RLIMIT_FSIZE, confined and not: a write past the
// limit fails with EFBIG (the writer is not killed by SIGXFSZ) and the
// file stops at the limit, rounded down to 512-byte blocks.
func TestMaxFileBytes(t *testing.T) {
	const max, applied = 64<<10 + 100, 64 << 10
	if _, err := New(Options{Root: t.TempDir(), MaxFileBytes: -1}); err == nil {
		t.Error("New accepted a negative MaxFileBytes")
	}
	for _, unconfined := range []bool{false, true} {
		name := "confined"
		if unconfined {
			name = "unconfined"
		}
		t.Run(name, func(t *testing.T) {
			b := newBackend(t, Options{MaxFileBytes: max, Unconfined: unconfined})
			if !unconfined && !strings.Contains(b.Describe(), "64 KiB per file") {
				t.Errorf("Describe = %q, want the file size limit", b.Describe())
			}
			h := sandboxtest.NewSandbox(t, b)
			res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "head -c 1000000 /dev/zero > big"})
			if res.ExitCode != 1 || !strings.Contains(res.Stderr, "File too large") {
				t.Errorf("writing past the limit: exit %d, stderr %q; want head failing with EFBIG", res.ExitCode, res.Stderr)
			}
			fi, err := os.Stat(filepath.Join(h.Workdir, "big"))
			if err != nil || fi.Size() != applied {
				t.Errorf("the file holds %v bytes (%v), want %d", fi.Size(), err, applied)
			}
			out := sandboxtest.Sh(t, b, h, `head -c 65536 /dev/zero > ok && head -c 70000 /dev/zero > "$TMPDIR/big" 2>/dev/null; echo $?; wc -c < "$TMPDIR/big"`)
			if out != "1\n65536\n" {
				t.Errorf("at the limit in the workspace, then past it in $TMPDIR: got %q, want success, then a failure at 65536 bytes", out)
			}
		})
	}
}

// TestConfinedCommandDoesNotOutliveADeadWorker covers the moment bwrap's
// --die-with-parent does not: a worker that dies while bwrap still builds
// the sandbox. The command's shell finds the worker's end of its worker
// pipe closed and stops before running anything.
func TestConfinedCommandDoesNotOutliveADeadWorker(t *testing.T) {
	b := newBackend(t, Options{})
	h := sandboxtest.NewSandbox(t, b)
	for _, workerAlive := range []bool{true, false} {
		os.Remove(filepath.Join(h.Workdir, "ran"))
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if !workerAlive {
			r.Close()
		}
		cmd := exec.Command(b.conf.bwrap, b.conf.command(h.Workdir, "touch ran")...)
		cmd.Env = b.commandEnv(h.Workdir, "/tmp")
		cmd.ExtraFiles = []*os.File{w}
		out, err := cmd.CombinedOutput()
		w.Close()
		r.Close()
		_, ranErr := os.Stat(filepath.Join(h.Workdir, "ran"))
		if workerAlive {
			if err != nil || ranErr != nil {
				t.Fatalf("with its worker alive, the command did not run: %v, %s", err, out)
			}
			continue
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGPIPE) && exit.ExitCode() != 125 {
			t.Errorf("without its worker: %v (%s), want the shell killed by SIGPIPE or exit 125", err, out)
		}
		if ranErr == nil {
			t.Error("the command ran after its worker died")
		}
	}
}

func TestRefusesWithoutBubblewrap(t *testing.T) {
	_, err := New(Options{Root: t.TempDir(), Bwrap: filepath.Join(t.TempDir(), "no-such-bwrap")})
	if !errors.Is(err, ErrCannotConfine) || !strings.Contains(err.Error(), "bubblewrap") {
		t.Fatalf("New: %v, want ErrCannotConfine naming bubblewrap", err)
	}
}

// TestRefusesWhenNamespacesAreForbidden simulates a kernel or container
// that forbids user namespaces with a stand-in bwrap failing as bwrap does
// there.
func TestRefusesWhenNamespacesAreForbidden(t *testing.T) {
	stub := filepath.Join(t.TempDir(), "bwrap")
	script := "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
	if err := os.WriteFile(stub, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := New(Options{Root: t.TempDir(), Bwrap: stub})
	if !errors.Is(err, ErrCannotConfine) || !strings.Contains(err.Error(), "No permissions to create new namespace") {
		t.Fatalf("New: %v, want ErrCannotConfine with bwrap's reason", err)
	}
}

func TestUnconfinedIsAnExplicitChoiceAndSaysSo(t *testing.T) {
	var logs bytes.Buffer
	b := newBackend(t, Options{Unconfined: true, Bwrap: "/nonexistent/bwrap", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if b.Confined() || !strings.HasPrefix(b.Describe(), "UNCONFINED") {
		t.Errorf("Describe = %q", b.Describe())
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "confinement is off") {
		t.Errorf("no warning logged: %q", logs.String())
	}
	h := sandboxtest.NewSandbox(t, b)
	if got := sandboxtest.Sh(t, b, h, "id -u"); got != strconv.Itoa(os.Geteuid())+"\n" {
		t.Errorf("unconfined command runs as %q", got)
	}
}

func TestDescribeAndNetworkOptIn(t *testing.T) {
	b := newBackend(t, Options{})
	if d := b.Describe(); !b.Confined() || !strings.Contains(d, "namespaces user,mnt,pid,ipc,uts,cgroup,net") || !strings.Contains(d, "no network") {
		t.Errorf("Describe = %q", d)
	}
	var logs bytes.Buffer
	n := newBackend(t, Options{Network: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if d := n.Describe(); !strings.Contains(d, "host network shared") || strings.Contains(d, ",net") {
		t.Errorf("Describe with the network = %q", d)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "share the host's network") {
		t.Errorf("no warning logged: %q", logs.String())
	}
}
