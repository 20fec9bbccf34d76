// Package config is the one place sandbot reads its settings. Every setting
// is an environment variable prefixed SANDBOT_, read with envconfig, given a
// documented default where one is safe, and validated at start-up with a
// message that names the variable and says what is allowed. Nothing outside
// cmd/ and config/ reads the environment.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"
	"github.com/sandbot/sandbot/session"
)

// Prefix is the environment prefix of every variable.
const Prefix = "SANDBOT"

// Config is every setting of every binary. Each binary validates only the
// sections it uses (see Validate).
type Config struct {
	Temporal Temporal
	Model    Model
	Session  Session
	Sandbox  Sandbox
	Docker   Docker
	Slack    Slack
	Discord  Discord
	Dev      Dev
	// LogLevel is debug, info, warn or error.
	LogLevel string `split_words:"true" default:"info"`
	// MetricsAddr serves /metrics, /healthz and /readyz ("" disables).
	MetricsAddr string `split_words:"true"`
}

// Temporal is how to reach the Temporal cluster.
type Temporal struct {
	// Address is host:port of the frontend (SANDBOT_TEMPORAL_ADDRESS).
	Address   string `default:"127.0.0.1:7233"`
	Namespace string `default:"default"`
	// WebURL is the Temporal UI base, for /status links.
	WebURL string `split_words:"true" default:"http://127.0.0.1:8233"`
	// TaskQueue for session workflows and the model activity.
	TaskQueue string `split_words:"true" default:"sandbot"`
}

// Model is the OpenAI-compatible chat-completions endpoint.
type Model struct {
	// BaseURL, e.g. https://api.openai.com/v1, http://localhost:11434/v1
	// (Ollama), http://vllm:8000/v1, or an Azure OpenAI /openai/v1 URL.
	BaseURL string `split_words:"true"`
	// APIKey is sent as a Bearer token. Optional for local servers.
	APIKey string `split_words:"true"`
	// Name is the model name (SANDBOT_MODEL_NAME).
	Name string
	// Stream uses streaming responses (heartbeats long generations).
	Stream bool
	// Timeout bounds one model call.
	Timeout time.Duration `default:"5m"`
	// Attempts bounds retries of retryable failures (429, 5xx, network).
	Attempts int `default:"6"`
}

// Session holds per-session defaults applied when a session starts.
type Session struct {
	// ApprovalMode is never, always or unless-readonly.
	ApprovalMode    string        `split_words:"true" default:"unless-readonly"`
	ApprovalTimeout time.Duration `split_words:"true" default:"30m"`
	// Approvers are chat user IDs that may approve in every session, besides
	// each session's owner.
	Approvers         []string      `split_words:"true"`
	MaxToolCalls      int           `split_words:"true" default:"50"`
	CommandTimeout    time.Duration `split_words:"true" default:"2m"`
	MaxCommandTimeout time.Duration `split_words:"true" default:"30m"`
	// HistoryLimit forces continue-as-new past this many bytes of history.
	HistoryLimit int `split_words:"true" default:"20971520"`
	// ExecHeartbeat is how long a dead worker mid-command goes unnoticed.
	ExecHeartbeat time.Duration `split_words:"true" default:"30s"`
	// IdleSuspend suspends an idle sandbox after this long (0: never).
	IdleSuspend time.Duration `split_words:"true" default:"30m"`
}

// Sandbox selects and configures sandbox backends.
type Sandbox struct {
	// Backends the worker serves (local, docker, ...).
	Backends []string `default:"local"`
	// Default is the backend of new sessions.
	Default string `default:"local"`
	// LocalRoot holds local workspaces (default: <data dir>/workspaces).
	LocalRoot string `split_words:"true"`
	// SnapshotURL is a gocloud.dev/blob URL: file:///path or s3://bucket.
	SnapshotURL string `split_words:"true"`
	// HostID names this worker host for host-bound sandboxes (default: the
	// hostname).
	HostID string `split_words:"true"`
	// SingleHost says this is the only worker serving host-bound backends
	// (local, docker): sandbox activities then share the session task queue
	// and are dispatched eagerly. Never set it on more than one worker of a
	// deployment. cmd/dev always sets it.
	SingleHost bool `split_words:"true"`
}

