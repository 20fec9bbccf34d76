package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dockerclient "github.com/moby/moby/client"
)

// The Docker daemon fault (FaultDockerRestart): the daemon the stack's
// docker sessions run on is stopped, stays down for a moment, and is
// started again exactly as it was started (.ci/docker.sh, or whoever did):
// the same binary, arguments, environment and log file, in a session of
// its own so it outlives the suite. Stopping it is either a clean stop
// (SIGTERM: it stops every container first, as `systemctl stop docker`
// does) or a crash (SIGKILL: containerd, its child, dies with it and the
// containers are found stopped when it comes back). Without live-restore
// either way leaves every session's container stopped, and a command that
// was running when the daemon went away has lost its exec.
//
// The daemon is the machine's: anything else using it (another suite's
// docker sessions) sees the same outage. The fault runs only when named,
// or in the short and long modes, which name every fault.

// daemonProc is a running dockerd, as read from /proc.
type daemonProc struct {
	pid  int
	argv []string
	env  []string
	// logPath is the file its stdout went to ("" when not a regular
	// file: the restarted one then logs to dockerdLog).
	logPath string
}

// dockerdLog is where a restarted daemon logs when the original's output
// went nowhere the suite can append to (.ci/docker.sh's default log).
const dockerdLog = "/tmp/sandbot-dockerd.log"

// dockerdMu serialises restarts (one fault at a time already; also the
// end-of-run check) and holds the daemon the suite started, if any, so it
// is waited for (reaped) when it exits.
var dockerdMu sync.Mutex

// defaultDockerHost is where a dockerd started without -H listens (and
// where clients look without DOCKER_HOST).
const defaultDockerHost = "unix:///var/run/docker.sock"

// hosts are the addresses a dockerd's command line makes it listen on.
func (d *daemonProc) hosts() []string {
	var out []string
	for i, a := range d.argv {
		switch {
		case (a == "-H" || a == "--host") && i+1 < len(d.argv):
			out = append(out, d.argv[i+1])
		case strings.HasPrefix(a, "-H="), strings.HasPrefix(a, "--host="):
			out = append(out, a[strings.IndexByte(a, '=')+1:])
		case strings.HasPrefix(a, "-H") && len(a) > 2 && a[2] != '=':
			out = append(out, a[2:])
		}
	}
	if len(out) == 0 {
		out = []string{defaultDockerHost}
	}
	return out
}

// findDockerd finds the dockerd process that listens on host (the
// client's DOCKER_HOST): the one whose -H names it, or for the default
// socket the one started without -H; when none matches and only one
// dockerd runs, that one.
func findDockerd(host string) (*daemonProc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var found []*daemonProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || strings.TrimSpace(string(comm)) != "dockerd" || !alive(pid) {
			continue
		}
		d := &daemonProc{pid: pid}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		d.argv = splitNUL(cmdline)
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			return nil, fmt.Errorf("read dockerd's environment: %w", err)
		}
		d.env = splitNUL(environ)
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", pid)); err == nil && filepath.IsAbs(l) {
			if st, err := os.Stat(l); err == nil && st.Mode().IsRegular() {
				d.logPath = l
			}
		}
		if len(d.argv) > 0 {
			found = append(found, d)
		}
	}
	for _, d := range found {
		if slices.Contains(d.hosts(), host) {
			return d, nil
		}
	}
	switch len(found) {
	case 0:
		return nil, errors.New("no dockerd process runs on this machine (bash .ci/docker.sh starts one)")
	case 1:
		return found[0], nil
	}
	return nil, fmt.Errorf("%d dockerd processes run on this machine and none names %s with -H", len(found), host)
}

func splitNUL(b []byte) []string {
	var out []string
	for f := range bytes.SplitSeq(bytes.TrimRight(b, "\x00"), []byte{0}) {
		out = append(out, string(f))
	}
	return out
}

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name's closing parenthesis.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X')
}

// restartDockerd stops the daemon (crash: SIGKILL, else SIGTERM), waits
// down, starts it again as it was started and waits until cli's daemon
// answers. It runs to its end whatever ctx says: the daemon is never left
// down.
func restartDockerd(ctx context.Context, cli *dockerclient.Client, down time.Duration, crash bool) error {
	dockerdMu.Lock()
	defer dockerdMu.Unlock()
	d, err := findDockerd(cli.DaemonHost())
	if err != nil {
		return err
	}
	sig := syscall.SIGTERM
	if crash {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(d.pid, sig); err != nil {
		return fmt.Errorf("signal dockerd (pid %d): %w", d.pid, err)
	}
	// A clean stop stops every container first (its shutdown timeout is
	// 15 s by default); past a minute it is killed.
	if !waitGone(d.pid, time.Minute) {
		_ = syscall.Kill(d.pid, syscall.SIGKILL)
		if !waitGone(d.pid, 30*time.Second) {
			return fmt.Errorf("dockerd (pid %d) did not exit after SIGKILL", d.pid)
		}
	}
	sleep(ctx, down)
	return startDockerd(context.WithoutCancel(ctx), cli, d)
}

// startDockerd starts d's command again, detached (a session of its own,
// output appended to its log), and waits until the daemon answers.
func startDockerd(ctx context.Context, cli *dockerclient.Client, d *daemonProc) error {
	logPath := d.logPath
	if logPath == "" {
		logPath = dockerdLog
	}
	var lastErr error
	for attempt := range 3 {
		logf, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("dockerd's log: %w", err)
		}
		cmd := exec.Command(d.argv[0], d.argv[1:]...)
		cmd.Env = d.env
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Dir = "/"
		// It must outlive the suite, as the original would have: no
		// death signal, a session of its own.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		_ = logf.Close()
		if err != nil {
			return fmt.Errorf("start dockerd again: %w", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }() // reaps it whenever it exits
		if lastErr = waitDaemon(ctx, cli, exited, 90*time.Second); lastErr == nil {
			return nil
		}
		select {
		case <-exited:
			// It exited at once (its pid file or socket still held for a
			// moment): try again.
			sleep(ctx, time.Duration(attempt+1)*time.Second)
			continue
		default:
		}
		return lastErr
	}
	return fmt.Errorf("dockerd restarted 3 times and did not stay up; see %s: %w", logPath, lastErr)
}

// waitGone waits until pid is no longer a live process.
func waitGone(pid int, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !alive(pid) {
			return true
		}
	}
	return !alive(pid)
}

// waitDaemon waits until the daemon answers a ping, the process exits or
// within passes.
func waitDaemon(ctx context.Context, cli *dockerclient.Client, exited <-chan struct{}, within time.Duration) error {
	deadline := time.Now().Add(within)
	var err error
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = cli.Ping(pctx, dockerclient.PingOptions{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("dockerd exited after its restart: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("dockerd not answering %s after its restart: %w", within, err)
}
