// Package cluster runs sandbot end to end in its production shape, built
// from parts this machine can build without any image registry: the real
// Temporal server (go.temporal.io/server) on a real PostgreSQL (Debian's
// packages, a throwaway instance per cluster, internal/pgtest), an
// S3-compatible store speaking the real protocol (gofakes3 on loopback,
// reached through the AWS SDK as the workers use it), worker hosts that are
// separate cmd/worker processes with their own host IDs, workspace roots and
// loopback addresses, and two bot replicas on the Slack fake.
//
// See docs/TESTING.md for what it covers and what it does not.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/internal/pgtemporal"
	"github.com/sandbot/sandbot/internal/pgtest"
)

func TestMain(m *testing.M) {
	// A child started as the Temporal server (internal/pgtemporal) runs it
	// and never returns.
	pgtemporal.ServeIfChild()
	code := m.Run()
	shared.mu.Lock()
	if shared.c != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "--- the shared Temporal server's log ends with:\n%s\n", shared.c.LogTail(4000))
		}
		shared.c.Close()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	shared.mu.Unlock()
	removeBuilds()
	os.Exit(code)
}

// waitTimeout bounds every wait for an event; tests wait for conditions,
// never for durations.
const waitTimeout = 2 * time.Minute

// shared is the cluster the tests share (each in namespaces of its own);
// the restart test makes its own.
var shared struct {
	mu   sync.Mutex
	c    *pgtemporal.Cluster
	dir  string
	err  error
	done bool
}

// sharedCluster starts the shared cluster on first use.
func sharedCluster(t testing.TB) *pgtemporal.Cluster {
	t.Helper()
	pgtest.Require(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.done {
		shared.done = true
		start := time.Now()
		shared.dir, shared.err = os.MkdirTemp("", "sandbot-cluster-")
		if shared.err == nil {
			shared.c, shared.err = newCluster(shared.dir)
		}
		t.Logf("cluster (PostgreSQL, schema, Temporal server) up in %s", time.Since(start).Round(time.Millisecond))
	}
	if shared.err != nil {
		t.Fatalf("cluster: %v", shared.err)
	}
	return shared.c
}

// ownCluster starts a cluster for one test, closed when it ends.
func ownCluster(t testing.TB) *pgtemporal.Cluster {
	t.Helper()
	pgtest.Require(t)
	start := time.Now()
	c, err := newCluster(t.TempDir())
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Logf("own cluster up in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- the Temporal server's log ends with:\n%s", c.LogTail(4000))
		}
		c.Close()
	})
	return c
}

// newCluster starts a cluster (PostgreSQL, schema, Temporal server) with
// dir for its spec file and log. Close it.
func newCluster(dir string) (*pgtemporal.Cluster, error) {
	return pgtemporal.New(dir, pgtemporal.Options{ClientLog: clientLog()})
}

// clientLog is where the suite's Temporal clients log: warnings and
// errors, on stderr with SANDBOT_TEST_LOG set and nowhere otherwise.
func clientLog() *slog.Logger {
	h := slog.DiscardHandler
	if os.Getenv("SANDBOT_TEST_LOG") != "" {
		h = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	}
	return slog.New(h)
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}
