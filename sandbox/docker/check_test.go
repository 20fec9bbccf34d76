package docker_test

import (
	"strings"
	"testing"

	"github.com/sandbot/sandbot/sandbox/docker"
)

// Check (the worker's readiness) passes with the daemon up and the image
// present, or missing but pullable; it names the daemon when it is down
// and the image when it is missing and pulls are off.
func TestCheck(t *testing.T) {
	if err := newBackend(t, docker.Options{}).Check(ctxT(t)); err != nil {
		t.Errorf("daemon up, image present: %v", err)
	}
	const missing = "sandbot-test/definitely-missing:never"
	if err := newBackend(t, docker.Options{Image: missing, PullMissing: true}).Check(ctxT(t)); err != nil {
		t.Errorf("image missing but pullable: %v", err)
	}
	if err := newBackend(t, docker.Options{Image: missing}).Check(ctxT(t)); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("image missing, pulls off: %v", err)
	}
	const host = "unix:///nonexistent/sandbot/docker.sock"
	cli, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	b, err := docker.New(cli, docker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Check(ctxT(t)); err == nil || !strings.Contains(err.Error(), "docker: daemon at "+host) {
		t.Errorf("daemon down: %v", err)
	}
}
