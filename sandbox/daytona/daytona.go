// Package daytona is the sandbox backend that runs each session in its own
// Daytona cloud sandbox, over the provider's HTTP APIs with net/http alone:
// the control plane (create, get, list, start, stop, delete) and the
// in-sandbox toolbox daemon (process execution and files), reached through
// the toolbox proxy the sandbox's DTO names.
//
// What a sandbox gets, and why:
//   - one sandbox per session, kept across turns, labelled
//     sandbot.managed=true, sandbot.session=<session ID> and
//     sandbot.deployment=<Options.Deployment>, so Sweep can find the
//     sandboxes of this deployment whose session is gone;
//   - an explicit autoStopInterval (Options.AutoStop, default 15 min): the
//     provider stops an idle sandbox on its own, which keeps its files and
//     costs only storage; autoDeleteInterval -1, because deleting is ours
//     to decide (Destroy, Sweep); autoArchiveInterval is left to the
//     server (7 days), since start restores an archived sandbox anyway;
//   - commands see HOME (the workspace), LANG and TERM on top of the
//     sandbox's own environment; nothing from the worker's.
//
// The toolbox cannot signal a command, and session exec returns whole
// logs, so Exec starts every command detached in a toolbox session with
// sandbox.GroupWrapper (its own process group, recorded in a pid file),
// its stdout and stderr redirected to files in the sandbox, and polls its
// status. A timeout or a cancellation kills the group with
// sandbox.GroupKill through a second call, and deletes the session. Only
// the head and the tail of each output file that the output cap keeps are
// downloaded, so a command that prints gigabytes costs the worker no more
// than the cap.
//
// A stopped or archived sandbox (Suspend, the provider's auto-stop) is
// still Alive: Exec, Import, Export and Fingerprint start it on demand.
// No secret is kept in the Handle: the API key lives in Options, and the
// toolbox proxy URL (not a secret) is re-read from the control plane when
// the handle lacks it.
package daytona

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Name is the backend's registry name.
const Name = "daytona"

// Defaults for zero Options fields.
const (
	DefaultAPIURL     = "https://app.daytona.io/api"
	DefaultKeySetting = "DAYTONA_API_KEY"
	DefaultWorkdir    = "/home/daytona/workspace"
	DefaultAutoStop   = 15 * time.Minute
)

// Labels every sandbox of this backend carries.
const (
	LabelManaged    = "sandbot.managed"
	LabelSession    = "sandbot.session"
	LabelDeployment = "sandbot.deployment"
)

// Handle.Meta keys.
const (
	metaName    = "name"
	metaToolbox = "toolbox_url"
)

// Options configures a Backend. Zero values mean the documented defaults.
type Options struct {
	// APIURL is the control-plane base (default DefaultAPIURL).
	APIURL string
	// APIKey is the Daytona API key, sent as a Bearer token. Required.
	APIKey string
	// KeySetting names the variable holding APIKey, for the message of a
	// refused key (default DefaultKeySetting).
	KeySetting string
	// Target is the region; "" means the organization's default.
	Target string
	// Snapshot is the Daytona snapshot sandboxes are created from; "" means
	// the server's default. Mutually exclusive with Image.
	Snapshot string
	// Image, instead of a snapshot, is an image the provider builds the
	// sandbox from ("FROM <Image>").
	Image string
	// Workdir is the workspace path inside the sandbox (default
	// DefaultWorkdir).
	Workdir string
	// AutoStop is the provider's idle timer, sent as autoStopInterval in
	// whole minutes, rounded up (default DefaultAutoStop; negative turns
	// auto-stop off).
	AutoStop time.Duration
	// Deployment is the value of the sandbot.deployment label. Sweep only
	// removes sandboxes of its own deployment, and none when it is empty.
	Deployment string
	// Labels are added to every sandbox.
	Labels map[string]string
	// DefaultTimeout applies to commands without a timeout (default
	// session.DefaultCommandTimeout, as for every backend).
	DefaultTimeout time.Duration
	// DefaultOutputCap applies to commands without an output cap (default
	// sandbox.DefaultOutputCap).
	DefaultOutputCap int
	// HTTPClient sends every request (default: a client without an overall
	// timeout, since a command may run for long; contexts bound each call).
	HTTPClient *http.Client
	// Logger receives retries and clean-up failures (default
	// slog.Default()).
	Logger *slog.Logger

	// PollInterval is the first wait between polls of a sandbox's state or
	// a command's status; it grows to MaxPollInterval (defaults 100 ms
	// and 1 s).
	PollInterval, MaxPollInterval time.Duration
	// RetryMin and RetryMax bound the backoff between retries of 409, 5xx
	// and connection failures (defaults 250 ms and 5 s).
	RetryMin, RetryMax time.Duration
	// Retries is how often a 5xx or a connection failure is retried
	// (default 4).
	Retries int
	// Sleep waits between retries and state polls (default: a timer that
	// ends with ctx). Tests inject one to observe or shorten waits.
	Sleep func(ctx context.Context, d time.Duration) error
	// StartTimeout bounds waiting for a sandbox to become started or
	// stopped (default 5 min), on top of the caller's context.
	StartTimeout time.Duration
}

