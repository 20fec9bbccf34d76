package local

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"syscall"
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
