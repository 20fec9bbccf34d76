package config

import (
	"strings"
	"testing"
	"time"
)

// setenv sets a minimal valid worker environment plus overrides.
func setenv(t *testing.T, kv ...string) {
	t.Helper()
	base := map[string]string{
		"SANDBOT_MODEL_BASE_URL": "http://127.0.0.1:1/v1",
		"SANDBOT_MODEL_NAME":     "test-model",
		"SANDBOT_DEV_DATA_DIR":   t.TempDir(),
	}
	for i := 0; i+1 < len(kv); i += 2 {
		base[kv[i]] = kv[i+1]
	}
	for k, v := range base {
		t.Setenv(k, v)
	}
}

func load(t *testing.T) *Config {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestDefaultsValidate(t *testing.T) {
	setenv(t)
	c := load(t)
	if err := c.Validate(RoleDev); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	if c.Session.ApprovalMode != "unless-readonly" || c.Session.ApprovalTimeout != 30*time.Minute {
		t.Errorf("defaults: mode %q timeout %s", c.Session.ApprovalMode, c.Session.ApprovalTimeout)
	}
	if !strings.HasPrefix(c.Sandbox.SnapshotURL, "file://") || !strings.Contains(c.Sandbox.LocalRoot, "workspaces") {
		t.Errorf("derived paths: snapshot %q root %q", c.Sandbox.SnapshotURL, c.Sandbox.LocalRoot)
	}
	s := c.SessionSettings()
	if s.MaxToolCalls != 50 || s.CommandTimeout != 2*time.Minute {
		t.Errorf("session settings: %+v", s)
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
		{"unknown approval mode", []string{"SANDBOT_SESSION_APPROVAL_MODE", "sometimes"}, RoleWorker, "SANDBOT_SESSION_APPROVAL_MODE", "allowed: never, always, unless-readonly"},
		{"negative timeout", []string{"SANDBOT_SESSION_COMMAND_TIMEOUT", "-5s"}, RoleWorker, "SANDBOT_SESSION_COMMAND_TIMEOUT", "positive duration"},
		{"negative idle", []string{"SANDBOT_SESSION_IDLE_SUSPEND", "-1m"}, RoleWorker, "SANDBOT_SESSION_IDLE_SUSPEND", "0 (off)"},
		{"unknown backend", []string{"SANDBOT_SANDBOX_BACKENDS", "local,vm"}, RoleWorker, "SANDBOT_SANDBOX_BACKENDS", `"vm" is not a backend`},
		{"slack token prefix", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxp-1", "SANDBOT_SLACK_APP_TOKEN", "xapp-1"}, RoleBot, "SANDBOT_SLACK_BOT_TOKEN", "xoxb-"},
		{"slack socket needs app token", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-1"}, RoleBot, "SANDBOT_SLACK_APP_TOKEN", "Socket Mode"},
		{"slack http needs secret", []string{"SANDBOT_SLACK_BOT_TOKEN", "xoxb-1", "SANDBOT_SLACK_MODE", "http"}, RoleBot, "SANDBOT_SLACK_SIGNING_SECRET", "signing secret"},
		{"discord app id", []string{"SANDBOT_DISCORD_TOKEN", "abc", "SANDBOT_DISCORD_APP_ID", "x1"}, RoleBot, "SANDBOT_DISCORD_APP_ID", "snowflake"},
		{"log level", []string{"SANDBOT_LOG_LEVEL", "loud"}, RoleBot, "SANDBOT_LOG_LEVEL", "debug, info, warn or error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setenv(t, tc.env...)
			err := load(t).Validate(tc.role)
			if err == nil {
				t.Fatalf("want an error naming %s", tc.wantVar)
			}
			if !strings.Contains(err.Error(), tc.wantVar) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q should name %s and say %q", err, tc.wantVar, tc.want)
			}
		})
	}
}

func TestUnparsableValue(t *testing.T) {
	setenv(t, "SANDBOT_SESSION_MAX_TOOL_CALLS", "lots")
	_, err := Load()
	if err == nil || !strings.Contains(err.Error(), "SANDBOT_SESSION_MAX_TOOL_CALLS") {
		t.Fatalf("want parse error naming the variable, got %v", err)
	}
}

func TestWorkerDoesNotNeedChatTokens(t *testing.T) {
	setenv(t)
	if err := load(t).Validate(RoleWorker); err != nil {
		t.Fatal(err)
	}
}
