//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package devserver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDB takes an exclusive lock on path+".lock" (creating the parent directory), so two
// servers never share a database: two single-node clusters on one file would fight over the
// history shard. The lock is released by the returned func, or by the OS if the process dies.
// It also excludes a second Server on the same file within one process.
func lockDB(path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), stateDirMode); err != nil {
		return nil, fmt.Errorf("devserver: create directory for DBPath: %w", err)
	}
	lockPath := path + ".lock"
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, stateFileMode)
	if err != nil {
		return nil, fmt.Errorf("devserver: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(lockPath)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("devserver: %s is in use by another dev server (pid %s); stop it or choose another DBPath",
				path, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("devserver: lock %s: %w", lockPath, err)
	}
	// Best effort: the pid only makes the "in use" message more helpful.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { _ = f.Close() }, nil
}
