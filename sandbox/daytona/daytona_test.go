package daytona_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	fakedaytona "github.com/sandbot/sandbot/internal/fake/daytona"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/daytona"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// The tests drive the real client against the wire-level fake
// (internal/fake/daytona), which runs commands for real under bubblewrap.

// quiet is a logger for tests.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newBackend returns a backend on srv with short waits; opts may set more.
func newBackend(t testing.TB, srv *fakedaytona.Server, opts daytona.Options) *daytona.Backend {
	t.Helper()
	opts.APIURL = srv.URL()
	if opts.APIKey == "" {
		opts.APIKey = srv.APIKey()
	}
	if opts.Logger == nil {
		opts.Logger = quiet()
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = time.Millisecond
	}
	if opts.RetryMin == 0 {
		opts.RetryMin, opts.RetryMax = time.Millisecond, 10*time.Millisecond
	}
	b, err := daytona.New(opts)
	if err != nil {
		t.Fatalf("daytona.New: %v", err)
	}
	return b
}

func TestConformance(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	sandboxtest.Run(t, func(t *testing.T) sandbox.Backend {
		return newBackend(t, srv, daytona.Options{})
	})
}