// Backend drives Daytona sandboxes. It is safe for concurrent use.
type Backend struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	toolbox map[string]string // sandbox id → toolbox proxy URL
}

// New validates opts and returns a Backend. It makes no request.
func New(opts Options) (*Backend, error) {
	if opts.APIKey == "" {
		ks := opts.KeySetting
		if ks == "" {
			ks = DefaultKeySetting
		}
		return nil, fmt.Errorf("daytona: an API key is required (%s)", ks)
	}
	if opts.Snapshot != "" && opts.Image != "" {
		return nil, errors.New("daytona: Snapshot and Image are mutually exclusive; set one of them")
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&opts.APIURL, DefaultAPIURL)
	def(&opts.KeySetting, DefaultKeySetting)
	def(&opts.Workdir, DefaultWorkdir)
	opts.APIURL = strings.TrimRight(opts.APIURL, "/")
	if u, err := url.Parse(opts.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("daytona: API URL %q is not an http(s) URL", opts.APIURL)
	}
	if !strings.HasPrefix(opts.Workdir, "/") {
		return nil, fmt.Errorf("daytona: workdir %q is not absolute", opts.Workdir)
	}
	if opts.AutoStop == 0 {
		opts.AutoStop = DefaultAutoStop
	}
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = session.DefaultCommandTimeout
	}
	if opts.DefaultOutputCap <= 0 {
		opts.DefaultOutputCap = sandbox.DefaultOutputCap
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	durDef := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	durDef(&opts.PollInterval, 100*time.Millisecond)
	durDef(&opts.MaxPollInterval, time.Second)
	durDef(&opts.RetryMin, 250*time.Millisecond)
	durDef(&opts.RetryMax, 5*time.Second)
	durDef(&opts.StartTimeout, 5*time.Minute)
	if opts.Retries <= 0 {
		opts.Retries = 4
	}
	if opts.Sleep == nil {
		opts.Sleep = sleepCtx
	}
	opts.Labels = maps.Clone(opts.Labels)
	return &Backend{opts: opts, log: opts.Logger, toolbox: map[string]string{}}, nil
}

// Name returns Name.
func (b *Backend) Name() string { return Name }

// dto is the part of the Sandbox object the backend reads.
type dto struct {
	ID              string            `json:"id"`
	Name            string            `json:"name"`
	State           string            `json:"state"`
	ErrorReason     string            `json:"errorReason"`
	ToolboxProxyURL string            `json:"toolboxProxyUrl"`
	Labels          map[string]string `json:"labels"`
	CreatedAt       time.Time         `json:"createdAt"`
}

type buildInfo struct {
	DockerfileContent string `json:"dockerfileContent"`
}

type createBody struct {
	Name               string            `json:"name"`
	Snapshot           string            `json:"snapshot,omitempty"`
	BuildInfo          *buildInfo        `json:"buildInfo,omitempty"`
	Target             string            `json:"target,omitempty"`
	Labels             map[string]string `json:"labels"`
	AutoStopInterval   int               `json:"autoStopInterval"`
	AutoDeleteInterval int               `json:"autoDeleteInterval"`
}

// sandboxName is unique per Create (Daytona names must be unique within
// an organization) and still tells whose it is at a glance: a short hash
// of the session and random bytes, since a session may recreate its
// sandbox while the old one is being deleted.
func sandboxName(session string) string {
	return "sandbot-" + shortHash(session) + "-" + sandbox.RandomHex(4)
}

