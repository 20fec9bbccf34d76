package workerapp

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/sandbox"
)

// checkingBackend is a sandbox.Backend that can check itself.
type checkingBackend struct {
	sandbox.Backend
	err error
}

func (b checkingBackend) Name() string                                          { return "docker" }
func (b checkingBackend) Check(context.Context) error                           { return b.err }
func (checkingBackend) Export(context.Context, sandbox.Handle, io.Writer) error { return nil }

var _ sandbox.Checker = checkingBackend{}

// The worker is ready only while Temporal answers, every served backend
// that can check itself passes, and no configured backend was left
// unserved; each failure names its backend.
func TestWorkerChecks(t *testing.T) {
	w := &Worker{
		backends:    []sandbox.Backend{checkingBackend{err: errors.New("docker: daemon at unix:///var/run/docker.sock: connection refused")}},
		Unavailable: map[string]string{"local": "local: cannot confine commands"},
	}
	checks := w.Checks()
	var names []string
	for _, c := range checks {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "temporal,backend docker,backend local" {
		t.Fatalf("checks = %s", got)
	}
	if err := checks[1].Probe(t.Context()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("docker check: %v", err)
	}
	if err := checks[2].Probe(t.Context()); err == nil || err.Error() != "configured but not served: local: cannot confine commands" {
		t.Errorf("unserved backend check: %v", err)
	}
}
