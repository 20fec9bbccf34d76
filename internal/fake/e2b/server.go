// Package fakee2b is an in-process E2B that speaks the real wire protocol,
// so the e2b sandbox backend is tested against the HTTP it will meet in
// production rather than against a mock of its own calls.
//
// It serves two listeners, as E2B does:
//   - the control plane (URL()): POST /sandboxes, GET /sandboxes/{id},
//     GET /v2/sandboxes (state and metadata filters, paging),
//     POST /sandboxes/{id}/timeout|refreshes|pause|connect and
//     DELETE /sandboxes/{id}, with X-API-Key auth, strict camelCase
//     bodies (unknown keys, a missing templateID, a timeout ≤ 0 or a
//     non-JSON content type get 400), the 15 s default TTL, and a TTL timer
//     that pauses (autoPause) or kills;
//   - envd behind the sandbox proxy (SandboxURL()), routed by the
//     E2b-Sandbox-Id / E2b-Sandbox-Port headers or a "49983-<id>." host
//     prefix: GET /health, POST and GET /files, and the Connect RPCs
//     process.Process/Start (server stream with the exact envelope
//     framing, flushed per envelope, keepalives, Connect-Timeout-Ms as the
//     process lifetime) and process.Process/SendSignal (unary JSON). Every
//     other envd request needs the sandbox's X-Access-Token, and a
//     sandbox that is unknown, killed or paused answers the proxy's 502.
//
// Commands run for real: each sandbox has a directory on the host holding
// its /home and /tmp, and every command runs under bubblewrap with those
// mounted at their real paths, as uid 1000 with only the environment envd
// would give it. Kill semantics are envd's, not a convenience of ours: a
// Connect-Timeout-Ms deadline or SendSignal kills exactly one pid, and a
// client that disconnects leaves its process running, so a client that
// forgets its process group leaves children behind here as it would there.
//
// Approximations: pausing kills the sandbox's processes but keeps its
// files (real E2B snapshots memory too); a process killed by a signal is
// seen through bubblewrap, which reports 128+signal. Signed /files URLs are
// not supported (the token is always required).
//
// Every request is recorded (Calls), faults can be injected (Fail,
// SetDown, Vanish, Expire) and tests wait for conditions, never sleep.
package fakee2b

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/internal/fake/fakehttp"
)

// DefaultAPIKey is the key a Server accepts when Options.APIKey is empty.
const DefaultAPIKey = "e2b_0123456789abcdef0123456789abcdef01234567"

// EnvdVersion is what the fake reports as every sandbox's envd version.
const EnvdVersion = "0.6.13"

// EnvdPort is the port envd listens on inside a sandbox.
const EnvdPort = "49983"

// Options configure a Server. Zero values mean the documented defaults.
type Options struct {
	// APIKey is the only X-API-Key the control plane accepts (default
	// DefaultAPIKey).
	APIKey string
	// ManualExpiry disables the TTL timers: sandboxes then only expire
	// through Expire, so tests that care about expiry stay deterministic.
	ManualExpiry bool
	// Dir is where sandbox directories go (default a fresh temporary
	// directory, removed by Close).
	Dir string
	// Bwrap is the bubblewrap binary (default "bwrap" on PATH).
	Bwrap string
}

// SandboxInfo is what Sandboxes reports of one sandbox.
type SandboxInfo struct {
	ID         string
	TemplateID string
	State      string // "running" or "paused"
	Metadata   map[string]string
	AutoPause  bool
	EndAt      time.Time
}

// Call is one request the fake received.
type Call struct {
	// Service is "api" (control plane) or "envd".
	Service string
	Method  string
	// Path is the request path with real ids ("/sandboxes/abc/pause",
	// "/process.Process/Start").
	Path string
	// Sandbox is the sandbox an envd request was routed to.
	Sandbox string
	// Args is the process (cmd then args) of a Start request.
	Args []string
	// Status is the HTTP status the fake answered, recorded when its
	// handler returns (a client may read the answer a moment before;
	// WaitFor the status rather than expect it at once). 0 while the
	// request is in flight.
	Status int
}

type fault struct {
	method, prefix string
	status         int
	times          int
	header         http.Header
}

// Server is a fake E2B. All methods are safe for concurrent use.
type Server struct {
	opts  Options
	api   *httptest.Server
	envd  *httptest.Server
	dir   string
	owned bool // dir was made by New

	mu        sync.Mutex
	changed   chan struct{}
	sandboxes map[string]*sbox
	calls     []*Call
	faults    []*fault
	down      string
	closed    bool
}

