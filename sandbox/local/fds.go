package local

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// Go opens its own descriptors close-on-exec, but a worker can inherit open
// ones from whatever started it (a supervisor, a shell, a test harness), and
// fork/exec hands every descriptor without the flag to the child: bwrap
// passes them on, and a sandboxed command could read or write them. The
// descriptors a command should have are given to it explicitly (stdin,
// stdout, stderr and exec.Cmd.ExtraFiles), which the flag does not touch.
// It changes the whole process, once, when a backend is made.
func closeInheritedOnExec() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		// The directory's own descriptor is closed by now; EBADF is fine.
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	return nil
}
