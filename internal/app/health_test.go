package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/internal/devserver"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/internal/metrics/metricstest"
)

var quiet = slog.New(slog.DiscardHandler)

// get fetches url and returns the status code and body.
func get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

func serve(t testing.TB, h Health) string {
	t.Helper()
	h.Addr = "127.0.0.1:0"
	hs, err := ServeHealth(h, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hs.Stop)
	return "http://" + hs.Addr
}

// /readyz answers 503 with one line per failing check, naming it and its
// reason, and 200 once every check holds; /healthz is 200 throughout.
func TestReadyzListsEveryFailingCheck(t *testing.T) {
	var slackDown atomic.Bool
	slackDown.Store(true)
	base := serve(t, Health{Metrics: metrics.NewRegistry(), Ready: []Check{
		{Name: "temporal", Probe: func(context.Context) error { return nil }},
		{Name: "slack", Probe: func(context.Context) error {
			if slackDown.Load() {
				return errors.New("socket mode connecting")
			}
			return nil
		}},
		{Name: "backend docker", Probe: func(context.Context) error { return errors.New("configured but not served:\ndaemon down") }},
	}})
	code, body := get(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || body != "slack: socket mode connecting\nbackend docker: configured but not served: daemon down\n" {
		t.Errorf("readyz: %d %q", code, body)
	}
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}

	base = serve(t, Health{Ready: []Check{{Name: "slack", Probe: func(context.Context) error {
		if slackDown.Load() {
			return errors.New("down")
		}
		return nil
	}}}})
	slackDown.Store(false)
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("readyz with every check holding: %d %q", code, body)
	}
}

// A cached check probes at most once per TTL, and concurrent askers share
// the answer.
func TestCachedCheckProbesOncePerTTL(t *testing.T) {
	var probes atomic.Int32
	c := Check{Name: "x", Probe: func(context.Context) error { probes.Add(1); return errors.New("no") }}.Cached(time.Hour)
	for range 10 {
		if err := c.Probe(context.Background()); err == nil || err.Error() != "no" {
			t.Fatalf("probe: %v", err)
		}
	}
	if n := probes.Load(); n != 1 {
		t.Errorf("probed %d times within the TTL", n)
	}
	c = Check{Name: "x", Probe: func(context.Context) error { probes.Add(1); return nil }}.Cached(0)
	_ = c.Probe(context.Background())
	_ = c.Probe(context.Background())
	if n := probes.Load(); n != 3 {
		t.Errorf("a zero TTL must probe every time: %d probes", n)
	}
}

// Against a real Temporal server: ready while it runs, 503 naming Temporal
// once it is gone. /metrics serves the Go runtime, the process, sandbot's
// own metrics and the Temporal SDK's.
func TestReadyzFollowsTemporal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{Ephemeral: true})
	if err != nil {
		t.Fatalf("start Temporal: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Stop()
		}
	})
	reg := metrics.NewRegistry()
	mh, err := TemporalMetrics(reg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	c, err := srv.NewClient(ctx, client.Options{MetricsHandler: mh})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	base := serve(t, Health{Metrics: reg, Ready: []Check{TemporalCheck(c, srv.Namespace())}})

	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz with Temporal up: %d %q", code, body)
	}
	fams := metricstest.Scrape(t, base+"/metrics")
	for _, prefix := range []string{"go_goroutines", "process_", "sandbot_", "temporal_request"} {
		if !fams.Has(prefix) {
			t.Errorf("/metrics has no %s* metric", prefix)
		}
	}
	if v := fams.Value("temporal_request_total", "operation", "DescribeNamespace"); v < 1 {
		t.Errorf("temporal_request_total{operation=DescribeNamespace} = %v after a readiness check", v)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	// The answer is cached for CheckTTL; poll until it changes.
	deadline := time.Now().Add(time.Minute)
	for {
		code, body := get(t, base+"/readyz")
		if code == http.StatusServiceUnavailable {
			if !strings.HasPrefix(body, "temporal: namespace "+srv.Namespace()+" unreachable") {
				t.Errorf("readyz with Temporal down: %q", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz still %d %q after Temporal stopped", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz with Temporal down: %d (the process is alive)", code)
	}
}