// New starts a fake E2B on local ports. It fails when bubblewrap is
// missing, since the fake cannot run commands without it. Call Close when
// done.
func New(opts Options) (*Server, error) {
	if opts.APIKey == "" {
		opts.APIKey = DefaultAPIKey
	}
	if opts.Bwrap == "" {
		opts.Bwrap = "bwrap"
	}
	bw, err := exec.LookPath(opts.Bwrap)
	if err != nil {
		return nil, fmt.Errorf("fakee2b: bubblewrap (%s) is needed to run sandbox commands: %w (apt-get install bubblewrap)", opts.Bwrap, err)
	}
	opts.Bwrap = bw
	s := &Server{opts: opts, changed: make(chan struct{}), sandboxes: map[string]*sbox{}}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "fakee2b-")
		if err != nil {
			return nil, fmt.Errorf("fakee2b: %w", err)
		}
		s.dir, s.owned = d, true
	} else {
		s.dir = opts.Dir
	}
	// bubblewrap runs as the sandbox user, which must reach the sandbox
	// directories.
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("fakee2b: %w", err)
	}
	if err := s.probe(); err != nil {
		if s.owned {
			os.RemoveAll(s.dir)
		}
		return nil, err
	}
	apiMux := http.NewServeMux()
	apiMux.HandleFunc("POST /sandboxes", s.handleCreate)
	apiMux.HandleFunc("GET /sandboxes/{id}", s.handleGet)
	apiMux.HandleFunc("GET /v2/sandboxes", s.handleList)
	apiMux.HandleFunc("POST /sandboxes/{id}/timeout", s.handleTimeout)
	apiMux.HandleFunc("POST /sandboxes/{id}/refreshes", s.handleRefreshes)
	apiMux.HandleFunc("POST /sandboxes/{id}/pause", s.handlePause)
	apiMux.HandleFunc("POST /sandboxes/{id}/connect", s.handleConnect)
	apiMux.HandleFunc("DELETE /sandboxes/{id}", s.handleKill)
	apiMux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
	s.api = httptest.NewServer(s.wrap("api", apiMux))
	s.envd = httptest.NewServer(s.wrap("envd", http.HandlerFunc(s.serveEnvd)))
	return s, nil
}

// Start is New for tests: it fails tb on error and closes the server when
// the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// probe runs one command under bubblewrap, so a host where it cannot run
// (no user namespaces) fails at New with the reason, not at the first Exec.
func (s *Server) probe() error {
	d, err := os.MkdirTemp(s.dir, "probe-")
	if err != nil {
		return fmt.Errorf("fakee2b: %w", err)
	}
	defer os.RemoveAll(d)
	if err := os.Chmod(d, 0o755); err != nil {
		return fmt.Errorf("fakee2b: %w", err)
	}
	sb := &sbox{id: "probe", dir: d}
	if err := sb.makeDirs(); err != nil {
		return err
	}
	cmd := s.bwrapCmd(sb, "/home/user", nil, []string{"/bin/true"})
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("fakee2b: bubblewrap cannot run commands here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Close kills every sandbox's processes, stops both listeners and removes
// the sandbox directories it made.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	boxes := make([]*sbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		boxes = append(boxes, sb)
		sb.state = stateKilled
		sb.stopTimer()
	}
	s.notifyLocked()
	s.mu.Unlock()
	for _, sb := range boxes {
		sb.killAll()
	}
	s.api.CloseClientConnections()
	s.envd.CloseClientConnections()
	s.api.Close()
	s.envd.Close()
	for _, sb := range boxes {
		os.RemoveAll(sb.dir)
	}
	if s.owned {
		os.RemoveAll(s.dir)
	}
}

// Options returns the effective options.
func (s *Server) Options() Options { return s.opts }

// URL is the control plane base (E2B_API_URL).
func (s *Server) URL() string { return s.api.URL }

// SandboxURL is the envd base (E2B_SANDBOX_URL); requests to it name
// their sandbox in the E2b-Sandbox-Id and E2b-Sandbox-Port headers.
func (s *Server) SandboxURL() string { return s.envd.URL }

// Vanish makes a sandbox disappear out of band, as when the provider
// loses it: its processes die, its files go, later GETs answer 404 and
// envd 502.
func (s *Server) Vanish(id string) {
	s.mu.Lock()
	sb := s.sandboxes[id]
	if sb != nil {
		delete(s.sandboxes, id)
		sb.state = stateKilled
		sb.stopTimer()
	}
	s.notifyLocked()
	s.mu.Unlock()
	if sb != nil {
		sb.killAll()
		os.RemoveAll(sb.dir)
	}
}

// Expire runs out a sandbox's TTL now: it is paused when it was created
// with autoPause, else killed.
func (s *Server) Expire(id string) {
	s.expire(id, 0)
}

