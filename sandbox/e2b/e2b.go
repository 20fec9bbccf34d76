// Package e2b is the sandbox backend that runs each session in an E2B
// cloud sandbox (a Firecracker microVM), over plain net/http: E2B's
// control plane for the lifecycle and envd, the daemon inside the
// sandbox, for commands (Connect-JSON process.Process/Start with
// hand-written framing) and files.
//
// What a session gets, and why:
//   - one sandbox per session from Options.Template, kept across turns,
//     with metadata sandbot.managed=true, sandbot.session and
//     sandbot.deployment so Sweep can find sandboxes whose session is gone;
//   - a wall-clock TTL (E2B has no idle timer) that every Exec, Import and
//     Export pushes forward, created with autoPause, so a session left idle
//     is paused (kept, billed as storage), not killed;
//   - commands see HOME (the workspace), LANG and TERM on top of what envd
//     sets (PATH, USER, LOGNAME); nothing from the worker's environment.
//
// envd signals single pids, so every command runs in its own process
// group (sandbox.GroupWrapper) and a timeout or cancellation kills that
// group with a second command (sandbox.GroupKill) besides signalling the
// wrapper, so background children die with the command.
//
// The envd access token never leaves worker memory: the Handle holds only
// the sandbox ID, and a backend that has no token for it (a new worker
// process) reads it again from GET /sandboxes/{id}, or from connect for a
// paused sandbox. A paused sandbox is still Alive; Exec, Import, Export
// and Fingerprint resume it on demand.
package e2b

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Name is the backend's registry name.
const Name = "e2b"

