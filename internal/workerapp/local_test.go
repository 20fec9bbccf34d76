package workerapp

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox/local"
)

// Without bubblewrap (simulated: nothing on PATH) the local backend is
// refused with the setting that opts out named; with it set, it runs
// unconfined and says so.
func TestLocalBackendRefusalNamesTheOptOut(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cfg := config.Load()
	cfg.Sandbox.LocalRoot = t.TempDir()
	_, err := newLocalBackend(cfg, "", slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "SANDBOT_SANDBOX_LOCAL_UNCONFINED") || !strings.Contains(err.Error(), "bubblewrap") {
		t.Fatalf("newLocalBackend without bwrap: %v, want a refusal naming bubblewrap and SANDBOT_SANDBOX_LOCAL_UNCONFINED", err)
	}
	cfg.Sandbox.LocalUnconfined = true
	b, err := newLocalBackend(cfg, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if d := b.(*local.Backend).Describe(); !strings.HasPrefix(d, "UNCONFINED") {
		t.Errorf("Describe = %q", d)
	}
}

func TestLocalBackendIsConfinedByDefault(t *testing.T) {
	cfg := config.Load()
	cfg.Sandbox.LocalRoot = t.TempDir()
	b, err := newLocalBackend(cfg, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if lb := b.(*local.Backend); !lb.Confined() || !strings.Contains(lb.Describe(), "no network") {
		t.Errorf("Describe = %q", lb.Describe())
	}
}

// A worker whose local backend cannot be confined does not start serving
// the others quietly: start-up fails and names the opt-out.
func TestWorkerRefusesAnUnconfinableLocalBackend(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cfg := config.Load()
	cfg.Sandbox.LocalRoot = t.TempDir()
	cfg.Sandbox.Backends = []string{"local"}
	w := &Worker{Unavailable: map[string]string{}}
	if _, err := w.buildBackends(context.Background(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "SANDBOT_SANDBOX_LOCAL_UNCONFINED") {
		t.Fatalf("buildBackends: %v, want a start-up error naming SANDBOT_SANDBOX_LOCAL_UNCONFINED", err)
	}
}
