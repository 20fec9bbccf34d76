package app

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// DebugServer serves Go's profiles (net/http/pprof) until Stop.
type DebugServer struct {
	// Addr is the address it listens on (the port filled in for ":0").
	Addr string
	srv  *http.Server
}

// DebugHandler serves /debug/pprof/ and its profiles (heap, allocs,
// goroutine, profile, trace, ...) on a mux of its own: importing
// net/http/pprof for its side effect would put them on
// http.DefaultServeMux, where any other server of the process could serve
// them by accident.
func DebugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// ServeDebug serves DebugHandler on addr (SANDBOT_DEBUG_ADDR, which config
// holds to loopback) until Stop. An empty addr serves nothing and returns a
// nil server (whose Stop does nothing). The server has no write timeout: a
// CPU profile or trace streams for as long as its seconds parameter asks.
func ServeDebug(addr string, log *slog.Logger) (*DebugServer, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug: listen %s (SANDBOT_DEBUG_ADDR): %w", addr, err)
	}
	srv := &http.Server{Handler: DebugHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("debug server", "error", err)
		}
	}()
	ds := &DebugServer{Addr: ln.Addr().String(), srv: srv}
	log.Info("debug profiles", "addr", ds.Addr)
	return ds, nil
}

// Stop closes the server and any profile in flight.
func (s *DebugServer) Stop() {
	if s == nil {
		return
	}
	_ = s.srv.Close()
}
