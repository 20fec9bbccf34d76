package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/session"
)

// env is a fake environment: a minimal valid worker environment plus
// overrides (an override with value "" unsets the variable).
func env(t *testing.T, kv ...string) func(string) (string, bool) {
	t.Helper()
	m := map[string]string{
		"SANDBOT_MODEL_BASE_URL": "http://127.0.0.1:1/v1",
		"SANDBOT_MODEL_NAME":     "test-model",
		"SANDBOT_DEV_DATA_DIR":   t.TempDir(),
	}
	if len(kv)%2 != 0 {
		t.Fatalf("env: odd number of arguments %q", kv)
	}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// testDecisionKey is the decision key every loadEnv environment has unless
// the test sets its own: bot and worker refuse to start without one.
const testDecisionKey = "test-decision-key-0123456789abcdef"

func loadEnv(t *testing.T, kv ...string) *Config {
	t.Helper()
	return load(env(t, append([]string{"SANDBOT_DECISION_KEY", testDecisionKey}, kv...)...))
}

func TestDefaultsValidate(t *testing.T) {
	c := loadEnv(t)
	for _, role := range []Role{RoleWorker, RoleBot, RoleDev} {
		if err := c.Validate(role); err != nil {
			t.Fatalf("valid config rejected for %s: %v", role, err)
		}
	}
	if c.Session.ApprovalMode != string(session.ApproveUnlessReadOnly) || c.Session.ApprovalTimeout != session.DefaultApprovalTimeout {
		t.Errorf("defaults: mode %q timeout %s", c.Session.ApprovalMode, c.Session.ApprovalTimeout)
	}
	if !strings.HasPrefix(c.Sandbox.SnapshotURL, "file://") || !strings.Contains(c.Sandbox.LocalRoot, "workspaces") {
		t.Errorf("derived paths: snapshot %q root %q", c.Sandbox.SnapshotURL, c.Sandbox.LocalRoot)
	}
	want := session.Policy{
		ApprovalMode: session.ApproveUnlessReadOnly, ApprovalTimeout: session.DefaultApprovalTimeout,
		MaxToolCalls: session.DefaultMaxToolCalls, CommandTimeout: session.DefaultCommandTimeout,
		MaxCommandTimeout: session.DefaultMaxCommandTimeout, HistoryLimitBytes: session.DefaultHistoryLimitBytes,
		TranscriptLimitBytes: session.DefaultTranscriptLimitBytes,
		ExecHeartbeat:        session.DefaultExecHeartbeat, ModelTimeout: session.DefaultModelTimeout,
		ModelAttempts: session.DefaultModelAttempts, IdleSuspend: DefaultIdleSuspend,
		Checkpoints: session.DefaultCheckpoints, CheckpointMaxAge: session.DefaultCheckpointMaxAge,
		Model: c.Model.Name, Models: c.Models(),
	}
	if got := c.SessionPolicy(); !reflect.DeepEqual(got, want) {
		t.Errorf("policy:\n got %+v\nwant %+v", got, want)
	}
	if c.Session.Cache != DefaultSessionCache {
		t.Errorf("session cache %d, want %d", c.Session.Cache, DefaultSessionCache)
	}
	if !c.Discord.MessageContent || c.ConsoleUser == "" {
		t.Errorf("message content %v, console user %q", c.Discord.MessageContent, c.ConsoleUser)
	}
}

func TestSessionSettingsAddApprovers(t *testing.T) {
	c := loadEnv(t, "SANDBOT_SESSION_APPROVERS", "U1, U2", "SANDBOT_SLACK_APPROVERS", "U3",
		"SANDBOT_DISCORD_APPROVER_ROLES", "9000000000000000001", "SANDBOT_SESSION_MAX_TOOL_CALLS", "7")
	s := c.SessionSettings()
	if strings.Join(s.Approvers, ",") != "U1,U2,U3" || len(s.ApproverRoles) != 1 || s.MaxToolCalls != 7 {
		t.Fatalf("settings: %+v", s)
	}
	if s.Backends != nil || s.Indexed {
		t.Fatalf("the bot fills backends and indexing: %+v", s)
	}
}

func TestValidationNamesTheVariable(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		role    Role
		wantVar string
		want    string
	}{
		{"missing model", []string{"SANDBOT_MODEL_NAME", ""}, RoleWorker, "SANDBOT_MODEL_NAME", "is not set"},
		{"missing base url", []string{"SANDBOT_MODEL_BASE_URL", ""}, RoleWorker, "SANDBOT_MODEL_BASE_URL", "is not set"},
		{"bad base url", []string{"SANDBOT_MODEL_BASE_URL", "ftp://x"}, RoleWorker, "SANDBOT_MODEL_BASE_URL", "not an http(s) URL"},
		{"unknown approval mode", []string{"SANDBOT_SESSION_APPROVAL_MODE", "sometimes"}, RoleWorker, "SANDBOT_SESSION_APPROVAL_MODE", "use never, always or unless-readonly"},
		{"negative timeout", []string{"SANDBOT_SESSION_COMMAND_TIMEOUT", "-5s"}, RoleWorker, "SANDBOT_SESSION_COMMAND_TIMEOUT", "positive duration"},
		{"command above max", []string{"SANDBOT_SESSION_COMMAND_TIMEOUT", "20m", "SANDBOT_SESSION_MAX_COMMAND_TIMEOUT", "10m"}, RoleWorker, "SANDBOT_SESSION_COMMAND_TIMEOUT", "exceeds SANDBOT_SESSION_MAX_COMMAND_TIMEOUT"},
		{"max above ceiling", []string{"SANDBOT_SESSION_MAX_COMMAND_TIMEOUT", "45m"}, RoleWorker, "SANDBOT_SESSION_MAX_COMMAND_TIMEOUT", "use a positive duration up to 30m"},
		{"negative idle", []string{"SANDBOT_SESSION_IDLE_SUSPEND", "-1m"}, RoleWorker, "SANDBOT_SESSION_IDLE_SUSPEND", "0 (off)"},
		{"unknown backend", []string{"SANDBOT_SANDBOX_BACKENDS", "local,vm"}, RoleWorker, "SANDBOT_SANDBOX_BACKENDS", `"vm" is not a backend`},
		{"default not served", []string{"SANDBOT_SANDBOX_DEFAULT", "docker"}, RoleBot, "SANDBOT_SANDBOX_DEFAULT", "not in SANDBOT_SANDBOX_BACKENDS"},
		{"docker as root", []string{"SANDBOT_SANDBOX_BACKENDS", "local,docker", "SANDBOT_DOCKER_USER", "0:0"}, RoleWorker, "SANDBOT_DOCKER_USER", "runs as root"},
		{"docker host network", []string{"SANDBOT_SANDBOX_BACKENDS", "docker", "SANDBOT_SANDBOX_DEFAULT", "docker", "SANDBOT_DOCKER_NETWORK", "host"}, RoleWorker, "SANDBOT_DOCKER_NETWORK", "use none, bridge"},
		{"docker memory", []string{"SANDBOT_SANDBOX_BACKENDS", "local,docker", "SANDBOT_DOCKER_MEMORY", "1m"}, RoleWorker, "SANDBOT_DOCKER_MEMORY", "at least 6m"},
		{"slack token prefix", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxp-1-secretpart", "SANDBOT_SLACK_APP_TOKEN", "xapp-1"}, RoleBot, "SANDBOT_SLACK_BOT_TOKEN", "starts with xoxp-; use a token that starts with xoxb-"},
		{"slack socket needs app token", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-1"}, RoleBot, "SANDBOT_SLACK_APP_TOKEN", "Socket Mode"},
		{"slack http needs secret", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-1", "SANDBOT_SLACK_MODE", "http"}, RoleBot, "SANDBOT_SLACK_SIGNING_SECRET", "signing secret"},
		{"slack mode", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-1", "SANDBOT_SLACK_MODE", "websocket"}, RoleBot, "SANDBOT_SLACK_MODE", "use socket"},
		{"slack api base", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-1", "SANDBOT_SLACK_APP_TOKEN", "xapp-1", "SANDBOT_SLACK_API_BASE", "http://127.0.0.1:9/api"}, RoleBot, "SANDBOT_SLACK_API_BASE", "does not end in /"},
		{"slack edit interval", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-1", "SANDBOT_SLACK_APP_TOKEN", "xapp-1", "SANDBOT_SLACK_EDIT_INTERVAL", "10ms"}, RoleBot, "SANDBOT_SLACK_EDIT_INTERVAL", "use at least 100ms"},
		{"slack budget", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-1", "SANDBOT_SLACK_APP_TOKEN", "xapp-1", "SANDBOT_SLACK_UPDATE_BUDGET", "1000"}, RoleBot, "SANDBOT_SLACK_UPDATE_BUDGET", "use 1 to 600"},
		{"slack threshold", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-1", "SANDBOT_SLACK_APP_TOKEN", "xapp-1", "SANDBOT_SLACK_UPLOAD_THRESHOLD", "10"}, RoleBot, "SANDBOT_SLACK_UPLOAD_THRESHOLD", "at least 1000"},
		{"slack names instead of IDs", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-1", "SANDBOT_SLACK_APP_TOKEN", "xapp-1", "SANDBOT_SLACK_APPROVERS", "@alice"}, RoleBot, "SANDBOT_SLACK_APPROVERS", `"@alice"`},
		{"discord app id", []string{"SANDBOT_DISCORD_TOKEN", "abc", "SANDBOT_DISCORD_APP_ID", "x1"}, RoleBot, "SANDBOT_DISCORD_APP_ID", "not a Discord ID"},
		{"discord Bot prefix", []string{"SANDBOT_DISCORD_TOKEN", "Bot abc"}, RoleBot, "SANDBOT_DISCORD_TOKEN", "use the bare token"},
		{"discord token shape", []string{"SANDBOT_DISCORD_TOKEN", "hunter2"}, RoleBot, "SANDBOT_DISCORD_TOKEN", "does not look like a bot token"},
		{"discord guild not allowed", []string{"SANDBOT_DISCORD_APP_ID", "1000000000000000001", "SANDBOT_DISCORD_GUILD_ID", "4000000000000000001", "SANDBOT_DISCORD_ALLOWED_GUILDS", "4000000000000000002"}, RoleBot, "SANDBOT_DISCORD_GUILD_ID", "not in SANDBOT_DISCORD_ALLOWED_GUILDS"},
		{"discord edit interval", []string{"SANDBOT_DISCORD_APP_ID", "1000000000000000001", "SANDBOT_DISCORD_EDIT_INTERVAL", "100ms"}, RoleBot, "SANDBOT_DISCORD_EDIT_INTERVAL", "use 250ms or more"},
		{"log level", []string{"SANDBOT_LOG_LEVEL", "loud"}, RoleBot, "SANDBOT_LOG_LEVEL", "debug, info, warn or error"},
		{"metrics addr", []string{"SANDBOT_METRICS_ADDR", "9090"}, RoleWorker, "SANDBOT_METRICS_ADDR", "not host:port"},
		{"debug addr on every interface", []string{"SANDBOT_DEBUG_ADDR", ":6060"}, RoleWorker, "SANDBOT_DEBUG_ADDR", "loopback only"},
		{"debug addr on a public IP", []string{"SANDBOT_DEBUG_ADDR", "10.0.0.5:6060"}, RoleBot, "SANDBOT_DEBUG_ADDR", "loopback only"},
		{"debug addr", []string{"SANDBOT_DEBUG_ADDR", "6060"}, RoleWorker, "SANDBOT_DEBUG_ADDR", "not host:port"},
		{"dev ports", []string{"SANDBOT_DEV_UI_PORT", "7233"}, RoleDev, "SANDBOT_DEV_UI_PORT", "a port of its own"},
		{"session cache too small", []string{"SANDBOT_SESSION_CACHE", "1"}, RoleWorker, "SANDBOT_SESSION_CACHE", "use 2 to 100000 sessions"},
		{"session cache", []string{"SANDBOT_SESSION_CACHE", "lots"}, RoleWorker, "SANDBOT_SESSION_CACHE", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := loadEnv(t, tc.env...).Validate(tc.role)
			if err == nil {
				t.Fatalf("want an error naming %s", tc.wantVar)
			}
			var line string
			for _, l := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(l, tc.wantVar+": ") && strings.Contains(l, tc.want) {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no line %q...%q in:\n%s", tc.wantVar+": ", tc.want, err)
			}
			if !strings.Contains(line, "; use") && !strings.Contains(line, "use ") {
				t.Errorf("%q does not say what to use", line)
			}
			if strings.Contains(err.Error(), "secretpart") {
				t.Errorf("the error repeats a secret: %v", err)
			}
		})
	}
}

// TestMalformedValuesReportedWithOthers: a value that does not parse is
// reported in the same wording as every other problem, together with an
// unrelated one, not instead of it.
func TestMalformedValuesReportedWithOthers(t *testing.T) {
	cases := []struct {
		kind, name, value, want string
	}{
		{"duration", "SANDBOT_MODEL_TIMEOUT", "abc", `SANDBOT_MODEL_TIMEOUT: "abc" is not a duration; use a number with a unit, such as 90s, 5m or 1h30m`},
		{"int", "SANDBOT_SESSION_MAX_TOOL_CALLS", "lots", `SANDBOT_SESSION_MAX_TOOL_CALLS: "lots" is not a whole number; use digits only`},
		{"bool", "SANDBOT_MODEL_STREAM", "maybe", `SANDBOT_MODEL_STREAM: "maybe" is not a boolean; use true or false`},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			c := loadEnv(t, tc.name, tc.value, "SANDBOT_MODEL_NAME", "", "SANDBOT_LOG_LEVEL", "loud")
			err := c.Validate(RoleWorker)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			for _, want := range []string{tc.want, "SANDBOT_MODEL_NAME: is not set; use", `SANDBOT_LOG_LEVEL: "loud" is not a log level; use`} {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q:\n%s", want, msg)
				}
			}
			if n := strings.Count(msg, tc.name+":"); n != 1 {
				t.Errorf("%s reported %d times:\n%s", tc.name, n, msg)
			}
		})
	}
}

func TestMalformedValueOfAnotherProcessIsNotItsProblem(t *testing.T) {
	c := loadEnv(t, "SANDBOT_MODEL_TIMEOUT", "abc", "SANDBOT_SLACK_EDIT_INTERVAL", "soon")
	if err := c.Validate(RoleBot); err == nil || strings.Contains(err.Error(), "MODEL") || !strings.Contains(err.Error(), "SANDBOT_SLACK_EDIT_INTERVAL") {
		// The Slack interval is checked even with Slack off: it did not parse.
		t.Fatalf("bot: %v", err)
	}
	if err := c.Validate(RoleWorker); err == nil || strings.Contains(err.Error(), "SLACK") {
		t.Fatalf("worker: %v", err)
	}
	if c.Model.Timeout != session.DefaultModelTimeout {
		t.Fatalf("a malformed value keeps the default, got %s", c.Model.Timeout)
	}
}

func TestWorkerDoesNotNeedChatTokens(t *testing.T) {
	if err := loadEnv(t, "SANDBOT_DISCORD_TOKEN", "nonsense").Validate(RoleWorker); err != nil {
		t.Fatal(err)
	}
	// The worker downloads Slack attachments with the bot token, so a
	// malformed one is its problem too; an unset one is not.
	if err := loadEnv(t, "SANDBOT_SLACK_BOT_TOKEN", "nonsense").Validate(RoleWorker); err == nil || !strings.Contains(err.Error(), "SANDBOT_SLACK_BOT_TOKEN") {
		t.Fatalf("worker with a malformed Slack bot token: %v", err)
	}
}

func TestBotDoesNotNeedTheModel(t *testing.T) {
	c := loadEnv(t, "SANDBOT_MODEL_BASE_URL", "", "SANDBOT_MODEL_NAME", "", "SANDBOT_SESSION_MAX_COMMAND_TIMEOUT", "2h")
	if err := c.Validate(RoleBot); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(RoleWorker); err == nil || !strings.Contains(err.Error(), "SANDBOT_SESSION_MAX_COMMAND_TIMEOUT") {
		t.Fatalf("the worker reads the policy: %v", err)
	}
}

func TestListsAndSizes(t *testing.T) {
	c := loadEnv(t, "SANDBOT_SANDBOX_BACKENDS", " local , docker,,", "SANDBOT_DOCKER_MEMORY", "1.5g")
	if strings.Join(c.Sandbox.Backends, "|") != "local|docker" {
		t.Errorf("backends %q", c.Sandbox.Backends)
	}
	if c.Docker.Memory != 3<<29 {
		t.Errorf("memory %d", c.Docker.Memory)
	}
	if got := durationText(90 * time.Minute); got != "1h30m" {
		t.Errorf("durationText = %s", got)
	}
}

func TestDecisionKeyIsRequiredByBotAndWorker(t *testing.T) {
	c := loadEnv(t, "SANDBOT_DECISION_KEY", "short")
	for _, role := range []Role{RoleWorker, RoleBot} {
		err := c.Validate(role)
		if err == nil || !strings.Contains(err.Error(), "SANDBOT_DECISION_KEY: is 5 bytes; use the same secret of at least 32 bytes") {
			t.Errorf("%s accepted a 5-byte decision key: %v", role, err)
		}
	}
	// cmd/dev makes its own per run when none is set.
	if err := loadEnv(t, "SANDBOT_DECISION_KEY", "").Validate(RoleDev); err != nil {
		t.Errorf("dev: %v", err)
	}
}

// The docker settings the README says are refused stop a worker that
// serves docker at start-up, each naming its variable.
func TestBadDockerSettingsStopTheWorker(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"SANDBOT_DOCKER_USER", "root"},
		{"SANDBOT_DOCKER_USER", "0"},
		{"SANDBOT_DOCKER_USER", "0:1000"},
		{"SANDBOT_DOCKER_USER", "1000:0"},
		{"SANDBOT_DOCKER_NETWORK", "host"},
		{"SANDBOT_DOCKER_NETWORK", "container:abc"},
		{"SANDBOT_DOCKER_PIDS_LIMIT", "-1"},
		{"SANDBOT_DOCKER_CPUS", "-2"},
		{"SANDBOT_DOCKER_MEMORY", "1k"},
	} {
		c := loadEnv(t, "SANDBOT_SANDBOX_BACKENDS", "local,docker", tc.name, tc.value)
		err := c.Validate(RoleWorker)
		if err == nil || !strings.Contains(err.Error(), tc.name+": ") {
			t.Errorf("%s=%s: worker validation said %v", tc.name, tc.value, err)
		}
	}
}

// A cloud backend is served when its key is set; listing one without its
// key, or a key that is not the provider's, stops a worker naming the key.
func TestCloudBackendKeys(t *testing.T) {
	const dtn = "dtn_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const e2b = "e2b_0123456789abcdef0123456789abcdef01234567"
	c := loadEnv(t, "SANDBOT_SANDBOX_BACKENDS", "local", "E2B_API_KEY", e2b)
	if err := c.Validate(RoleWorker); err != nil {
		t.Fatalf("worker with an E2B key: %v", err)
	}
	if got := strings.Join(c.Backends(), ","); got != "local,e2b" {
		t.Errorf("Backends = %s, want local,e2b", got)
	}
	c = loadEnv(t, "SANDBOT_SANDBOX_BACKENDS", "local,daytona,e2b", "DAYTONA_API_KEY", dtn, "E2B_API_KEY", e2b)
	if got := strings.Join(c.Backends(), ","); got != "local,daytona,e2b" {
		t.Errorf("Backends = %s, want local,daytona,e2b (each once)", got)
	}
	if got := strings.Join(loadEnv(t).Backends(), ","); got != "local" {
		t.Errorf("without keys Backends = %s, want local", got)
	}
	for _, tc := range []struct {
		kv   []string
		want string
	}{
		{[]string{"SANDBOT_SANDBOX_BACKENDS", "local,daytona"}, "DAYTONA_API_KEY: is not set, but SANDBOT_SANDBOX_BACKENDS lists daytona"},
		{[]string{"SANDBOT_SANDBOX_BACKENDS", "e2b"}, "E2B_API_KEY: is not set, but SANDBOT_SANDBOX_BACKENDS lists e2b"},
		{[]string{"DAYTONA_API_KEY", "sk-not-daytona"}, `DAYTONA_API_KEY: does not start with "dtn_"`},
		{[]string{"E2B_API_KEY", dtn}, `E2B_API_KEY: does not start with "e2b_"`},
		{[]string{"E2B_API_KEY", e2b, "E2B_API_URL", "ftp://x"}, "E2B_API_URL: "},
		{[]string{"DAYTONA_API_KEY", dtn, "SANDBOT_DAYTONA_SNAPSHOT", "s", "SANDBOT_DAYTONA_IMAGE", "i"}, "SANDBOT_DAYTONA_SNAPSHOT: and SANDBOT_DAYTONA_IMAGE are both set"},
		{[]string{"E2B_API_KEY", e2b, "SANDBOT_E2B_TTL", "30s"}, "SANDBOT_E2B_TTL: 30s is below a minute"},
		{[]string{"E2B_API_KEY", e2b, "SANDBOT_E2B_WORKDIR", "rel/dir"}, "SANDBOT_E2B_WORKDIR: "},
	} {
		err := loadEnv(t, tc.kv...).Validate(RoleWorker)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: worker validation said %v, want %q", tc.kv, err, tc.want)
		}
	}
	// The bot offers what SANDBOT_SANDBOX_BACKENDS lists; it never holds
	// the keys.
	if err := loadEnv(t, "SANDBOT_SANDBOX_BACKENDS", "local,e2b", "SANDBOT_SANDBOX_DEFAULT", "e2b").Validate(RoleBot); err != nil {
		t.Errorf("bot offering e2b without its key: %v", err)
	}
}

// TestDebugAddrOnLoopback: the profiles may be served on a loopback
// address, by IP or as localhost, and on nothing else (the cases above).
func TestDebugAddrOnLoopback(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:6060", "[::1]:6060", "localhost:0", ""} {
		if err := loadEnv(t, "SANDBOT_DEBUG_ADDR", addr).Validate(RoleWorker); err != nil {
			t.Errorf("SANDBOT_DEBUG_ADDR=%q rejected: %v", addr, err)
		}
	}
}

// The transcript a session keeps is the worker's policy, within the range
// a state can carry; a value outside it stops the worker, saying so.
func TestTranscriptLimit(t *testing.T) {
	c := loadEnv(t, "SANDBOT_SESSION_TRANSCRIPT_LIMIT", "262144")
	if err := c.Validate(RoleWorker); err != nil {
		t.Fatalf("256 KiB: %v", err)
	}
	if got := c.SessionPolicy().TranscriptLimitBytes; got != 256<<10 {
		t.Errorf("policy's transcript limit %d, want %d", got, 256<<10)
	}
	for _, v := range []string{"1000", "2097152", "0"} {
		err := loadEnv(t, "SANDBOT_SESSION_TRANSCRIPT_LIMIT", v).Validate(RoleWorker)
		if err == nil || !strings.Contains(err.Error(), "SANDBOT_SESSION_TRANSCRIPT_LIMIT: "+v+" is out of range; use 65536 to 1048576 bytes") {
			t.Errorf("SANDBOT_SESSION_TRANSCRIPT_LIMIT=%s: %v", v, err)
		}
	}
}
