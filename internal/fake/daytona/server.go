// Package fakedaytona is an in-process Daytona that speaks the real wire
// protocol (control plane and toolbox, as of SDK v0.190.0), so the Daytona
// backend's tests and benchmarks drive its real HTTP client end to end
// instead of a mock of our own interfaces.
//
// The control plane is served at URL() (POST/GET/DELETE /sandbox...,
// start, stop, pause, autostop, list with a labels filter) and every
// sandbox's toolbox under URL()+"/toolbox/{id}" (the DTO's
// toolboxProxyUrl is URL()+"/toolbox"): process/execute, sessions with
// async and sync exec, command status and logs, and the file endpoints.
//
// Commands run for real. Each sandbox owns a directory on the host holding
// its /home and /tmp, and every command, like every file endpoint, runs
// under bubblewrap with those two mounted at their real paths, as uid
// 1000, so what a client writes through one route it reads through the
// other. There is no pid namespace: killing is the daemon's, not
// bubblewrap's. process/execute with a timeout and DELETE of a session kill
// the process group the daemon started, nothing more, so a client that
// moves its command into a group of its own (setsid) must kill that group
// itself; stopping, deleting or vanishing a sandbox kills every process
// carrying its DAYTONA_SANDBOX_ID.
//
// What it checks, as the real service does or stricter: the Bearer key on
// every request; state (a toolbox request while the sandbox is not started
// gets 409 CONFLICT "sandbox is not started", since the real proxy's
// answer is undocumented; a lifecycle call mid-transition gets 409
// "Sandbox state change in progress"; DELETE removes the sandbox at once);
// create bodies (resources only with buildInfo); JSON bodies (content
// type, unknown keys and missing required fields give 400, where the real
// API silently ignores unknown keys, because an ignored key is a client
// bug); bulk-upload part order. Transitions advance by control-plane
// requests naming the sandbox, not by wall time (Options.TransitionTicks),
// so a client's polling is exercised deterministically. Every request is
// recorded (Calls) and faults can be injected (Fail, SetDown, Vanish).
package fakedaytona

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options configure a Server. Zero values mean the documented defaults.
type Options struct {
	// APIKey is the only Bearer token accepted. Default "dtn_fake".
	APIKey string
	// Dir holds the sandboxes' directories. Default: a temporary
	// directory, removed by Close.
	Dir string
	// TransitionTicks is how many control-plane requests naming a
	// sandbox a transition (creating, starting, stopping) lasts before it
	// completes. Default 2; negative means transitions complete at once.
	TransitionTicks int
	// Bwrap is the bubblewrap binary. Default: "bwrap" on PATH.
	Bwrap string
}

// Call is one request the fake answered.
type Call struct {
	Method string
	// Path is the request path with real ids, e.g.
	// "/toolbox/<id>/process/execute".
	Path   string
	Query  string
	Status int
	// Body is the request body for JSON requests (up to 64 KiB).
	Body []byte
}

// SandboxInfo is the fake's view of one sandbox.
type SandboxInfo struct {
	ID, Name, State  string
	Labels           map[string]string
	AutoStopInterval *int
	// Dir is the host directory holding the sandbox's home and tmp.
	Dir string
}

type fault struct {
	method, prefix string
	status, times  int
	header         http.Header
}

// Server is a fake Daytona. All methods are safe for concurrent use.
type Server struct {
	opts   Options
	srv    *httptest.Server
	bwrap  string
	ownDir bool

	mu     sync.Mutex
	seq    int
	boxes  map[string]*box
	calls  []Call
	faults []*fault
	down   string
	closed bool
}