// Create makes a sandbox for the session, waits until it has started, and
// creates the empty workspace.
func (b *Backend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	labels := maps.Clone(b.opts.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, spec.Labels)
	labels[LabelManaged] = "true"
	labels[LabelSession] = spec.SessionID
	if b.opts.Deployment != "" {
		labels[LabelDeployment] = b.opts.Deployment
	}
	body := createBody{
		Name: sandboxName(spec.SessionID), Snapshot: b.opts.Snapshot, Target: b.opts.Target, Labels: labels,
		AutoStopInterval: autoStopMinutes(b.opts.AutoStop), AutoDeleteInterval: -1,
	}
	if b.opts.Image != "" {
		body.BuildInfo = &buildInfo{DockerfileContent: "FROM " + b.opts.Image}
	}
	req := b.api("create", http.MethodPost, "/sandbox")
	req.in = body
	var sb dto
	err := b.call(ctx, req, &sb)
	if statusOf(err) == http.StatusConflict {
		// A retried create whose first attempt went through.
		sb, err = b.get(ctx, "create", body.Name)
	}
	if err != nil {
		return sandbox.Handle{}, err
	}
	b.remember(sb)
	h := sandbox.Handle{
		Backend: Name, ID: sb.ID, SessionID: spec.SessionID, Workdir: b.opts.Workdir,
		Meta: map[string]string{metaName: sb.Name, metaToolbox: sb.ToolboxProxyURL},
	}
	if _, err := b.ensureStarted(ctx, "create: wait for start", sb.ID); err != nil {
		b.destroyAfterFailure(ctx, h)
		return sandbox.Handle{}, err
	}
	if code, out, err := b.sh(ctx, h, "create: make workspace", time.Minute, `mkdir -p -- "$1"`, h.Workdir); err != nil || code != 0 {
		b.destroyAfterFailure(ctx, h)
		if err == nil {
			err = fmt.Errorf("daytona: create: make workspace: exit status %d: %s", code, strings.TrimSpace(out))
		}
		return sandbox.Handle{}, err
	}
	b.log.Info("daytona: created sandbox", "sandbox", sb.ID, "name", sb.Name, "workflow_id", spec.SessionID)
	return h, nil
}

// autoStopMinutes rounds d up to whole minutes; negative means off (0).
func autoStopMinutes(d time.Duration) int {
	if d < 0 {
		return 0
	}
	return int((d + time.Minute - 1) / time.Minute)
}

// destroyAfterFailure removes a sandbox Create could not finish, so it
// does not cost anything until Sweep finds it.
func (b *Backend) destroyAfterFailure(ctx context.Context, h sandbox.Handle) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := b.Destroy(cctx, h); err != nil {
		b.log.Warn("daytona: cannot remove a sandbox whose creation failed", "sandbox", h.ID, "error", err)
	}
}

// cleanupTimeout bounds clean-up calls made after the caller's context
// ended (killing a command, deleting its session and temporary files).
const cleanupTimeout = 30 * time.Second

// get reads a sandbox; a 404 wraps sandbox.ErrNotFound.
func (b *Backend) get(ctx context.Context, op, idOrName string) (dto, error) {
	var sb dto
	err := b.call(ctx, b.api(op, http.MethodGet, "/sandbox/"+url.PathEscape(idOrName)), &sb)
	if statusOf(err) == http.StatusNotFound {
		return dto{}, &userError{
			msg:      fmt.Sprintf("daytona: %s: the sandbox %s is gone", op, idOrName),
			sentinel: sandbox.ErrNotFound, cause: err,
		}
	}
	if err == nil {
		b.remember(sb)
	}
	return sb, err
}

// remember keeps the toolbox URL of a sandbox seen in a DTO.
func (b *Backend) remember(sb dto) {
	if sb.ID == "" || sb.ToolboxProxyURL == "" {
		return
	}
	b.mu.Lock()
	b.toolbox[sb.ID] = strings.TrimRight(sb.ToolboxProxyURL, "/")
	b.mu.Unlock()
}

