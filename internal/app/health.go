package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Readiness timing: each probe gets probeTimeout, and its answer is kept
// for CheckTTL, so a scraper polling /readyz every second costs Temporal
// (or the Docker daemon) one call per CheckTTL.
const (
	probeTimeout = 2 * time.Second
	CheckTTL     = 5 * time.Second
)

// Check is one readiness condition of a process.
type Check struct {
	// Name is a short label: "temporal", "slack", "backend docker".
	Name string
	// Probe returns nil when the condition holds, else why not (the text
	// /readyz shows). It gets a context bounded by a short timeout, and
	// must be safe for concurrent use.
	Probe func(ctx context.Context) error
}

// Cached returns c with its answers kept for ttl: probes run at most once
// per ttl whoever asks, and concurrent askers share one probe.
func (c Check) Cached(ttl time.Duration) Check {
	var (
		mu   sync.Mutex
		at   time.Time
		last error
	)
	probe := c.Probe
	c.Probe = func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if !at.IsZero() && time.Since(at) < ttl {
			return last
		}
		last, at = probe(ctx), time.Now()
		return last
	}
	return c
}

// TemporalCheck is ready while the Temporal frontend answers for the
// namespace (DescribeNamespace: the cluster is reachable and this client's
// credentials may use the namespace). Answers are cached for CheckTTL.
func TemporalCheck(c client.Client, namespace string) Check {
	return Check{Name: "temporal", Probe: func(ctx context.Context) error {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		if err != nil {
			return fmt.Errorf("namespace %s unreachable: %w", namespace, err)
		}
		return nil
	}}.Cached(CheckTTL)
}

// Health is what a process serves besides its work: liveness, readiness
// and metrics.
type Health struct {
	// Addr is the listen address ("" serves nothing).
	Addr string
	// Metrics is what /metrics serves (nil: Prometheus' default registry).
	Metrics prometheus.Gatherer
	// Ready are the conditions of /readyz; all must hold.
	Ready []Check
}

// HealthServer is a running health server; its zero value (nil) serves
// nothing.
type HealthServer struct {
	// Addr is the address it listens on (useful with ":0").
	Addr string
	srv  *http.Server
}

// Handler serves /healthz (the process is alive: always 200), /readyz (200
// when every check holds, else 503 with one line per failed check) and
// /metrics.
func (h Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		failed := h.failing(r.Context())
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if len(failed) == 0 {
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(strings.Join(failed, "\n") + "\n"))
	})
	g := h.Metrics
	if g == nil {
		g = prometheus.DefaultGatherer
	}
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return mux
}

// failing runs every check at once and returns "name: reason" for each
// that does not hold, in the order of h.Ready.
func (h Health) failing(ctx context.Context) []string {
	errs := make([]error, len(h.Ready))
	var wg sync.WaitGroup
	for i, c := range h.Ready {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			errs[i] = c.Probe(cctx)
		})
	}
	wg.Wait()
	var out []string
	for i, err := range errs {
		if err != nil {
			out = append(out, h.Ready[i].Name+": "+oneLine(err.Error()))
		}
	}
	return out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// ServeHealth serves h.Handler on h.Addr until Stop. An empty Addr serves
// nothing and returns a nil server (whose Stop does nothing).
func ServeHealth(h Health, log *slog.Logger) (*HealthServer, error) {
	if h.Addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", h.Addr)
	if err != nil {
		return nil, fmt.Errorf("health: listen %s (SANDBOT_METRICS_ADDR): %w", h.Addr, err)
	}
	srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health server", "error", err)
		}
	}()
	hs := &HealthServer{Addr: ln.Addr().String(), srv: srv}
	log.Info("health and metrics", "addr", hs.Addr)
	return hs, nil
}

// Stop shuts the server down, giving requests in flight 5 seconds.
func (s *HealthServer) Stop() {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
