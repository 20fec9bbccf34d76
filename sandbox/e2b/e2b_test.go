package e2b_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	fakee2b "github.com/sandbot/sandbot/internal/fake/e2b"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/e2b"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// sleeps records the retry waits a backend asked for, without taking
// them, so retry tests are fast and deterministic.
type sleeps struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// newBackend returns a backend pointed at the fake.
func newBackend(t testing.TB, fake *fakee2b.Server, opts e2b.Options) *e2b.Backend {
	t.Helper()
	opts.APIURL = fake.URL()
	opts.SandboxURL = fake.SandboxURL()
	if opts.APIKey == "" {
		opts.APIKey = fake.Options().APIKey
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Sleep == nil {
		opts.Sleep = (&sleeps{}).sleep
	}
	b, err := e2b.New(opts)
	if err != nil {
		t.Fatalf("e2b.New: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		return newBackend(t, fake, e2b.Options{})
	})
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
