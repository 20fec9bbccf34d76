package local

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// TestInheritedDescriptorsStayOut is the attack: the worker holds a
// descriptor it inherited without close-on-exec (here a file opened without
// O_CLOEXEC, as a supervisor's leaked pipe would be). A command, confined or
// not, must not find it open.
func TestInheritedDescriptorsStayOut(t *testing.T) {
	fd, err := syscall.Open("/etc/hostname", syscall.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	for _, unconfined := range []bool{false, true} {
		b := newBackend(t, Options{Unconfined: unconfined})
		h := sandboxtest.NewSandbox(t, b)
		n := strconv.Itoa(fd)
		out := sandboxtest.Sh(t, b, h, "if [ -e /proc/self/fd/"+n+" ]; then echo open; else echo closed; fi")
		if strings.TrimSpace(out) != "closed" {
			t.Errorf("unconfined=%v: the command found the worker's inherited descriptor %d %s", unconfined, fd, strings.TrimSpace(out))
		}
	}
}
