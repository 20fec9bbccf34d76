package docker_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/internal/testimage"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/docker"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// The tests talk to the real Docker daemon with a locally built busybox
// image (internal/testimage); nothing is pulled. Without a daemon they
// skip, except under CI=true, where they fail: .ci/docker.sh starts one.

// testEnv returns a client for the daemon and the test image, or skips
// (fails under CI) when no daemon answers.
func testEnv(t testing.TB) (*client.Client, string) {
	t.Helper()
	return testimage.Require(t)
}

// newBackend returns a backend on the test daemon running the test image
// unless opts names another.
func newBackend(t testing.TB, opts docker.Options) *docker.Backend {
	t.Helper()
	cli, image := testEnv(t)
	if opts.Image == "" {
		opts.Image = image
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	b, err := docker.New(cli, opts)
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		return newBackend(t, docker.Options{})
	})
}

// inspect returns the container behind a handle.
func inspect(t testing.TB, h sandbox.Handle) client.ContainerInspectResult {
	t.Helper()
	cli, _ := testEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := cli.ContainerInspect(ctx, h.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect %s: %v", h.ID, err)
	}
	return info
}

// waitUntil polls cond until it holds, failing after a generous deadline.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processes lists the command lines of the container's processes, read
// from /proc inside it (zombies, whose cmdline is empty, are left out).
func processes(t testing.TB, b sandbox.Backend, h sandbox.Handle) []string {
	t.Helper()
	out := sandboxtest.Sh(t, b, h, `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f" 2>/dev/null; echo; done`)
	var procs []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			procs = append(procs, l)
		}
	}
	return procs
}

// hasProcess reports whether a command line contains needle. The command
// that lists the processes never contains the needles the tests use.
func hasProcess(procs []string, needle string) bool {
	for _, p := range procs {
		if strings.Contains(p, needle) {
			return true
		}
	}
	return false
}