// Backdate moves a sandbox's start d into the past, so sweepers' age
// checks can be tested without waiting.
func (s *Server) Backdate(id string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.sandboxes[id]; sb != nil {
		sb.startedAt = sb.startedAt.Add(-d)
	}
}

// SetDown makes every request on both listeners answer 503 with reason as
// the error message, as during a provider outage. "" restores service.
func (s *Server) SetDown(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = reason
}

// Fail answers the next times requests whose method is method (""
// matches any) and whose path starts with pathPrefix with status, the
// provider's error body for it and the given extra headers (Retry-After
// for a 429, say). Faults apply to both listeners, in the order added.
func (s *Server) Fail(method, pathPrefix string, status, times int, header http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{method: method, prefix: pathPrefix, status: status, times: times, header: header.Clone()})
}

// Sandboxes lists the sandboxes that exist (running or paused), in no
// particular order.
func (s *Server) Sandboxes() []SandboxInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]SandboxInfo, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		out = append(out, sb.info())
	}
	return out
}

// Calls returns every request received so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Call, len(s.calls))
	for i, c := range s.calls {
		out[i] = *c
	}
	return out
}

// ResetCalls forgets the calls recorded so far.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// WaitFor blocks until cond holds, re-evaluating it after every change
// (request, state change), or until ctx ends.
func (s *Server) WaitFor(ctx context.Context, cond func(s *Server) bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond(s) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fakee2b: condition never held: %w", ctx.Err())
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wrap records calls and applies outages and injected faults before the
// real handler.
func (s *Server) wrap(service string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := Call{Service: service, Method: r.Method, Path: r.URL.Path}
		if service == "envd" {
			call.Sandbox, _ = routeSandbox(r)
		}
		rec := &fakehttp.StatusRecorder{ResponseWriter: w}
		s.mu.Lock()
		down := s.down
		var f *fault
		if down == "" {
			for _, c := range s.faults {
				if c.times > 0 && (c.method == "" || c.method == r.Method) && strings.HasPrefix(r.URL.Path, c.prefix) {
					c.times--
					f = c
					break
				}
			}
		}
		rc := &call
		s.calls = append(s.calls, rc)
		s.notifyLocked()
		s.mu.Unlock()
		switch {
		case down != "":
			errorFor(rec, r, service, http.StatusServiceUnavailable, down)
		case f != nil:
			for k, v := range f.header {
				rec.Header()[k] = v
			}
			errorFor(rec, r, service, f.status, "injected fault: "+http.StatusText(f.status))
		default:
			ctx := context.WithValue(r.Context(), callKey{}, rc)
			h.ServeHTTP(rec, r.WithContext(ctx))
		}
		s.mu.Lock()
		rc.Status = rec.Status
		s.notifyLocked()
		s.mu.Unlock()
	})
}

type callKey struct{}

// recordArgs notes a Start request's process on its recorded call.
func (s *Server) recordArgs(r *http.Request, args []string) {
	rc, ok := r.Context().Value(callKey{}).(*Call)
	if !ok {
		return
	}
	s.mu.Lock()
	rc.Args = args
	s.mu.Unlock()
}

// errorFor writes the error body the service would: the control plane's
// {"code":int,"message"}, the proxy's 502, or a Connect error.
func errorFor(w http.ResponseWriter, r *http.Request, service string, status int, msg string) {
	switch {
	case service == "envd" && status == http.StatusBadGateway:
		id, _ := routeSandbox(r)
		proxyNotFound(w, id)
	case service == "envd" && strings.HasPrefix(r.URL.Path, "/process."):
		connectError(w, status, connectCode(status), msg)
	default:
		apiError(w, status, msg)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

func proxyNotFound(w http.ResponseWriter, id string) {
	writeJSON(w, http.StatusBadGateway, map[string]any{"sandboxId": id, "message": "The sandbox was not found", "code": 502})
}

func connectError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"code": code, "message": msg})
}

// connectCode maps an HTTP status to the Connect code that produces it.
func connectCode(status int) string {
	switch status {
	case 400:
		return "invalid_argument"
	case 401:
		return "unauthenticated"
	case 403:
		return "permission_denied"
	case 404:
		return "not_found"
	case 409:
		return "aborted"
	case 429:
		return "resource_exhausted"
	case 499:
		return "canceled"
	case 501:
		return "unimplemented"
	case 503:
		return "unavailable"
	case 504:
		return "deadline_exceeded"
	}
	return "internal"
}

// newID returns a sandbox ID: 20 characters of [a-z0-9].
func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// newToken returns an envd access token.
func newToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}
