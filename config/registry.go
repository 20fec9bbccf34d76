package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandbot/sandbot/session"
)

// Role names a sandbot process. A Var's Readers is a set of roles; Validate
// takes the one role validating.
type Role uint8

// Roles.
const (
	// RoleWorker is cmd/worker.
	RoleWorker Role = 1 << iota
	// RoleBot is cmd/bot.
	RoleBot
	// RoleDev is cmd/dev: the worker and the bot in one process with an
	// embedded Temporal server, which sets the Temporal address, the UI
	// link and single-host mode itself.
	RoleDev
)

// String lists the processes in r, e.g. "worker, dev".
func (r Role) String() string {
	var names []string
	for _, x := range []struct {
		r    Role
		name string
	}{{RoleWorker, "worker"}, {RoleBot, "bot"}, {RoleDev, "dev"}} {
		if r&x.r != 0 {
			names = append(names, x.name)
		}
	}
	return strings.Join(names, ", ")
}

// Shorthands for who reads a variable.
const (
	all    = RoleWorker | RoleBot | RoleDev
	worker = RoleWorker | RoleDev
	bot    = RoleBot | RoleDev
)

// Var is one environment variable: the single definition of its name,
// default, readers and meaning. Load parses it into its Config field and
// Validate runs its check for the processes that read it.
type Var struct {
	// Name is the full variable name, e.g. SANDBOT_MODEL_NAME.
	Name string
	// Default is the value Load uses when the variable is unset or empty,
	// written as in the environment; "" leaves the field zero.
	Default string
	// DefaultDoc describes a default that is not a literal here: derived
	// from another setting or the host, or applied by the package that uses
	// the value when the field is zero (that package owns the number).
	DefaultDoc string
	// Readers are the processes that read the variable.
	Readers Role
	// Doc is what the variable means, in one line.
	Doc string
	// Secret values are never echoed.
	Secret bool

	field func(*Config) any
	check func(c *Config, p *probs)
}

// Documented is the default as the README's table shows it.
func (v Var) Documented() string {
	if v.DefaultDoc != "" {
		return v.DefaultDoc
	}
	return v.Default
}

// Vars returns the registry in its documented order.
func Vars() []Var { return append([]Var(nil), registry...) }

