// Package config is the one place sandbot reads its settings. Every setting
// is an environment variable listed once in the registry (see Vars): its
// name, its default, which processes read it and what it means. The same
// registry drives loading and validation, and the README's configuration
// table documents it. Nothing outside cmd/ and config/ reads the
// environment: adapters and backends receive typed values and never see a
// variable name.
//
// Load never stops at a malformed value: it keeps the problem, and Validate
// reports it together with every other problem of the process's variables,
// each as "<variable>: what is wrong; use what is allowed".
package config

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sandbot/sandbot/session"
)

// Prefix is the environment prefix of every setting.
const Prefix = "SANDBOT"

// KnownBackends are the backend names sandbot implements.
var KnownBackends = []string{"local", "docker", "daytona", "e2b"}

// MaxCommandTimeoutCeiling is the longest command timeout a session may
// have: the sandbox's exec activities clamp every command to it
// (sandbox.MaxCommandTimeout, which a test of internal/workerapp pins to
// this value), so a longer SANDBOT_SESSION_MAX_COMMAND_TIMEOUT would be
// cut short silently. The session contract's default maximum is the
// ceiling itself; config defines no second number.
const MaxCommandTimeoutCeiling = session.CommandTimeoutCeiling

// DefaultIdleSuspend is how long a sandbox may idle before it is suspended
// (SANDBOT_SESSION_IDLE_SUSPEND). The session contract's zero means never,
// so the product default lives here.
const DefaultIdleSuspend = 30 * time.Minute

// DefaultSessionCache is how many sessions a worker process keeps in
// memory between turns (SANDBOT_SESSION_CACHE; Temporal's sticky workflow
// cache, whose own default is 10,000). An idle session held there costs
// its state: the transcript (up to Settings.TranscriptLimitBytes of text,
// about three times that in memory) and a few goroutines; one evicted
// replays its history (at most SANDBOT_SESSION_HISTORY_LIMIT, since
// continue-as-new bounds a run) on the worker that picks up its next task.
const DefaultSessionCache = 1000

// Config is every setting of every process. Fields are filled by Load from
// the registry; tests and cmd/dev may adjust them before Validate.
type Config struct {
	Temporal Temporal
	Model    Model
	Session  Session
	Sandbox  Sandbox
	Docker   Docker
	Daytona  Daytona
	E2B      E2B
	Slack    Slack
	Discord  Discord
	Dev      Dev
	Repos    Repos
	Attach   Attach
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// DecisionKey is the secret bot and worker share to sign and check
	// decisions (session.Sign): the worker accepts no update without it.
	DecisionKey string
	// MetricsAddr serves /metrics, /healthz and /readyz ("" disables).
	MetricsAddr string
	// DebugAddr serves net/http/pprof ("" disables). It must be a loopback
	// address: profiles show memory and goroutine stacks, and a heap or
	// CPU profile costs the process time, so they are for an operator on
	// the host (or a port-forward), never for the network.
	DebugAddr string
	// ConsoleUser is the terminal front end's user name (USER).
	ConsoleUser string

	// problems are the values Load could not parse, by variable name;
	// Validate reports those the validated process reads.
	problems map[string]string
}

// Temporal is how to reach the Temporal cluster.
type Temporal struct {
	// Address is host:port of the frontend.
	Address   string
	Namespace string
	// WebURL is the Temporal UI base, for /status links ("" leaves them out).
	WebURL string
	// TaskQueue for session workflows and the model activity; sandbox
	// queues derive from it.
	TaskQueue string
	// TLSCert and TLSKey are the client certificate for mTLS, TLSCA the
	// roots to verify the frontend with, TLSServerName the name to verify.
	TLSCert, TLSKey, TLSCA, TLSServerName string
	// APIKey authenticates to the frontend (implies TLS).
	APIKey string
}

// TLSEnabled reports whether the Temporal connection uses TLS.
func (t Temporal) TLSEnabled() bool {
	return t.TLSCert != "" || t.TLSCA != "" || t.TLSServerName != "" || t.APIKey != ""
}