// gone reports states a sandbox does not come back from by itself.
func gone(state string) bool {
	switch state {
	case "destroyed", "destroying", "error", "build_failed":
		return true
	}
	return false
}

// notFound is the error for a sandbox that cannot be used again: the
// session recreates it from its snapshot.
func notFound(op string, sb dto) error {
	msg := fmt.Sprintf("daytona: %s: the sandbox %s is %s", op, sb.ID, sb.State)
	if sb.ErrorReason != "" {
		msg += ": " + sb.ErrorReason
	}
	return &userError{msg: msg, sentinel: sandbox.ErrNotFound, cause: errors.New(sb.State)}
}

// ensureStarted waits until the sandbox is started, starting it when it is
// stopped, paused or archived, and returns its DTO.
func (b *Backend) ensureStarted(ctx context.Context, op, id string) (dto, error) {
	return b.waitState(ctx, op, id, "started")
}

// waitState polls the sandbox until it is in want ("started" or
// "stopped"), asking for the change when the sandbox rests in another
// state. An archived or paused sandbox counts as stopped.
func (b *Backend) waitState(ctx context.Context, op, id, want string) (dto, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	wait := b.opts.PollInterval
	asked := false
	for {
		sb, err := b.get(ctx, op, id)
		if err != nil {
			return dto{}, err
		}
		resting := false
		switch {
		case sb.State == want, want == "stopped" && (sb.State == "archived" || sb.State == "paused"):
			return sb, nil
		case gone(sb.State):
			return dto{}, notFound(op, sb)
		case sb.State == "stopped" || sb.State == "archived" || sb.State == "paused", sb.State == "started":
			resting = true
		}
		if resting && !asked {
			action := "start"
			if want == "stopped" {
				action = "stop"
			}
			err := b.call(ctx, b.api(op+": "+action, http.MethodPost, "/sandbox/"+url.PathEscape(id)+"/"+action), nil)
			if statusOf(err) == http.StatusNotFound {
				return dto{}, notFound(op, dto{ID: id, State: "destroyed"})
			}
			if err != nil {
				return dto{}, err
			}
			asked = true
			continue
		}
		if err := b.opts.Sleep(ctx, wait); err != nil {
			return dto{}, fmt.Errorf("daytona: %s: sandbox still %s: %w", op, sb.State, err)
		}
		wait = min(wait*11/10+time.Millisecond, b.opts.MaxPollInterval)
	}
}

// Alive reports whether the sandbox exists and can run commands, stopped
// or not. A destroyed sandbox, or one in error, is not: the session then
// recreates it from its snapshot rather than repair it.
func (b *Backend) Alive(ctx context.Context, h sandbox.Handle) (bool, error) {
	if h.ID == "" {
		return false, nil
	}
	sb, err := b.get(ctx, "alive", h.ID)
	if errors.Is(err, sandbox.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !gone(sb.State), nil
}

// Destroy deletes the sandbox; one that is already gone is no error.
func (b *Backend) Destroy(ctx context.Context, h sandbox.Handle) error {
	if h.ID == "" {
		return nil
	}
	err := b.call(ctx, b.api("destroy", http.MethodDelete, "/sandbox/"+url.PathEscape(h.ID)), nil)
	if statusOf(err) == http.StatusNotFound {
		err = nil
	}
	if err != nil {
		return err
	}
	b.mu.Lock()
	delete(b.toolbox, h.ID)
	b.mu.Unlock()
	return nil
}

// Suspend stops the sandbox, keeping its files, and waits until it has
// stopped.
func (b *Backend) Suspend(ctx context.Context, h sandbox.Handle) error {
	_, err := b.waitState(ctx, "suspend", h.ID, "stopped")
	return err
}

// Resume starts a stopped sandbox and waits until it has started.
func (b *Backend) Resume(ctx context.Context, h sandbox.Handle) error {
	_, err := b.ensureStarted(ctx, "resume", h.ID)
	return err
}

// Check makes one cheap authenticated call (a list of one sandbox): nil,
// or an error wrapping sandbox.ErrUnauthenticated or sandbox.ErrUnavailable.
func (b *Backend) Check(ctx context.Context) error {
	req := b.api("check", http.MethodGet, "/sandbox")
	req.query = url.Values{"limit": {"1"}}
	return b.call(ctx, req, nil)
}