// Docker configures the docker backend.
type Docker struct {
	Image     string  `default:"debian:bookworm-slim"`
	Network   string  `default:"none"`
	Cpus      float64 `default:"1"`
	Memory    string  `default:"1g"`
	PidsLimit int64   `split_words:"true" default:"512"`
	User      string  `default:"1000:1000"`
	Workdir   string  `default:"/workspace"`
	// PullMissing lets the worker pull a missing image.
	PullMissing bool `split_words:"true"`
}

// Slack configures the Slack front end. It is enabled when BotToken is set.
type Slack struct {
	BotToken        string        `split_words:"true"`
	AppToken        string        `split_words:"true"`
	SigningSecret   string        `split_words:"true"`
	Mode            string        `default:"socket"`
	ListenAddr      string        `split_words:"true" default:":3000"`
	AllowedChannels []string      `split_words:"true"`
	AllowedUsers    []string      `split_words:"true"`
	Approvers       []string      `split_words:"true"`
	RequireMention  bool          `split_words:"true"`
	APIBase         string        `split_words:"true"`
	EditInterval    time.Duration `split_words:"true" default:"1500ms"`
	UpdateBudget    int           `split_words:"true" default:"50"`
	UploadThreshold int           `split_words:"true" default:"12000"`
}

// Discord configures the Discord front end. It is enabled when Token is set.
type Discord struct {
	Token           string        `split_words:"true"`
	AppID           string        `split_words:"true"`
	GuildID         string        `split_words:"true"`
	AllowedGuilds   []string      `split_words:"true"`
	AllowedChannels []string      `split_words:"true"`
	AllowedUsers    []string      `split_words:"true"`
	AllowedRoles    []string      `split_words:"true"`
	ApproverRoles   []string      `split_words:"true"`
	MessageContent  bool          `split_words:"true" default:"true"`
	EditInterval    time.Duration `split_words:"true" default:"1s"`
	APIBase         string        `split_words:"true"`
}

// Dev configures cmd/dev's embedded Temporal server.
type Dev struct {
	// DataDir holds the SQLite database, workspaces and snapshots.
	DataDir string `split_words:"true"`
	// TemporalPort is the embedded frontend port.
	TemporalPort int `split_words:"true" default:"7233"`
	// UIPort serves the Temporal UI when it is built in (0: off).
	UIPort int `split_words:"true" default:"8233"`
}