// Defaults for zero Options fields.
const (
	DefaultAPIURL     = "https://api.e2b.app"
	DefaultKeySetting = "E2B_API_KEY"
	DefaultDomain     = "e2b.app"
	DefaultTemplate   = "base"
	DefaultUser       = "user"
	DefaultWorkdir    = "/home/user/workspace"
	DefaultTTL        = 15 * time.Minute
	DefaultTimeout    = session.DefaultCommandTimeout
	DefaultMinBackoff = 200 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// Metadata keys every sandbox of this backend carries.
const (
	LabelManaged    = "sandbot.managed"
	LabelSession    = "sandbot.session"
	LabelDeployment = "sandbot.deployment"
)

// Options configures a Backend. Zero values mean the documented defaults.
type Options struct {
	// APIURL is the control plane (default DefaultAPIURL).
	APIURL string
	// APIKey is sent as X-API-Key; required.
	APIKey string
	// KeySetting names the variable holding APIKey in auth errors
	// (default DefaultKeySetting).
	KeySetting string
	// Domain is where sandboxes live when the API names none: envd is
	// reached at https://49983-<id>.<domain> (default DefaultDomain).
	Domain string
	// SandboxURL overrides the envd base (E2B_SANDBOX_URL); requests then
	// name their sandbox in the E2b-Sandbox-Id and E2b-Sandbox-Port
	// headers, as E2B's proxy accepts.
	SandboxURL string
	// Template is the sandbox template (default DefaultTemplate).
	Template string
	// User is the Linux user commands run as (default DefaultUser).
	User string
	// Workdir is the workspace inside the sandbox (default
	// DefaultWorkdir), created by Create.
	Workdir string
	// TTL is the sandbox's wall-clock lifetime from its last activity
	// (default DefaultTTL). When it runs out the sandbox is paused.
	TTL time.Duration
	// Deployment is written to every sandbox's sandbot.deployment, and
	// Sweep only removes sandboxes of this deployment; empty means Sweep
	// removes nothing.
	Deployment string
	// Labels are added to every sandbox's metadata (Spec.Labels and the
	// backend's own keys take precedence).
	Labels map[string]string
	// DefaultTimeout applies to commands without their own (default
	// DefaultTimeout).
	DefaultTimeout time.Duration
	// DefaultOutputCap bounds each stream of commands without their own
	// cap (default sandbox.DefaultOutputCap).
	DefaultOutputCap int
	// HTTPClient makes every request (default a client without a timeout:
	// commands stream for as long as they run, and ctx bounds each call).
	HTTPClient *http.Client
	// Logger receives lifecycle events (default slog.Default()).
	Logger *slog.Logger

	// MinBackoff and MaxBackoff bound the waits between retries of 409s,
	// 429s without Retry-After, and outages (defaults DefaultMinBackoff,
	// DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// Sleep replaces the retry wait (tests record the waits instead of
	// taking them). It must return ctx.Err() when ctx ends first.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Backend runs sessions in E2B sandboxes. It is safe for concurrent use.
type Backend struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	conns map[string]*envd // sandbox ID → envd access, in memory only
}

// envd is how to reach one sandbox's envd. The token is a secret: it is
// kept here and never put in a Handle.
type envd struct {
	id, base, token string
	headers         bool // route with E2b-Sandbox-Id/-Port headers
	refreshed       time.Time
}

func (e *envd) authorize(req *http.Request, user string) {
	if e.token != "" {
		req.Header.Set("X-Access-Token", e.token)
	}
	req.Header.Set("Authorization", basicUser(user))
	if e.headers {
		req.Header.Set("E2b-Sandbox-Id", e.id)
		req.Header.Set("E2b-Sandbox-Port", envdPort)
	}
}

var (
	_ sandbox.Backend       = (*Backend)(nil)
	_ sandbox.Suspender     = (*Backend)(nil)
	_ sandbox.Fingerprinter = (*Backend)(nil)
	_ sandbox.Checker       = (*Backend)(nil)
)

// New validates opts and returns a backend. It makes no network call.
func New(opts Options) (*Backend, error) {
	if opts.KeySetting == "" {
		opts.KeySetting = DefaultKeySetting
	}
	if opts.APIKey == "" {
		return nil, fmt.Errorf("e2b: %s is not set", opts.KeySetting)
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&opts.APIURL, DefaultAPIURL)
	def(&opts.Domain, DefaultDomain)
	def(&opts.Template, DefaultTemplate)
	def(&opts.User, DefaultUser)
	def(&opts.Workdir, DefaultWorkdir)
	opts.APIURL = strings.TrimRight(opts.APIURL, "/")
	opts.SandboxURL = strings.TrimRight(opts.SandboxURL, "/")
	if !strings.HasPrefix(opts.Workdir, "/") || strings.ContainsAny(opts.Workdir, "\x00\n") {
		return nil, fmt.Errorf("e2b: workdir %q must be an absolute path", opts.Workdir)
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.TTL < time.Second {
		return nil, fmt.Errorf("e2b: TTL %v must be at least a second", opts.TTL)
	}
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = DefaultTimeout
	}
	if opts.DefaultOutputCap <= 0 {
		opts.DefaultOutputCap = sandbox.DefaultOutputCap
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Backend{opts: opts, log: opts.Logger, conns: map[string]*envd{}}, nil
}

// Name returns "e2b".
func (b *Backend) Name() string { return Name }

// ttlSeconds is the TTL as the API takes it.
func (b *Backend) ttlSeconds() int64 {
	return int64((b.opts.TTL + time.Second - 1) / time.Second)
}

// sandboxJSON is the API's Sandbox (create, connect) and the part of
// SandboxDetail (get, list) the backend reads.
type sandboxJSON struct {
	SandboxID       string            `json:"sandboxID"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken"`
	Domain          *string           `json:"domain"`
	State           string            `json:"state"`
	StartedAt       time.Time         `json:"startedAt"`
	Metadata        map[string]string `json:"metadata"`
}

// remember keeps envd access for a sandbox from a create, connect or get
// answer, stamped as refreshed now (each of those sets the TTL, except a
// get, whose caller refreshes it).
func (b *Backend) remember(id string, s sandboxJSON) *envd {
	e := &envd{id: id, token: s.EnvdAccessToken, refreshed: time.Now()}
	if b.opts.SandboxURL != "" {
		e.base, e.headers = b.opts.SandboxURL, true
	} else {
		domain := b.opts.Domain
		if s.Domain != nil && *s.Domain != "" {
			domain = *s.Domain
		}
		e.base = "https://" + envdPort + "-" + id + "." + domain
	}
	b.mu.Lock()
	b.conns[id] = e
	b.mu.Unlock()
	return e
}

func (b *Backend) forget(id string) {
	b.mu.Lock()
	delete(b.conns, id)
	b.mu.Unlock()
}

func (b *Backend) sandboxID(op string, h sandbox.Handle) (string, error) {
	if h.Backend != Name || h.ID == "" || strings.ContainsAny(h.ID, "/?#%") {
		return "", fmt.Errorf("e2b: %s: handle %q/%q is not an e2b sandbox", op, h.Backend, h.ID)
	}
	return h.ID, nil
}

func (b *Backend) workdir(h sandbox.Handle) string {
	if h.Workdir != "" {
		return h.Workdir
	}
	return b.opts.Workdir
}

// Create makes a sandbox with an empty workspace.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	md := map[string]string{}
	for k, v := range b.opts.Labels {
		md[k] = v
	}
	for k, v := range spec.Labels {
		md[k] = v
	}
	md[LabelManaged] = "true"
	md[LabelSession] = spec.SessionID
	if b.opts.Deployment != "" {
		md[LabelDeployment] = b.opts.Deployment
	}
	body := map[string]any{
		"templateID": b.opts.Template,
		"timeout":    b.ttlSeconds(),
		"autoPause":  true,
		"secure":     true,
		"metadata":   md,
	}
	var s sandboxJSON
	if _, err := b.call(ctx, &request{op: "create", method: http.MethodPost, path: "/sandboxes", json: body}, &s); err != nil {
		return sandbox.Handle{}, err
	}
	if s.SandboxID == "" || strings.ContainsAny(s.SandboxID, "/?#%") {
		return sandbox.Handle{}, fmt.Errorf("e2b: create: the API returned sandbox ID %q", s.SandboxID)
	}
	b.remember(s.SandboxID, s)
	h := sandbox.Handle{Backend: Name, ID: s.SandboxID, SessionID: spec.SessionID, Workdir: b.opts.Workdir}
	code, out, err := b.helper(ctx, "create: make workspace", s.SandboxID, []string{"mkdir", "-p", "--", b.opts.Workdir}, "/", nil)
	if err == nil && code != 0 {
		err = fmt.Errorf("e2b: create: make workspace: exit status %d: %s", code, out)
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := b.Destroy(cctx, h); derr != nil {
			b.log.Warn("e2b: cannot remove a sandbox whose setup failed", "sandbox", h.ID, "error", derr)
		}
		return sandbox.Handle{}, err
	}
	b.log.Info("e2b: created sandbox", "sandbox", h.ID, "workflow_id", spec.SessionID)
	return h, nil
}

// cleanupTimeout bounds work that must happen after the caller's context
// ended (killing a command, removing a temporary file).
const cleanupTimeout = 30 * time.Second

// get reads a sandbox's detail; a 404 becomes ErrNotFound.
func (b *Backend) get(ctx context.Context, op, id string) (sandboxJSON, error) {
	var s sandboxJSON
	_, err := b.call(ctx, &request{op: op, method: http.MethodGet, path: "/sandboxes/" + id}, &s)
	if isStatus(err, http.StatusNotFound) {
		return s, notFound(op, id, err)
	}
	return s, err
}

// connect resumes a paused sandbox (or extends a running one's TTL) and
// keeps the token and domain it answers with.
func (b *Backend) connect(ctx context.Context, op, id string) (*envd, error) {
	var s sandboxJSON
	_, err := b.call(ctx, &request{op: op + ": connect", method: http.MethodPost, path: "/sandboxes/" + id + "/connect",
		json: map[string]any{"timeout": b.ttlSeconds()}, conflictRetry: true}, &s)
	if isStatus(err, http.StatusNotFound) {
		b.forget(id)
		return nil, notFound(op, id, err)
	}
	if err != nil {
		return nil, err
	}
	return b.remember(id, s), nil
}

// refreshTTL pushes the sandbox's end back by a TTL.
func (b *Backend) refreshTTL(ctx context.Context, op string, e *envd) error {
	_, err := b.call(ctx, &request{op: op + ": refresh timeout", method: http.MethodPost, path: "/sandboxes/" + e.id + "/timeout",
		json: map[string]any{"timeout": b.ttlSeconds()}}, nil)
	if err != nil {
		return err
	}
	b.mu.Lock()
	e.refreshed = time.Now()
	b.mu.Unlock()
	return nil
}

// ready returns envd access to a running sandbox, refreshing its TTL when
// more than a quarter of it has passed since the last refresh (so a busy
// session costs one extra call per TTL/4, not one per command), resuming
// it when paused, and re-reading the token when this process has none.
func (b *Backend) ready(ctx context.Context, op, id string) (*envd, error) {
	b.mu.Lock()
	e := b.conns[id]
	fresh := e != nil && time.Since(e.refreshed) < b.opts.TTL/4
	b.mu.Unlock()
	if fresh {
		return e, nil
	}
	if e != nil {
		err := b.refreshTTL(ctx, op, e)
		if err == nil {
			return e, nil
		}
		if !isStatus(err, http.StatusNotFound) {
			return nil, err
		}
		// Not running (paused by its TTL, or gone): look.
	}
	return b.revive(ctx, op, id)
}

// revive finds out what became of a sandbox and makes it usable: a paused
// one is resumed, a running one's token re-read and TTL refreshed, a
// missing one is ErrNotFound.
func (b *Backend) revive(ctx context.Context, op, id string) (*envd, error) {
	b.forget(id)
	s, err := b.get(ctx, op, id)
	if err != nil {
		return nil, err
	}
	switch s.State {
	case "running":
		e := b.remember(id, s)
		if err := b.refreshTTL(ctx, op, e); err != nil {
			if isStatus(err, http.StatusNotFound) {
				return b.connect(ctx, op, id)
			}
			return nil, err
		}
		return e, nil
	default: // paused, or pausing on its way there: connect waits it out
		return b.connect(ctx, op, id)
	}
}

// sendEnvd sends an envd request, reviving the sandbox once when the
// proxy says it is not running or envd refuses a stale token.
func (b *Backend) sendEnvd(ctx context.Context, op, id string, mk func(e *envd) *request) (*http.Response, *envd, error) {
	e, err := b.ready(ctx, op, id)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		resp, err := b.send(ctx, mk(e))
		if err == nil {
			return resp, e, nil
		}
		var ae *apiError
		if !errors.As(err, &ae) || attempt >= 2 || !(ae.gone || ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden) {
			if errors.As(err, &ae) && ae.status == http.StatusUnauthorized {
				return nil, nil, fmt.Errorf("e2b: %s: envd refused the sandbox's access token: %w", op, err)
			}
			return nil, nil, err
		}
		if e, err = b.revive(ctx, op, id); err != nil {
			return nil, nil, err
		}
	}
}

