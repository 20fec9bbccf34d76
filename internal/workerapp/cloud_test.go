package workerapp

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox"
)

// config.KnownBackends is what the worker can build: every name it
// accepts makes a backend of that name, and nothing else does.
func TestKnownBackendsAreBuilt(t *testing.T) {
	cfg := config.Load()
	cfg.Sandbox.LocalRoot = t.TempDir()
	cfg.Sandbox.LocalUnconfined = true // this test builds, it runs nothing
	cfg.Daytona.APIKey = "dtn_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cfg.E2B.APIKey = "e2b_0123456789abcdef0123456789abcdef01234567"
	log := slog.New(slog.DiscardHandler)
	for _, name := range config.KnownBackends {
		b, err := newBackend(context.Background(), name, cfg, "", log)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if b.Name() != name {
			t.Errorf("%s: built a backend named %q", name, b.Name())
		}
		_, hostBound := b.(sandbox.HostBound)
		if cloud := name == "daytona" || name == "e2b"; cloud == hostBound {
			t.Errorf("%s: host-bound %v; only local and docker sandboxes live on the worker's host", name, hostBound)
		}
	}
	if _, err := newBackend(context.Background(), "firecracker", cfg, "", log); err == nil {
		t.Error("a name outside config.KnownBackends built a backend")
	}
	if !slices.Equal(cfg.Backends(), []string{"local", "daytona", "e2b"}) {
		t.Errorf("with both keys set the worker serves %v", cfg.Backends())
	}
}