// New starts a fake Daytona on a local port. It fails when bubblewrap is
// missing, since the fake cannot run commands without it. Call Close when
// done.
func New(opts Options) (*Server, error) {
	if opts.APIKey == "" {
		opts.APIKey = "dtn_fake"
	}
	if opts.TransitionTicks == 0 {
		opts.TransitionTicks = 2
	}
	if opts.Bwrap == "" {
		opts.Bwrap = "bwrap"
	}
	bw, err := exec.LookPath(opts.Bwrap)
	if err != nil {
		return nil, fmt.Errorf("fakedaytona: bubblewrap (%s) is needed to run sandbox commands: %w", opts.Bwrap, err)
	}
	s := &Server{opts: opts, bwrap: bw, boxes: map[string]*box{}}
	if s.opts.Dir == "" {
		d, err := os.MkdirTemp("", "fakedaytona-")
		if err != nil {
			return nil, fmt.Errorf("fakedaytona: %w", err)
		}
		s.opts.Dir, s.ownDir = d, true
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s, nil
}

// Start starts a fake for a test or benchmark and closes it when that
// ends; a missing bubblewrap fails the test.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	s, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Close kills every sandbox's processes and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	boxes := make([]*box, 0, len(s.boxes))
	for _, b := range s.boxes {
		boxes = append(boxes, b)
	}
	s.mu.Unlock()
	for _, b := range boxes {
		b.killAll()
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
	if s.ownDir {
		_ = os.RemoveAll(s.opts.Dir)
	}
}

// URL is the control-plane base, e.g. "http://127.0.0.1:40123", for the
// backend's APIURL.
func (s *Server) URL() string { return s.srv.URL }

// APIKey is the accepted key.
func (s *Server) APIKey() string { return s.opts.APIKey }

// Vanish makes a sandbox disappear out of band (as if deleted by someone
// else): its processes die, later GETs answer 404 and its toolbox 404.
func (s *Server) Vanish(id string) {
	s.mu.Lock()
	b := s.boxes[id]
	delete(s.boxes, id)
	s.mu.Unlock()
	if b != nil {
		b.killAll()
	}
}

// SetDown makes every request answer 503 with reason as the error body's
// message, as during an outage; "" restores service.
func (s *Server) SetDown(reason string) {
	s.mu.Lock()
	s.down = reason
	s.mu.Unlock()
}

// Fail answers the next times requests whose method is method ("" for
// any) and whose path starts with pathPrefix with status, the provider's
// error body for that route, and header (e.g. Retry-After-sandbox-create).
// Faulted requests are recorded but have no other effect.
func (s *Server) Fail(method, pathPrefix string, status int, times int, header http.Header) {
	s.mu.Lock()
	s.faults = append(s.faults, &fault{method: method, prefix: pathPrefix, status: status, times: times, header: header})
	s.mu.Unlock()
}

// SetCreated backdates (or postdates) a sandbox's createdAt, for tests of
// sweepers that spare young sandboxes.
func (s *Server) SetCreated(id string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.boxes[id]; b != nil {
		b.created = t.UTC()
	}
}

// Sandboxes lists the sandboxes that exist (not destroyed, not vanished).
func (s *Server) Sandboxes() []SandboxInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SandboxInfo
	for _, b := range s.boxes {
		if b.state == "destroyed" {
			continue
		}
		out = append(out, b.info())
	}
	return out
}

// Calls returns every request answered so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// recorder captures the status for Calls.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w}
	var body []byte
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") && r.ContentLength >= 0 && r.ContentLength <= 64<<10 {
		body = readBody(r)
	}
	defer func() {
		s.mu.Lock()
		s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: rec.status, Body: body})
		s.mu.Unlock()
	}()
	toolbox := strings.HasPrefix(r.URL.Path, "/toolbox/")
	if r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey {
		s.fail(rec, r, toolbox, http.StatusUnauthorized, "Invalid credentials")
		return
	}
	s.mu.Lock()
	down := s.down
	var hit *fault
	for _, f := range s.faults {
		if f.times > 0 && (f.method == "" || f.method == r.Method) && strings.HasPrefix(r.URL.Path, f.prefix) {
			f.times--
			hit = f
			break
		}
	}
	s.mu.Unlock()
	if down != "" {
		s.fail(rec, r, toolbox, http.StatusServiceUnavailable, down)
		return
	}
	if hit != nil {
		for k, vs := range hit.header {
			for _, v := range vs {
				rec.Header().Add(k, v)
			}
		}
		msg := http.StatusText(hit.status)
		switch hit.status {
		case http.StatusConflict:
			msg = "Sandbox state change in progress"
		case http.StatusTooManyRequests:
			msg = "Rate limit exceeded"
		}
		s.fail(rec, r, toolbox, hit.status, msg)
		return
	}
	if toolbox {
		s.serveToolbox(rec, r)
		return
	}
	s.serveAPI(rec, r, body)
}

func readBody(r *http.Request) []byte {
	p, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	r.Body = io.NopCloser(bytes.NewReader(p))
	return p
}

// fail writes the route's error body: the API's NestJS shape or the
// toolbox daemon's.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, toolbox bool, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if toolbox {
		code := strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))
		_ = json.NewEncoder(w).Encode(map[string]any{"statusCode": status, "message": msg, "code": code, "timestamp": now, "path": r.URL.Path, "method": r.Method})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"path": r.URL.Path, "timestamp": now, "statusCode": status, "error": http.StatusText(status), "message": msg})
}

func (s *Server) boxDir(id string) string { return filepath.Join(s.opts.Dir, id) }