// Model is the OpenAI-compatible chat-completions endpoint.
type Model struct {
	// BaseURL, e.g. https://api.openai.com/v1, http://localhost:11434/v1
	// (Ollama), http://vllm:8000/v1, or an Azure OpenAI /openai/v1 URL.
	BaseURL string
	// APIKey is sent as a Bearer token. Optional for local servers.
	APIKey string
	// Name is the model name.
	Name string
	// Stream uses streaming responses (heartbeats long generations).
	Stream bool
	// Vision sends attached images to the model as image parts, up to
	// VisionMaxBytes each.
	Vision         bool
	VisionMaxBytes Bytes
	// Timeout bounds one model call.
	Timeout time.Duration
	// Allowed are other models sessions may pick with /model.
	Allowed []string
	// PriceInput and PriceOutput are USD per million prompt and completion
	// tokens, for showing cost (0: tokens only).
	PriceInput, PriceOutput float64
	// Attempts bounds retries of retryable failures (429, 5xx, network).
	Attempts int
	// ContextTokens is the model's context window, AnswerTokens the part
	// of it kept for the answer.
	ContextTokens, AnswerTokens int
}

// Session is the session policy (read by the worker) plus the approvers
// the bot names when it starts a session.
type Session struct {
	// ApprovalMode is never, always or unless-readonly.
	ApprovalMode    string
	ApprovalTimeout time.Duration
	// Approvers are chat user IDs that may approve in every session,
	// besides each session's owner.
	Approvers         []string
	MaxToolCalls      int
	CommandTimeout    time.Duration
	MaxCommandTimeout time.Duration
	// HistoryLimit forces continue-as-new past this many bytes of history.
	HistoryLimit int
	// TranscriptLimit caps the transcript a session keeps in its state
	// (session.Policy.TranscriptLimitBytes).
	TranscriptLimit int
	// ExecHeartbeat is how long a dead worker mid-command goes unnoticed.
	ExecHeartbeat time.Duration
	// IdleSuspend suspends an idle sandbox after this long (0: never).
	IdleSuspend time.Duration
	// Checkpoints and CheckpointMaxAge bound the ends of turns a session
	// keeps (session.Policy).
	Checkpoints      int
	CheckpointMaxAge time.Duration
	// TokenBudget stops a session's turns once its model calls used this
	// many tokens (0: no budget).
	TokenBudget int
	// Cache is how many sessions a worker process keeps in memory between
	// their workflow tasks (Temporal's sticky workflow cache); the least
	// recently used is evicted past it and replays its history when it
	// wakes.
	Cache int
}

// Sandbox selects and configures sandbox backends.
type Sandbox struct {
	// Backends the worker serves (local, docker, ...).
	Backends []string
	// Default is the backend of new sessions.
	Default string
	// LocalRoot holds local workspaces (default: <data dir>/workspaces).
	LocalRoot string
	// LocalNetwork shares the host's network with local sandboxes.
	LocalNetwork bool
	// LocalUnconfined runs local sandbox commands without confinement.
	LocalUnconfined bool
	// SnapshotURL is a gocloud.dev/blob URL: file:///path or s3://bucket.
	SnapshotURL string
	// WorkspaceQuota bounds a session's workspace and any one file in it
	// (0: no limit).
	WorkspaceQuota Bytes
	// SnapshotMax bounds one stored, compressed snapshot (0: no limit).
	SnapshotMax Bytes
	// HostID names this worker host for host-bound sandboxes (default: the
	// hostname).
	HostID string
	// SingleHost says this is the only worker serving host-bound backends
	// (local, docker): sandbox activities then share the session task queue
	// and are dispatched eagerly. Never set it on more than one worker of a
	// deployment. cmd/dev always sets it.
	SingleHost bool
}