// Destroy kills the sandbox. One that is already gone is not an error.
func (b *Backend) Destroy(ctx context.Context, h sandbox.Handle) error {
	id, err := b.sandboxID("destroy", h)
	if err != nil {
		return err
	}
	_, err = b.call(ctx, &request{op: "destroy", method: http.MethodDelete, path: "/sandboxes/" + id, conflictRetry: true}, nil)
	if err != nil && !isStatus(err, http.StatusNotFound) {
		return err
	}
	b.forget(id)
	return nil
}

// Alive reports whether the sandbox exists: running or paused (which
// commands resume) is alive, a 404 is not.
func (b *Backend) Alive(ctx context.Context, h sandbox.Handle) (bool, error) {
	id, err := b.sandboxID("alive", h)
	if err != nil {
		return false, err
	}
	s, err := b.get(ctx, "alive", id)
	if errors.Is(err, sandbox.ErrNotFound) {
		b.forget(id)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch s.State {
	case "running", "paused", "pausing", "snapshotting":
		return true, nil
	}
	return false, nil
}

// Suspend pauses the sandbox: its files (and on E2B its memory) are kept
// and it stops costing compute. Pausing a paused sandbox is not an error.
func (b *Backend) Suspend(ctx context.Context, h sandbox.Handle) error {
	id, err := b.sandboxID("suspend", h)
	if err != nil {
		return err
	}
	b.forget(id)
	_, err = b.call(ctx, &request{op: "suspend", method: http.MethodPost, path: "/sandboxes/" + id + "/pause"}, nil)
	switch {
	case isStatus(err, http.StatusConflict):
		return nil // already paused (or pausing)
	case isStatus(err, http.StatusNotFound):
		return notFound("suspend", id, err)
	}
	return err
}

// Resume starts a paused sandbox again (a running one just gets its TTL
// extended) and re-reads its envd token.
func (b *Backend) Resume(ctx context.Context, h sandbox.Handle) error {
	id, err := b.sandboxID("resume", h)
	if err != nil {
		return err
	}
	_, err = b.connect(ctx, "resume", id)
	return err
}

// Check makes one cheap authenticated call (list one sandbox): nil, or an
// error wrapping ErrUnauthenticated or ErrUnavailable.
func (b *Backend) Check(ctx context.Context) error {
	_, err := b.call(ctx, &request{op: "check", method: http.MethodGet, path: "/v2/sandboxes",
		query: map[string][]string{"limit": {"1"}}}, nil)
	return err
}