// Load reads the environment. It fails only on values that cannot be
// parsed; call Validate for what each binary needs.
func Load() (*Config, error) {
	var c Config
	if err := envconfig.Process(Prefix, &c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c.applyDerived()
	return &c, nil
}

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

// Role says which binary is validating.
type Role int

// Roles.
const (
	RoleWorker Role = 1 << iota
	RoleBot
	RoleDev = RoleWorker | RoleBot
)

// KnownBackends are the backend names sandbot implements.
var KnownBackends = []string{"local", "docker", "daytona", "e2b"}

func env(name string) string { return Prefix + "_" + name }

// Validate checks the sections a role uses and returns every problem at
// once, each naming its variable.
func (c *Config) Validate(role Role) error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", env(name), fmt.Sprintf(format, args...)))
	}
	if c.Temporal.Address == "" && role != RoleDev {
		bad("TEMPORAL_ADDRESS", "is empty; set host:port of the Temporal frontend")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("LOG_LEVEL", "%q is not a log level; use debug, info, warn or error", c.LogLevel)
	}
	if role&RoleWorker != 0 {
		if c.Model.BaseURL == "" {
			bad("MODEL_BASE_URL", "is not set; set the OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or http://localhost:11434/v1")
		} else if u, err := url.Parse(c.Model.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("MODEL_BASE_URL", "%q is not an http(s) URL", c.Model.BaseURL)
		}
		if c.Model.Name == "" {
			bad("MODEL_NAME", "is not set; set the model to use, e.g. gpt-4o-mini or llama3.1")
		}
		if c.Model.Timeout <= 0 {
			bad("MODEL_TIMEOUT", "must be positive, got %s", c.Model.Timeout)
		}
		if c.Model.Attempts < 1 {
			bad("MODEL_ATTEMPTS", "must be at least 1, got %d", c.Model.Attempts)
		}
		if len(c.Sandbox.Backends) == 0 {
			bad("SANDBOX_BACKENDS", "is empty; allowed: %s", strings.Join(KnownBackends, ", "))
		}
		for _, b := range c.Sandbox.Backends {
			if !slices.Contains(KnownBackends, b) {
				bad("SANDBOX_BACKENDS", "%q is not a backend; allowed: %s", b, strings.Join(KnownBackends, ", "))
			}
		}
		if !strings.HasPrefix(c.Sandbox.SnapshotURL, "file://") && !strings.HasPrefix(c.Sandbox.SnapshotURL, "s3://") {
			bad("SANDBOX_SNAPSHOT_URL", "%q is not supported; use file:///path or s3://bucket?region=...", c.Sandbox.SnapshotURL)
		}
	}
	if !slices.Contains(KnownBackends, c.Sandbox.Default) {
		bad("SANDBOX_DEFAULT", "%q is not a backend; allowed: %s", c.Sandbox.Default, strings.Join(KnownBackends, ", "))
	}
	switch session.ApprovalMode(c.Session.ApprovalMode) {
	case session.ApproveNever, session.ApproveAlways, session.ApproveUnlessReadOnly:
	default:
		bad("SESSION_APPROVAL_MODE", "%q is not an approval mode; allowed: never, always, unless-readonly", c.Session.ApprovalMode)
	}
	durations := []struct {
		name string
		d    time.Duration
		zero bool
	}{
		{"SESSION_APPROVAL_TIMEOUT", c.Session.ApprovalTimeout, false},
		{"SESSION_COMMAND_TIMEOUT", c.Session.CommandTimeout, false},
		{"SESSION_MAX_COMMAND_TIMEOUT", c.Session.MaxCommandTimeout, false},
		{"SESSION_EXEC_HEARTBEAT", c.Session.ExecHeartbeat, false},
		{"SESSION_IDLE_SUSPEND", c.Session.IdleSuspend, true},
	}
	for _, d := range durations {
		if d.d < 0 || (d.d == 0 && !d.zero) {
			allowed := "a positive duration such as 90s or 10m"
			if d.zero {
				allowed = "0 (off) or a positive duration such as 30m"
			}
			bad(d.name, "%s is not allowed; use %s", d.d, allowed)
		}
	}
	if c.Session.CommandTimeout > c.Session.MaxCommandTimeout && c.Session.MaxCommandTimeout > 0 {
		bad("SESSION_COMMAND_TIMEOUT", "%s exceeds SANDBOT_SESSION_MAX_COMMAND_TIMEOUT (%s)", c.Session.CommandTimeout, c.Session.MaxCommandTimeout)
	}
	if c.Session.MaxToolCalls < 1 {
		bad("SESSION_MAX_TOOL_CALLS", "must be at least 1, got %d", c.Session.MaxToolCalls)
	}
	if c.Session.HistoryLimit < 1<<20 {
		bad("SESSION_HISTORY_LIMIT", "must be at least 1048576 bytes, got %d", c.Session.HistoryLimit)
	}
	if role&RoleBot != 0 {
		errs = append(errs, c.validateSlack()...)
		errs = append(errs, c.validateDiscord()...)
	}
	return errors.Join(errs...)
}

// SessionSettings are the workflow settings new sessions start with.
func (c *Config) SessionSettings() session.Settings {
	return session.Settings{
		ApprovalMode:      session.ApprovalMode(c.Session.ApprovalMode),
		ApprovalTimeout:   c.Session.ApprovalTimeout,
		Approvers:         append(append([]string(nil), c.Session.Approvers...), c.Slack.Approvers...),
		ApproverRoles:     c.Discord.ApproverRoles,
		MaxToolCalls:      c.Session.MaxToolCalls,
		CommandTimeout:    c.Session.CommandTimeout,
		MaxCommandTimeout: c.Session.MaxCommandTimeout,
		HistoryLimitBytes: c.Session.HistoryLimit,
		ExecHeartbeat:     c.Session.ExecHeartbeat,
		ModelTimeout:      c.Model.Timeout,
		ModelAttempts:     c.Model.Attempts,
		IdleSuspend:       c.Session.IdleSuspend,
	}
}
