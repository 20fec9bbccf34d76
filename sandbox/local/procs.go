package local

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killGroup sends SIGKILL to a process group. A group that is already gone
// is fine.
func killGroup(pgid int) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// killStrays kills processes whose environment carries the workspace's
// marker. Commands normally die with their process group; this catches
// those that left it (setsid, daemonizing tools) before their workspace is
// wiped or removed. It reads /proc, so it sees only what the worker's user
// may inspect; on systems without /proc it does nothing.
func killStrays(ws string, log *slog.Logger) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	needle := []byte(markerVar + "=" + ws + "\x00")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !hasEnvEntry(env, needle) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			log.Warn("local: cannot kill stray sandbox process", "pid", pid, "sandbox", ws, "error", err)
			continue
		}
		log.Info("local: killed stray sandbox process", "pid", pid, "sandbox", ws)
	}
}

// hasEnvEntry reports whether a NUL-separated environment block holds the
// entry needle (which ends in NUL) as a whole entry.
func hasEnvEntry(env, needle []byte) bool {
	if len(env) > 0 && env[len(env)-1] != 0 {
		env = append(env, 0)
	}
	for len(env) > 0 {
		i := bytes.IndexByte(env, 0)
		if bytes.Equal(env[:i+1], needle) {
			return true
		}
		env = env[i+1:]
	}
	return false
}

// A root worker bounds each command's processes with a pids cgroup of its
// own (RLIMIT_NPROC does not bind root). The command's first process must
// be born inside it, so nothing the command forks escapes the count. The
// obvious way in, a shell that writes its PID to cgroup.procs and execs
// bwrap (joinShell), is slow: one more exec, and moving a process by PID
// write-locks the kernel's cgroup_threadgroup_rwsem, which waits for an
// RCU grace period (together about 2 ms on an idle 2 vCPU host, 5 to 15 ms
// on a loaded one). The other joins take neither.
type cgroupJoin int

const (
	// joinThread (cgroup v1): a locked worker thread moves itself into the
	// cgroup by writing "0" to its tasks file (a thread moving itself takes
	// no global lock), forks the command, and moves back.
	joinThread cgroupJoin = iota
	// joinClone (cgroup v2, where threads cannot be moved alone): clone3
	// with CLONE_INTO_CGROUP starts the command inside.
	joinClone
	// joinShell is the fallback: a shell moves itself by PID, then execs
	// the command.
	joinShell
)

func (j cgroupJoin) String() string {
	switch j {
	case joinThread:
		return "thread"
	case joinClone:
		return "clone"
	default:
		return "shell"
	}
}

// pidsCgroupBase finds the worker's own pids cgroup (v1 pids hierarchy or
// v2 with the pids controller delegated) and checks that a child with a
// pids.max can be made under it; v2 reports a cgroup v2 hierarchy.
func pidsCgroupBase() (base string, v2 bool, err error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false, err
	}
	type candidate struct {
		dir string
		v2  bool
	}
	var candidates []candidate
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[1] == "pids":
			candidates = append(candidates, candidate{filepath.Join("/sys/fs/cgroup/pids", parts[2]), false})
		case parts[0] == "0" && parts[1] == "":
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				candidates = append(candidates, candidate{filepath.Join("/sys/fs/cgroup", parts[2]), true})
			}
		}
	}
	var last error = errors.New("no pids cgroup hierarchy")
	for _, c := range candidates {
		probe := filepath.Join(c.dir, "sandbot-probe-"+randomSuffix())
		if err := os.Mkdir(probe, 0o755); err != nil {
			last = err
			continue
		}
		err := os.WriteFile(filepath.Join(probe, "pids.max"), []byte("10"), 0o644)
		_ = os.Remove(probe)
		if err != nil {
			last = err
			continue
		}
		return c.dir, c.v2, nil
	}
	return "", false, last
}

// pidsCgroup makes a command's own pids cgroup and returns its directory.
func (c *confinement) pidsCgroup(max int) (string, error) {
	dir := filepath.Join(c.pidsBase, c.pidsPrefix+randomSuffix())
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0o644); err != nil {
		_ = os.Remove(dir)
		return "", err
	}
	return dir, nil
}

// startIn starts cmd (bwrap, with SysProcAttr set) with its process born
// in the pids cgroup cg, the way c.pidsJoin says.
func (c *confinement) startIn(cmd *exec.Cmd, cg string) error {
	switch c.pidsJoin {
	case joinClone:
		dir, err := os.Open(cg)
		if err != nil {
			return fmt.Errorf("pids cgroup: %w", err)
		}
		defer dir.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
		return cmd.Start()
	case joinThread:
		return startFromThreadIn(cmd, cg, c.pidsBase)
	default:
		cmd.Args = append([]string{c.shell, "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg}, cmd.Args...)
		cmd.Path = c.shell
		return cmd.Start()
	}
}

// startFromThreadIn starts cmd from a thread that is in cgroup v1 cg for
// the moment of the fork, and returns the thread to base. A thread that
// cannot go back is never reused: its goroutine ends locked, which ends
// the thread (or parks it for good, if it is the main thread), and the
// command (whose Pdeathsig names that thread) is stopped first.
func startFromThreadIn(cmd *exec.Cmd, cg, base string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := moveThread(cg); err != nil {
			runtime.UnlockOSThread() // still where it was
			errc <- fmt.Errorf("join pids cgroup: %w", err)
			return
		}
		err := cmd.Start()
		if lerr := moveThread(base); lerr != nil {
			if err == nil {
				killGroup(cmd.Process.Pid)
				_ = cmd.Wait()
			}
			errc <- fmt.Errorf("leave pids cgroup: %w", lerr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// moveThread moves the calling thread into cgroup v1 directory dir. Raw
// system calls, so they run on this thread whatever the file is.
func moveThread(dir string) error {
	fd, err := syscall.Open(filepath.Join(dir, "tasks"), syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = syscall.Write(fd, []byte("0"))
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	return err
}

// removeCgroup removes a command's cgroup once its processes are gone
// (they are when bwrap has exited: the PID namespace dies with its init,
// which the kernel reaps only after every member).
func removeCgroup(dir string) error {
	var err error
	for range 50 {
		if err = os.Remove(dir); err == nil || !errors.Is(err, syscall.EBUSY) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// sweepCgroups removes command cgroups a dead worker of this root left
// behind; a cgroup still holding processes is busy and stays.
func (c *confinement) sweepCgroups() {
	dirs, _ := filepath.Glob(filepath.Join(c.pidsBase, c.pidsPrefix+"*"))
	for _, d := range dirs {
		_ = os.Remove(d)
	}
}