// Bytes is a size in bytes, written in the environment as a byte count or
// a number with k, m or g (1024-based), e.g. 512m or 1.5g.
type Bytes int64

// Docker configures the docker backend. Zero values take the backend's own
// defaults (package sandbox/docker owns them; the registry documents them).
type Docker struct {
	Image     string
	Network   string
	Cpus      float64
	Memory    Bytes
	PidsLimit int64
	User      string
	Workdir   string
	// PullMissing lets the worker pull a missing image.
	PullMissing bool
}

// Daytona configures the daytona backend, which a worker serves whenever
// APIKey is set. Zero values take the backend's defaults (package
// sandbox/daytona owns them; the registry documents them).
type Daytona struct {
	APIKey   string
	APIURL   string
	Target   string
	Snapshot string
	Image    string
	Workdir  string
	AutoStop time.Duration
}

// E2B configures the e2b backend, which a worker serves whenever APIKey is
// set. Zero values take the backend's defaults (package sandbox/e2b owns
// them; the registry documents them).
type E2B struct {
	APIKey     string
	APIURL     string
	Domain     string
	SandboxURL string
	Template   string
	Workdir    string
	TTL        time.Duration
}

// Backends is what this deployment runs: SANDBOT_SANDBOX_BACKENDS, plus
// each cloud backend whose API key is set. A worker serves them; a bot
// offers them (a bot rarely holds the keys, so it offers the cloud
// backends SANDBOT_SANDBOX_BACKENDS lists; cmd/dev holds both). Setting the key is how an
// operator turns a cloud backend on; listing one without its key is a
// configuration error (see the key variables' checks).
func (c *Config) Backends() []string {
	out := append([]string(nil), c.Sandbox.Backends...)
	for _, b := range []struct {
		name string
		key  string
	}{{"daytona", c.Daytona.APIKey}, {"e2b", c.E2B.APIKey}} {
		if b.key != "" && !slices.Contains(out, b.name) {
			out = append(out, b.name)
		}
	}
	return out
}

// Slack configures the Slack front end. It is enabled when BotToken is set.
// Zero pacing and size values take the adapter's defaults (package
// chat/slack owns them; the registry documents them).
type Slack struct {
	BotToken        string
	AppToken        string
	SigningSecret   string
	Mode            string
	ListenAddr      string
	AllowedChannels []string
	AllowedUsers    []string
	Approvers       []string
	RequireMention  bool
	APIBase         string
	EditInterval    time.Duration
	UpdateBudget    int
	UploadThreshold int
	Streaming       bool
}

// Discord configures the Discord front end. It is enabled when Token is set.
// A zero EditInterval takes the adapter's default.
type Discord struct {
	Token           string
	AppID           string
	GuildID         string
	AllowedGuilds   []string
	AllowedChannels []string
	AllowedUsers    []string
	AllowedRoles    []string
	ApproverRoles   []string
	MessageContent  bool
	EditInterval    time.Duration
	// RequestsPerSecond paces this replica's Discord REST requests
	// (discord.Config.RequestsPerSecond).
	RequestsPerSecond int
	APIBase           string
}

// Dev configures cmd/dev's embedded Temporal server.
type Dev struct {
	// DataDir holds the SQLite database, workspaces and snapshots.
	DataDir string
	// TemporalPort is the embedded frontend port.
	TemporalPort int
	// UIPort serves the Temporal UI when it is built in (0: off).
	UIPort int
}

// Load reads every registered variable from the environment. An unset or
// empty variable takes its default. A value that cannot be parsed leaves
// the field at its default and is kept as a problem, which Validate reports
// together with every other one, so one start-up shows everything to fix.
func Load() *Config {
	return load(os.LookupEnv)
}