// Lookup returns the registered variable called name.
func Lookup(name string) (Var, bool) {
	for _, v := range registry {
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}

// OtherNames are SANDBOT_* names that are not settings, with why they
// exist: knobs read only by tests and benchmarks, and variables sandbot
// sets inside sandboxes. They are listed so that every SANDBOT_* name in
// the repository is accounted for here (see the registry test).
var OtherNames = map[string]string{
	"SANDBOT_SANDBOX":             "set by the local backend in every command's environment: the workspace path, to find escaped processes",
	"SANDBOT_TEST_LOG":            "tests: print the integration tests' logs to stderr",
	"SANDBOT_TEST_SECRET":         "tests: a secret of the worker's environment the docker and e2b backends' tests expect never to reach a sandbox",
	"SANDBOT_LOCAL_HELPER_ROOT":   "tests: the local backend's re-executed helper process",
	"SANDBOT_BENCH_FILES":         "benchmarks: workspace file count of the local backend's snapshot benchmark",
	"SANDBOT_BENCH_MB":            "benchmarks: workspace size of the local backend's snapshot benchmark",
	"SANDBOT_BENCH_NO_WATCH":      "benchmarks: measure turns without the bot's watcher",
	"SANDBOT_BENCH_IDLE_SESSIONS": "benchmarks: how many idle sessions the scale-at-rest benchmark creates (default 10,000)",
	"SANDBOT_BENCH_IDLE_WINDOW":   "benchmarks: how long the scale-at-rest benchmark counts the bot's calls while every session is idle (default 1m)",
	"SANDBOT_FUZZTIME":            "CI: the fuzzing step's budget per target (.ci/run), instead of its fixed input counts",
	"SANDBOT_PGTEMPORAL_SERVE":    "tests: marks a chaos or cluster test binary started again as the Temporal server on PostgreSQL (internal/pgtemporal), with its spec file",
}

// registry is every setting: the core's here, the chat platforms' in
// chat.go.
var registry = append(append(append(coreVars, chatVars...), repoVars...), attachVars...)

var coreVars = []Var{
	// Model.
	{Name: "SANDBOT_MODEL_BASE_URL", DefaultDoc: "(required)", Readers: worker,
		Doc:   "OpenAI-compatible base URL",
		field: func(c *Config) any { return &c.Model.BaseURL },
		check: func(c *Config, p *probs) {
			if c.Model.BaseURL == "" {
				p.add("is not set; use the OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or http://localhost:11434/v1")
				return
			}
			checkHTTPURL(p, c.Model.BaseURL, "https://api.openai.com/v1", false)
		}},
	{Name: "SANDBOT_MODEL_NAME", DefaultDoc: "(required)", Readers: worker,
		Doc:   "model name",
		field: func(c *Config) any { return &c.Model.Name },
		check: func(c *Config, p *probs) {
			if c.Model.Name == "" {
				p.add("is not set; use the model to run, e.g. gpt-4o-mini or llama3.1")
			}
		}},
	{Name: "SANDBOT_MODEL_API_KEY", Readers: worker, Secret: true,
		Doc:   "Bearer key (never reaches a sandbox, log or chat message)",
		field: func(c *Config) any { return &c.Model.APIKey }},
	{Name: "SANDBOT_MODEL_STREAM", Default: "false", Readers: worker,
		Doc:   "stream responses (heartbeats long generations)",
		field: func(c *Config) any { return &c.Model.Stream }},
	{Name: "SANDBOT_MODEL_TIMEOUT", Default: durationText(session.DefaultModelTimeout), Readers: worker,
		Doc:   "bound of one model call",
		field: func(c *Config) any { return &c.Model.Timeout },
		check: func(c *Config, p *probs) { checkPositive(p, c.Model.Timeout, "5m") }},
	{Name: "SANDBOT_MODEL_ALLOWED", Readers: all,
		Doc:   "other models a session may switch to with /model NAME (or model=NAME in a mention); the worker refuses any model not listed",
		field: func(c *Config) any { return &c.Model.Allowed }},
	{Name: "SANDBOT_MODEL_PRICE_INPUT", Default: "0", Readers: bot,
		Doc:   "USD per million prompt tokens, to show what sessions cost in cards and /status (0: tokens only)",
		field: func(c *Config) any { return &c.Model.PriceInput },
		check: func(c *Config, p *probs) {
			if c.Model.PriceInput < 0 {
				p.add("is negative; use a price such as 2.5")
			}
		}},
	{Name: "SANDBOT_MODEL_PRICE_OUTPUT", Default: "0", Readers: bot,
		Doc:   "USD per million completion tokens (see SANDBOT_MODEL_PRICE_INPUT)",
		field: func(c *Config) any { return &c.Model.PriceOutput },
		check: func(c *Config, p *probs) {
			if c.Model.PriceOutput < 0 {
				p.add("is negative; use a price such as 10")
			}
		}},
	{Name: "SANDBOT_MODEL_ATTEMPTS", Default: strconv.Itoa(session.DefaultModelAttempts), Readers: worker,
		Doc:   "attempts per model call; retries of 408/409/429/5xx honour Retry-After",
		field: func(c *Config) any { return &c.Model.Attempts },
		check: func(c *Config, p *probs) { checkMin(p, c.Model.Attempts, 1, "attempts") }},
	// The window's defaults are package agent's (a zero value takes them).
	{Name: "SANDBOT_MODEL_CONTEXT_TOKENS", DefaultDoc: "128000", Readers: worker,
		Doc:   "the model's context window in tokens; what a call sends is fitted into it (old outputs cut first, then old tool calls folded, then the oldest exchanges dropped)",
		field: func(c *Config) any { return &c.Model.ContextTokens },
		check: func(c *Config, p *probs) {
			if c.Model.ContextTokens != 0 {
				checkMin(p, c.Model.ContextTokens, 2048, "tokens")
			}
		}},
	{Name: "SANDBOT_MODEL_ANSWER_TOKENS", DefaultDoc: "8192", Readers: worker,
		Doc:   "tokens of the context window kept free for the model's answer",
		field: func(c *Config) any { return &c.Model.AnswerTokens },
		check: func(c *Config, p *probs) {
			if c.Model.AnswerTokens != 0 {
				checkMin(p, c.Model.AnswerTokens, 256, "tokens")
			}
			if c.Model.AnswerTokens > 0 && c.Model.ContextTokens > 0 && c.Model.AnswerTokens >= c.Model.ContextTokens {
				p.add("%d is not below SANDBOT_MODEL_CONTEXT_TOKENS (%d); keep room for the conversation, e.g. an eighth of the window", c.Model.AnswerTokens, c.Model.ContextTokens)
			}
		}},

	// Temporal.
	{Name: "SANDBOT_TEMPORAL_ADDRESS", Default: "127.0.0.1:7233", Readers: RoleWorker | RoleBot,
		Doc:   "Temporal frontend, host:port (cmd/dev runs its own)",
		field: func(c *Config) any { return &c.Temporal.Address },
		check: func(c *Config, p *probs) {
			checkHostPort(p, c.Temporal.Address, "host:port of the Temporal frontend, such as 127.0.0.1:7233", true)
		}},
	{Name: "SANDBOT_TEMPORAL_TLS_CERT", Readers: RoleWorker | RoleBot,
		Doc:   "client certificate (PEM file) for mTLS to the Temporal frontend; with SANDBOT_TEMPORAL_TLS_KEY",
		field: func(c *Config) any { return &c.Temporal.TLSCert },
		check: func(c *Config, p *probs) {
			if (c.Temporal.TLSCert == "") != (c.Temporal.TLSKey == "") {
				p.add("and SANDBOT_TEMPORAL_TLS_KEY go together; use both PEM files or neither")
			}
			checkReadableFile(p, c.Temporal.TLSCert)
		}},
	{Name: "SANDBOT_TEMPORAL_TLS_KEY", Readers: RoleWorker | RoleBot,
		Doc:   "the client certificate's private key (PEM file)",
		field: func(c *Config) any { return &c.Temporal.TLSKey },
		check: func(c *Config, p *probs) { checkReadableFile(p, c.Temporal.TLSKey) }},
	{Name: "SANDBOT_TEMPORAL_TLS_CA", Readers: RoleWorker | RoleBot,
		Doc:   "CA bundle (PEM file) to verify the frontend with, instead of the system roots; setting it turns TLS on",
		field: func(c *Config) any { return &c.Temporal.TLSCA },
		check: func(c *Config, p *probs) { checkReadableFile(p, c.Temporal.TLSCA) }},
	{Name: "SANDBOT_TEMPORAL_TLS_SERVER_NAME", Readers: RoleWorker | RoleBot,
		Doc:   "server name to verify the frontend's certificate against (default: the address's host)",
		field: func(c *Config) any { return &c.Temporal.TLSServerName }},
	{Name: "SANDBOT_TEMPORAL_API_KEY", Readers: RoleWorker | RoleBot, Secret: true,
		Doc:   "API key for the frontend (Temporal Cloud or an authorizing cluster); implies TLS",
		field: func(c *Config) any { return &c.Temporal.APIKey }},
	{Name: "SANDBOT_TEMPORAL_NAMESPACE", Default: "default", Readers: all,
		Doc:   "Temporal namespace",
		field: func(c *Config) any { return &c.Temporal.Namespace },
		check: func(c *Config, p *probs) {
			checkNotEmpty(p, c.Temporal.Namespace, "a Temporal namespace such as default")
		}},
	{Name: "SANDBOT_TEMPORAL_TASK_QUEUE", Default: "sandbot", Readers: all,
		Doc:   "session queue; sandbox queues derive from it",
		field: func(c *Config) any { return &c.Temporal.TaskQueue },
		check: func(c *Config, p *probs) { checkNotEmpty(p, c.Temporal.TaskQueue, "a task queue name such as sandbot") }},
	{Name: "SANDBOT_TEMPORAL_WEB_URL", Default: "http://127.0.0.1:8233", Readers: RoleBot,
		Doc:   "Temporal UI, for /status links (empty: no links; cmd/dev links its own)",
		field: func(c *Config) any { return &c.Temporal.WebURL },
		check: func(c *Config, p *probs) {
			if c.Temporal.WebURL != "" {
				checkHTTPURL(p, c.Temporal.WebURL, "http://127.0.0.1:8233", false)
			}
		}},

	// Session policy: the worker's.
	{Name: "SANDBOT_SESSION_APPROVAL_MODE", Default: string(session.ApproveUnlessReadOnly), Readers: worker,
		Doc:   "never, always, or ask for everything outside a read-only allowlist (unless-readonly)",
		field: func(c *Config) any { return &c.Session.ApprovalMode },
		check: func(c *Config, p *probs) {
			modes := []session.ApprovalMode{session.ApproveNever, session.ApproveAlways, session.ApproveUnlessReadOnly}
			for _, m := range modes {
				if session.ApprovalMode(c.Session.ApprovalMode) == m {
					return
				}
			}
			p.add("%q is not an approval mode; use %s, %s or %s", c.Session.ApprovalMode, modes[0], modes[1], modes[2])
		}},
	{Name: "SANDBOT_SESSION_APPROVAL_TIMEOUT", Default: durationText(session.DefaultApprovalTimeout), Readers: worker,
		Doc:   "unanswered approvals expire (the command is not run)",
		field: func(c *Config) any { return &c.Session.ApprovalTimeout },
		check: func(c *Config, p *probs) { checkPositive(p, c.Session.ApprovalTimeout, "30m") }},
	{Name: "SANDBOT_SESSION_MAX_TOOL_CALLS", Default: strconv.Itoa(session.DefaultMaxToolCalls), Readers: worker,
		Doc:   "shell calls per turn",
		field: func(c *Config) any { return &c.Session.MaxToolCalls },
		check: func(c *Config, p *probs) { checkMin(p, c.Session.MaxToolCalls, 1, "calls") }},
	{Name: "SANDBOT_SESSION_COMMAND_TIMEOUT", Default: durationText(session.DefaultCommandTimeout), Readers: worker,
		Doc:   "timeout of a command the model gives none",
		field: func(c *Config) any { return &c.Session.CommandTimeout },
		check: func(c *Config, p *probs) {
			if !checkPositive(p, c.Session.CommandTimeout, "2m") {
				return
			}
			if limit := c.Session.MaxCommandTimeout; limit > 0 && limit <= MaxCommandTimeoutCeiling && c.Session.CommandTimeout > limit {
				p.add("%s exceeds SANDBOT_SESSION_MAX_COMMAND_TIMEOUT (%s); use at most that", c.Session.CommandTimeout, limit)
			}
		}},
	{Name: "SANDBOT_SESSION_MAX_COMMAND_TIMEOUT", Default: durationText(session.DefaultMaxCommandTimeout), Readers: worker,
		Doc:   "ceiling of a timeout the model asks for (at most " + durationText(MaxCommandTimeoutCeiling) + ")",
		field: func(c *Config) any { return &c.Session.MaxCommandTimeout },
		check: func(c *Config, p *probs) {
			if d := c.Session.MaxCommandTimeout; d <= 0 || d > MaxCommandTimeoutCeiling {
				p.add("%s is out of range; use a positive duration up to %s (the sandbox's limit per command)", d, durationText(MaxCommandTimeoutCeiling))
			}
		}},
	{Name: "SANDBOT_SESSION_EXEC_HEARTBEAT", Default: durationText(session.DefaultExecHeartbeat), Readers: worker,
		Doc:   "how long a dead worker mid-command goes unnoticed",
		field: func(c *Config) any { return &c.Session.ExecHeartbeat },
		check: func(c *Config, p *probs) { checkPositive(p, c.Session.ExecHeartbeat, "30s") }},
	{Name: "SANDBOT_SESSION_HISTORY_LIMIT", Default: strconv.Itoa(session.DefaultHistoryLimitBytes), Readers: worker,
		Doc:   "continue-as-new past this many bytes of history",
		field: func(c *Config) any { return &c.Session.HistoryLimit },
		check: func(c *Config, p *probs) {
			if n := c.Session.HistoryLimit; n < minHistoryLimit || n > maxHistoryLimit {
				p.add("%d is out of range; use %d to %d bytes (Temporal ends a workflow whose history passes 50 MiB)", n, minHistoryLimit, maxHistoryLimit)
			}
		}},
	{Name: "SANDBOT_SESSION_TRANSCRIPT_LIMIT", Default: strconv.Itoa(session.DefaultTranscriptLimitBytes), Readers: worker,
		Doc:   "bytes of transcript a session keeps in its state (oldest dropped first): what continue-as-new carries, each cached session holds in worker memory, and a model call can be sent; each call still sends at most SANDBOT_MODEL_CONTEXT_TOKENS",
		field: func(c *Config) any { return &c.Session.TranscriptLimit },
		check: func(c *Config, p *probs) {
			if n := c.Session.TranscriptLimit; n < minTranscriptLimit || n > session.DefaultTranscriptLimitBytes {
				p.add("%d is out of range; use %d to %d bytes (the state carrying it must stay under Temporal's 2 MB payload limit)", n, minTranscriptLimit, session.DefaultTranscriptLimitBytes)
			}
		}},
	{Name: "SANDBOT_SESSION_IDLE_SUSPEND", Default: durationText(DefaultIdleSuspend), Readers: worker,
		Doc:   "suspend idle sandboxes (0 = never)",
		field: func(c *Config) any { return &c.Session.IdleSuspend },
		check: func(c *Config, p *probs) {
			if c.Session.IdleSuspend < 0 {
				p.add("%s is negative; use 0 (off) or a positive duration such as 30m", c.Session.IdleSuspend)
			}
		}},
	{Name: "SANDBOT_SESSION_TOKEN_BUDGET", Default: "0", Readers: worker,
		Doc:   "tokens (prompt plus completion, as the model reports them) a session may use; a turn that finds it spent stops with a message (0: no budget)",
		field: func(c *Config) any { return &c.Session.TokenBudget },
		check: func(c *Config, p *probs) {
			if c.Session.TokenBudget < 0 {
				p.add("is %d; use 0 (no budget) or a positive number of tokens", c.Session.TokenBudget)
			}
		}},
	{Name: "SANDBOT_SESSION_CHECKPOINTS", Default: strconv.Itoa(session.DefaultCheckpoints), Readers: worker,
		Doc:   "ends of turns each session keeps for /rewind and /fork @N (the workspace snapshots cost only what changed)",
		field: func(c *Config) any { return &c.Session.Checkpoints },
		check: func(c *Config, p *probs) {
			if n := c.Session.Checkpoints; n < 1 || n > maxCheckpoints {
				p.add("%d is out of range; use 1 to %d", n, maxCheckpoints)
			}
		}},
	{Name: "SANDBOT_SESSION_CHECKPOINT_MAX_AGE", Default: durationText(session.DefaultCheckpointMaxAge), Readers: worker,
		Doc:   "drop checkpoints older than this (the latest is always kept)",
		field: func(c *Config) any { return &c.Session.CheckpointMaxAge },
		check: func(c *Config, p *probs) { checkPositive(p, c.Session.CheckpointMaxAge, "720h") }},
	{Name: "SANDBOT_SESSION_CACHE", Default: strconv.Itoa(DefaultSessionCache), Readers: worker,
		Doc:   "sessions a worker process keeps in memory between turns (Temporal's sticky workflow cache); past it the least recently used is evicted, and replays its history when it wakes",
		field: func(c *Config) any { return &c.Session.Cache },
		check: func(c *Config, p *probs) {
			if n := c.Session.Cache; n < minSessionCache || n > maxSessionCache {
				p.add("%d is out of range; use %d to %d sessions", n, minSessionCache, maxSessionCache)
			}
		}},
	{Name: "SANDBOT_SESSION_APPROVERS", Readers: bot,
		Doc:   "user IDs (any platform) who may approve in every session, besides each session's owner",
		field: func(c *Config) any { return &c.Session.Approvers }},

	// Sandboxes.
	{Name: "SANDBOT_SANDBOX_BACKENDS", Default: "local", Readers: all,
		Doc:   "backends the worker serves and the bot offers: local, docker, daytona, e2b (a worker also serves a cloud backend whose API key is set)",
		field: func(c *Config) any { return &c.Sandbox.Backends },
		check: func(c *Config, p *probs) {
			if len(c.Sandbox.Backends) == 0 {
				p.add("is empty; use a comma-separated list of %s", strings.Join(KnownBackends, ", "))
			}
			seen := map[string]bool{}
			for _, b := range c.Sandbox.Backends {
				switch {
				case !known(b):
					p.add("%q is not a backend; use %s", b, strings.Join(KnownBackends, ", "))
				case seen[b]:
					p.add("lists %q twice; use each backend once", b)
				}
				seen[b] = true
			}
		}},
	{Name: "SANDBOT_SANDBOX_DEFAULT", Default: "local", Readers: bot,
		Doc:   "backend of new sessions",
		field: func(c *Config) any { return &c.Sandbox.Default },
		check: func(c *Config, p *probs) {
			switch {
			case !known(c.Sandbox.Default):
				p.add("%q is not a backend; use %s", c.Sandbox.Default, strings.Join(KnownBackends, ", "))
			case !contains(c.Backends(), c.Sandbox.Default):
				p.add("%q is not in SANDBOT_SANDBOX_BACKENDS (%s) and has no API key set; use one of those", c.Sandbox.Default, strings.Join(c.Backends(), ","))
			}
		}},
	{Name: "SANDBOT_SANDBOX_LOCAL_ROOT", DefaultDoc: "~/.sandbot/workspaces", Readers: worker,
		Doc:   "local workspaces (default: workspaces under SANDBOT_DEV_DATA_DIR)",
		field: func(c *Config) any { return &c.Sandbox.LocalRoot }},
	{Name: "SANDBOT_SANDBOX_LOCAL_NETWORK", Default: "false", Readers: worker,
		Doc:   "give local sandbox commands the host's network (default: none, only their own loopback); the worker logs a warning",
		field: func(c *Config) any { return &c.Sandbox.LocalNetwork }},
	{Name: "SANDBOT_SANDBOX_LOCAL_UNCONFINED", Default: "false", Readers: worker,
		Doc:   "run local sandbox commands unconfined, as the worker's user on the whole host, where bubblewrap or user namespaces are unavailable (the local backend refuses to start otherwise); the worker logs a warning",
		field: func(c *Config) any { return &c.Sandbox.LocalUnconfined }},
	{Name: "SANDBOT_SANDBOX_SNAPSHOT_URL", DefaultDoc: "file://~/.sandbot/snapshots", Readers: worker,
		Doc:   "snapshot store: file:///path or s3://bucket?region=...",
		field: func(c *Config) any { return &c.Sandbox.SnapshotURL },
		check: func(c *Config, p *probs) {
			u := c.Sandbox.SnapshotURL
			if !strings.HasPrefix(u, "file://") && !strings.HasPrefix(u, "s3://") {
				p.add("%q is not supported; use file:///path or s3://bucket?region=...", u)
			}
		}},
	{Name: "SANDBOT_SANDBOX_WORKSPACE_QUOTA", Default: "4g", Readers: worker,
		Doc:   "largest workspace a session may keep: a snapshot of a larger one is refused with a message in the thread, and no single file a command writes may pass it (RLIMIT_FSIZE); 0: no limit",
		field: func(c *Config) any { return &c.Sandbox.WorkspaceQuota }},
	{Name: "SANDBOT_SANDBOX_SNAPSHOT_MAX", Default: "2g", Readers: worker,
		Doc:   "most one snapshot may write to the store (compressed; an incremental snapshot writes only what changed); a larger one is refused with a message in the thread; 0: no limit",
		field: func(c *Config) any { return &c.Sandbox.SnapshotMax }},
	{Name: "SANDBOT_SANDBOX_HOST_ID", DefaultDoc: "hostname", Readers: RoleWorker,
		Doc:   "names this host's task queue",
		field: func(c *Config) any { return &c.Sandbox.HostID },
		check: func(c *Config, p *probs) {
			if c.Sandbox.HostID == "" && !c.Sandbox.SingleHost {
				p.add("is empty and the hostname is unknown; use a name unique to this worker host")
			}
		}},
	{Name: "SANDBOT_SANDBOX_SINGLE_HOST", Default: "false", Readers: RoleWorker,
		Doc:   "this is the only worker holding sandboxes: run sandbox activities on the session queue (faster; always on in cmd/dev; never set on more than one worker)",
		field: func(c *Config) any { return &c.Sandbox.SingleHost }},

	// Docker backend: checked when the worker serves it. The numbers are
	// the backend's (package sandbox/docker); a zero value takes them.
	{Name: "SANDBOT_DOCKER_IMAGE", DefaultDoc: "debian:bookworm-slim", Readers: worker,
		Doc:   "session image",
		field: func(c *Config) any { return &c.Docker.Image }},
	{Name: "SANDBOT_DOCKER_NETWORK", DefaultDoc: "none", Readers: worker,
		Doc:   "container network: none, bridge or a user-defined network",
		field: func(c *Config) any { return &c.Docker.Network },
		check: whenDocker(func(c *Config, p *probs) {
			if n := c.Docker.Network; n == "host" || strings.HasPrefix(n, "container:") {
				p.add("%q would share a network namespace with the host or another container; use none, bridge or a user-defined network", n)
			}
		})},
	{Name: "SANDBOT_DOCKER_CPUS", DefaultDoc: "1", Readers: worker,
		Doc:   "CPUs per sandbox",
		field: func(c *Config) any { return &c.Docker.Cpus },
		check: whenDocker(func(c *Config, p *probs) {
			if c.Docker.Cpus < 0 {
				p.add("%g is negative; use a positive number of CPUs such as 1 or 0.5", c.Docker.Cpus)
			}
		})},
	{Name: "SANDBOT_DOCKER_MEMORY", DefaultDoc: "1g", Readers: worker,
		Doc:   "memory per sandbox",
		field: func(c *Config) any { return &c.Docker.Memory },
		check: whenDocker(func(c *Config, p *probs) {
			if m := c.Docker.Memory; m != 0 && m < minDockerMemory {
				p.add("%d bytes is below Docker's minimum; use at least 6m, such as 1g", m)
			}
		})},
	{Name: "SANDBOT_DOCKER_PIDS_LIMIT", DefaultDoc: "512", Readers: worker,
		Doc:   "processes per sandbox",
		field: func(c *Config) any { return &c.Docker.PidsLimit },
		check: whenDocker(func(c *Config, p *probs) {
			if c.Docker.PidsLimit < 0 {
				p.add("%d is negative; use a positive number of processes such as 512", c.Docker.PidsLimit)
			}
		})},
	{Name: "SANDBOT_DOCKER_USER", DefaultDoc: "1000:1000", Readers: worker,
		Doc:   "uid:gid commands run as; root is refused",
		field: func(c *Config) any { return &c.Docker.User },
		check: whenDocker(func(c *Config, p *probs) {
			if u := c.Docker.User; u != "" {
				us, gs, hasGID := strings.Cut(u, ":")
				uid, err := strconv.Atoi(us)
				gid := uid
				if err == nil && hasGID {
					gid, err = strconv.Atoi(gs)
				}
				switch {
				case err != nil || uid < 0 || gid < 0:
					p.add("%q is not numeric; use uid or uid:gid, such as 1000:1000", u)
				case uid == 0 || gid == 0:
					p.add("%q runs as root or the root group; use a non-root uid:gid such as 1000:1000", u)
				}
			}
		})},
	{Name: "SANDBOT_DOCKER_WORKDIR", DefaultDoc: "/workspace", Readers: worker,
		Doc:   "workspace path inside the container",
		field: func(c *Config) any { return &c.Docker.Workdir },
		check: whenDocker(func(c *Config, p *probs) { checkWorkdir(p, c.Docker.Workdir, "/workspace") })},
	{Name: "SANDBOT_DOCKER_PULL_MISSING", Default: "false", Readers: worker,
		Doc:   "allow pulling a missing image",
		field: func(c *Config) any { return &c.Docker.PullMissing }},

	// Cloud backends: a worker serves one whenever its API key is set. The
	// key, URL and region variables are the providers' own (their SDKs and
	// CLIs read the same names); the rest are sandbot's. Defaults are the
	// backends' (packages sandbox/daytona and sandbox/e2b).
	{Name: "DAYTONA_API_KEY", Readers: worker, Secret: true,
		Doc:   "Daytona API key; when set the worker serves the daytona backend",
		field: func(c *Config) any { return &c.Daytona.APIKey },
		check: func(c *Config, p *probs) {
			checkCloudKey(p, c, "daytona", c.Daytona.APIKey, "dtn_", "https://app.daytona.io/dashboard/keys")
		}},
	{Name: "DAYTONA_API_URL", DefaultDoc: "https://app.daytona.io/api", Readers: worker,
		Doc:   "Daytona API base URL",
		field: func(c *Config) any { return &c.Daytona.APIURL },
		check: func(c *Config, p *probs) {
			if c.Daytona.APIURL != "" {
				checkHTTPURL(p, c.Daytona.APIURL, "https://app.daytona.io/api", false)
			}
		}},
	{Name: "DAYTONA_TARGET", DefaultDoc: "(the organization's default)", Readers: worker,
		Doc:   "Daytona region sandboxes are created in, e.g. us or eu",
		field: func(c *Config) any { return &c.Daytona.Target }},
	{Name: "SANDBOT_DAYTONA_SNAPSHOT", DefaultDoc: "(Daytona's default snapshot)", Readers: worker,
		Doc:   "Daytona snapshot sandboxes are created from",
		field: func(c *Config) any { return &c.Daytona.Snapshot },
		check: func(c *Config, p *probs) {
			if c.Daytona.Snapshot != "" && c.Daytona.Image != "" {
				p.add("and SANDBOT_DAYTONA_IMAGE are both set; use one: a snapshot name or an image")
			}
		}},
	{Name: "SANDBOT_DAYTONA_IMAGE", Readers: worker,
		Doc:   "image Daytona builds sandboxes from instead of a snapshot, e.g. debian:bookworm-slim",
		field: func(c *Config) any { return &c.Daytona.Image }},
	{Name: "SANDBOT_DAYTONA_WORKDIR", DefaultDoc: "/home/daytona/workspace", Readers: worker,
		Doc:   "workspace path inside Daytona sandboxes",
		field: func(c *Config) any { return &c.Daytona.Workdir },
		check: func(c *Config, p *probs) { checkWorkdir(p, c.Daytona.Workdir, "/home/daytona/workspace") }},
	{Name: "SANDBOT_DAYTONA_AUTO_STOP", DefaultDoc: "15m", Readers: worker,
		Doc:   "Daytona stops a sandbox after this long without sandbot's traffic (set on every sandbox; whole minutes)",
		field: func(c *Config) any { return &c.Daytona.AutoStop },
		check: func(c *Config, p *probs) {
			if d := c.Daytona.AutoStop; d < 0 || (d > 0 && d < time.Minute) {
				p.add("%s is below a minute; use whole minutes such as 15m (Daytona counts minutes)", d)
			}
		}},
	{Name: "E2B_API_KEY", Readers: worker, Secret: true,
		Doc:   "E2B API key; when set the worker serves the e2b backend",
		field: func(c *Config) any { return &c.E2B.APIKey },
		check: func(c *Config, p *probs) {
			checkCloudKey(p, c, "e2b", c.E2B.APIKey, "e2b_", "https://e2b.dev/dashboard?tab=keys")
		}},
	{Name: "E2B_API_URL", DefaultDoc: "https://api.e2b.app", Readers: worker,
		Doc:   "E2B API base URL",
		field: func(c *Config) any { return &c.E2B.APIURL },
		check: func(c *Config, p *probs) {
			if c.E2B.APIURL != "" {
				checkHTTPURL(p, c.E2B.APIURL, "https://api.e2b.app", false)
			}
		}},
	{Name: "E2B_DOMAIN", DefaultDoc: "e2b.app", Readers: worker,
		Doc:   "E2B domain; sandboxes are reached at 49983-<id>.<domain>",
		field: func(c *Config) any { return &c.E2B.Domain }},
	{Name: "E2B_SANDBOX_URL", Readers: worker,
		Doc:   "reach every E2B sandbox's daemon through this URL instead (self-hosted E2B, tests)",
		field: func(c *Config) any { return &c.E2B.SandboxURL },
		check: func(c *Config, p *probs) {
			if c.E2B.SandboxURL != "" {
				checkHTTPURL(p, c.E2B.SandboxURL, "http://localhost:3000", false)
			}
		}},
	{Name: "SANDBOT_E2B_TEMPLATE", DefaultDoc: "base", Readers: worker,
		Doc:   "E2B template sandboxes are created from",
		field: func(c *Config) any { return &c.E2B.Template }},
	{Name: "SANDBOT_E2B_WORKDIR", DefaultDoc: "/home/user/workspace", Readers: worker,
		Doc:   "workspace path inside E2B sandboxes",
		field: func(c *Config) any { return &c.E2B.Workdir },
		check: func(c *Config, p *probs) { checkWorkdir(p, c.E2B.Workdir, "/home/user/workspace") }},
	{Name: "SANDBOT_E2B_TTL", DefaultDoc: "15m", Readers: worker,
		Doc:   "E2B pauses a sandbox this long after sandbot last used it (a wall-clock TTL sandbot refreshes while the session works)",
		field: func(c *Config) any { return &c.E2B.TTL },
		check: func(c *Config, p *probs) {
			if d := c.E2B.TTL; d < 0 || (d > 0 && d < time.Minute) {
				p.add("%s is below a minute; use a duration such as 15m", d)
			}
		}},

	// cmd/dev.
	{Name: "SANDBOT_DEV_DATA_DIR", DefaultDoc: "~/.sandbot", Readers: worker,
		Doc:   "cmd/dev's state; the worker's default workspaces and snapshots live under it",
		field: func(c *Config) any { return &c.Dev.DataDir }},
	{Name: "SANDBOT_DEV_TEMPORAL_PORT", Default: "7233", Readers: RoleDev,
		Doc:   "cmd/dev's embedded Temporal frontend (0 picks a free port)",
		field: func(c *Config) any { return &c.Dev.TemporalPort },
		check: func(c *Config, p *probs) { checkPort(p, c.Dev.TemporalPort, "0 (a free port) or 1 to 65535") }},
	{Name: "SANDBOT_DEV_UI_PORT", Default: "8233", Readers: RoleDev,
		Doc:   "cmd/dev's Temporal UI (0 = off)",
		field: func(c *Config) any { return &c.Dev.UIPort },
		check: func(c *Config, p *probs) {
			if checkPort(p, c.Dev.UIPort, "0 (off) or 1 to 65535") && c.Dev.UIPort != 0 && c.Dev.UIPort == c.Dev.TemporalPort {
				p.add("%d is also SANDBOT_DEV_TEMPORAL_PORT; use a port of its own", c.Dev.UIPort)
			}
		}},

	// Trust.
	{Name: "SANDBOT_DECISION_KEY", Readers: RoleWorker | RoleBot, Secret: true,
		Doc:   "shared secret (32+ bytes) the bot signs every decision with and the worker checks; cmd/dev makes one per run",
		field: func(c *Config) any { return &c.DecisionKey },
		check: func(c *Config, p *probs) {
			if n := len(c.DecisionKey); n < session.MinKeyBytes {
				p.add("is %d bytes; use the same secret of at least %d bytes on the bot and the worker, e.g. the output of `openssl rand -base64 32`", n, session.MinKeyBytes)
			}
		}},
	// Process.
	{Name: "SANDBOT_LOG_LEVEL", Default: "info", Readers: all,
		Doc:   "debug, info, warn or error",
		field: func(c *Config) any { return &c.LogLevel },
		check: func(c *Config, p *probs) {
			switch c.LogLevel {
			case "debug", "info", "warn", "error":
			default:
				p.add("%q is not a log level; use debug, info, warn or error", c.LogLevel)
			}
		}},
	{Name: "SANDBOT_METRICS_ADDR", Readers: RoleWorker | RoleBot,
		Doc:   "serve /metrics, /healthz and /readyz on host:port (empty: off)",
		field: func(c *Config) any { return &c.MetricsAddr },
		check: func(c *Config, p *probs) {
			if c.MetricsAddr != "" {
				checkHostPort(p, c.MetricsAddr, "a listen address such as :9090", false)
			}
		}},
	{Name: "SANDBOT_DEBUG_ADDR", Readers: RoleWorker | RoleBot,
		Doc:   "serve Go's /debug/pprof/ profiles on a loopback host:port such as 127.0.0.1:6060 (empty: off)",
		field: func(c *Config) any { return &c.DebugAddr },
		check: func(c *Config, p *probs) {
			if c.DebugAddr != "" {
				checkLoopbackAddr(p, c.DebugAddr, "a loopback listen address such as 127.0.0.1:6060")
			}
		}},
	{Name: "USER", Default: "local", Readers: bot,
		Doc:   "the terminal front end's user name",
		field: func(c *Config) any { return &c.ConsoleUser }},
}

// Limits that only configuration checks.
const (
	minHistoryLimit = 1 << 20
	maxHistoryLimit = 50 << 20
	// minTranscriptLimit keeps a few turns of conversation in any state.
	minTranscriptLimit = 64 << 10
	// maxCheckpoints bounds the checkpoints in a session's state (each is
	// a few dozen bytes of it, carried through continue-as-new).
	maxCheckpoints = 1000
	// minSessionCache: the SDK's cache holds one fewer than its size,
	// and a worker runs several workflow tasks at once.
	minSessionCache = 2
	maxSessionCache = 100_000
	// minDockerMemory is Docker's own minimum for a container.
	minDockerMemory = 6 << 20
)

func init() {
	seen := map[string]bool{}
	for _, v := range registry {
		if seen[v.Name] {
			panic(fmt.Sprintf("config: %s is registered twice", v.Name))
		}
		seen[v.Name] = true
	}
}
