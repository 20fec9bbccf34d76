package fakedaytona

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// homeDir is the sandbox user's home, the daemon's working directory.
const homeDir = "/home/daytona"

// command prepares /bin/sh -c script (with args as $1...) inside the
// sandbox: the host's file system read-only, the sandbox's /home and /tmp
// writable at their real paths, uid 1000. It runs in a process group of
// its own, the group the daemon kills. The environment is what the
// daemon gives its shells, the sandbox's env, and extra.
func (s *Server) command(b *box, cwd string, extra map[string]string, script string, args ...string) *exec.Cmd {
	if cwd == "" {
		cwd = homeDir
	}
	argv := []string{
		"--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev",
		"--bind", filepath.Join(b.dir, "home"), "/home",
		"--bind", filepath.Join(b.dir, "tmp"), "/tmp",
		"--unshare-user", "--uid", "1000", "--gid", "1000",
		"--die-with-parent", "--chdir", cwd,
		"--", "/bin/sh", "-c", script, "sh",
	}
	cmd := exec.Command(s.bwrap, append(argv, args...)...)
	env := map[string]string{
		"PATH":                 "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":                 homeDir,
		"USER":                 "daytona",
		"DAYTONA_SANDBOX_ID":   b.id,
		"DAYTONA_SANDBOX_USER": "daytona",
	}
	s.mu.Lock()
	for k, v := range b.env {
		env[k] = v
	}
	s.mu.Unlock()
	for k, v := range extra {
		env[k] = v
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// killGroup SIGKILLs the process group a command was started in.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

var killMu sync.Mutex

// killAll kills every process of the sandbox, wherever it moved to
// (setsid, double fork): as a stopped container would, it spares none.
// They are found by the DAYTONA_SANDBOX_ID in their environment.
func (b *box) killAll() {
	killMu.Lock()
	defer killMu.Unlock()
	marker := []byte("DAYTONA_SANDBOX_ID=" + b.id + "\x00")
	for range 20 {
		found := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !bytes.Contains(env, marker) {
				continue
			}
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				found = true
			}
		}
		if !found {
			return
		}
	}
}