func load(lookup func(string) (string, bool)) *Config {
	c := &Config{problems: map[string]string{}}
	for _, v := range registry {
		if v.field == nil {
			continue
		}
		raw, ok := lookup(v.Name)
		if !ok || raw == "" {
			raw = v.Default
		}
		if raw == "" {
			continue
		}
		if msg := parseInto(v.field(c), raw); msg != "" {
			c.problems[v.Name] = msg
			if v.Default != "" {
				_ = parseInto(v.field(c), v.Default)
			}
		}
	}
	c.applyDerived()
	return c
}

// applyDerived fills defaults that depend on other settings or the host.
func (c *Config) applyDerived() {
	if c.Dev.DataDir == "" {
		if home, err := os.UserHomeDir(); err == nil && home != "" {
			c.Dev.DataDir = filepath.Join(home, ".sandbot")
		} else {
			c.Dev.DataDir = ".sandbot"
		}
	}
	if c.Sandbox.LocalRoot == "" {
		c.Sandbox.LocalRoot = filepath.Join(c.Dev.DataDir, "workspaces")
	}
	if c.Sandbox.SnapshotURL == "" {
		c.Sandbox.SnapshotURL = "file://" + filepath.ToSlash(filepath.Join(c.Dev.DataDir, "snapshots"))
	}
	if c.Sandbox.HostID == "" {
		if h, err := os.Hostname(); err == nil {
			c.Sandbox.HostID = h
		}
	}
}

// SessionPolicy is the worker's session policy: how sessions ask for
// approval, how long commands and model calls may take, and when a session
// continues as new or suspends its sandbox. Who may approve, which
// backends exist and whether sessions are indexed are not policy: the bot
// knows those (see SessionSettings).
func (c *Config) SessionPolicy() session.Policy {
	return session.Policy{
		ApprovalMode:         session.ApprovalMode(c.Session.ApprovalMode),
		ApprovalTimeout:      c.Session.ApprovalTimeout,
		MaxToolCalls:         c.Session.MaxToolCalls,
		CommandTimeout:       c.Session.CommandTimeout,
		MaxCommandTimeout:    c.Session.MaxCommandTimeout,
		HistoryLimitBytes:    c.Session.HistoryLimit,
		TranscriptLimitBytes: c.Session.TranscriptLimit,
		ExecHeartbeat:        c.Session.ExecHeartbeat,
		ModelTimeout:         c.Model.Timeout,
		ModelAttempts:        c.Model.Attempts,
		IdleSuspend:          c.Session.IdleSuspend,
		Checkpoints:          c.Session.Checkpoints,
		CheckpointMaxAge:     c.Session.CheckpointMaxAge,
		TokenBudget:          c.Session.TokenBudget,
		Model:                c.Model.Name,
		Models:               c.Models(),
	}
}

// Models are the models sessions may use: the default first, then the
// allowed others.
func (c *Config) Models() []string {
	out := []string{}
	if c.Model.Name != "" {
		out = append(out, c.Model.Name)
	}
	for _, m := range c.Model.Allowed {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// SessionSettings are the settings the bot sends when it starts a session:
// who may approve, plus (until every worker supplies its own policy) the
// policy from the bot's environment.
func (c *Config) SessionSettings() session.Settings {
	return session.Settings{
		Policy:        c.SessionPolicy(),
		Approvers:     append(append([]string(nil), c.Session.Approvers...), c.Slack.Approvers...),
		ApproverRoles: append([]string(nil), c.Discord.ApproverRoles...),
	}
}

// SlackEnabled reports whether the Slack front end is configured.
func (c *Config) SlackEnabled() bool { return c.Slack.BotToken != "" }

// DiscordEnabled reports whether the Discord front end is configured.
func (c *Config) DiscordEnabled() bool { return c.Discord.Token != "" }

// EnsureDecisionKey gives a process that runs both the bot and the worker
// (cmd/dev) a fresh random decision key when none is configured: both ends
// live in the process, and signatures are checked only when an update
// arrives, so a new key per run breaks nothing a session recorded.
func (c *Config) EnsureDecisionKey() {
	if c.DecisionKey == "" {
		c.DecisionKey = rand.Text() + rand.Text()
	}
}
