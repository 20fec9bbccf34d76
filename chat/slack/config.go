package slack

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Platform is the chat.Thread platform of Slack sessions.
const Platform = "slack"

// Mode is how Slack delivers events.
type Mode string

// Modes.
const (
	// ModeSocket receives events over a Socket Mode websocket: no public URL.
	ModeSocket Mode = "socket"
	// ModeHTTP serves the Events API, slash commands and interactivity on
	// one HTTP server, every request verified with the signing secret.
	ModeHTTP Mode = "http"
)

// Defaults for zero Config fields.
const (
	DefaultEditInterval          = 1500 * time.Millisecond
	DefaultUpdateBudgetPerMinute = 50
	DefaultFileUploadThreshold   = 12000
	DefaultListenAddr            = ":3000"
	DefaultSlashCommand          = "/sandbot"
)

// ForkShortcut is the callback_id of the "Fork this session" message
// shortcut (see deploy/slack-app-manifest.yaml).
const ForkShortcut = "fork_session"

// Config configures the Slack adapter. Zero values take the documented
// defaults. The environment variable each field is read from (by package
// config) is named in its comment and in Validate's messages.
type Config struct {
	// BotToken is the bot user OAuth token, xoxb-… (SANDBOT_SLACK_BOT_TOKEN).
	BotToken string
	// AppToken is the app-level token with connections:write, xapp-…,
	// needed in Socket Mode (SANDBOT_SLACK_APP_TOKEN).
	AppToken string
	// SigningSecret verifies HTTP-mode requests (SANDBOT_SLACK_SIGNING_SECRET).
	SigningSecret string
	// Mode is "socket" (default) or "http" (SANDBOT_SLACK_MODE).
	Mode Mode
	// ListenAddr is the HTTP-mode listen address, default ":3000"
	// (SANDBOT_SLACK_LISTEN_ADDR). Requests go to /slack/events,
	// /slack/commands and /slack/interactivity.
	ListenAddr string
	// AllowedChannels, if set, are the only channel IDs where sessions may
	// start (SANDBOT_SLACK_ALLOWED_CHANNELS). DMs count as channels.
	AllowedChannels []string
	// AllowedUsers, if set, are the only user IDs who may use the bot
	// (SANDBOT_SLACK_ALLOWED_USERS).
	AllowedUsers []string
	// Approvers are user IDs who may decide any approval, in addition to a
	// session's owner (SANDBOT_SLACK_APPROVERS); messages from them carry
	// chat.Message.Admin. The lead passes them to session.Settings too.
	Approvers []string
	// RequireMention makes replies in a session thread need a mention to
	// reach the session (SANDBOT_SLACK_REQUIRE_MENTION). DMs never need one.
	RequireMention bool
	// APIURL overrides Slack's Web API base, for example a fake's
	// "http://127.0.0.1:PORT/api/" (SANDBOT_SLACK_API_URL). It must end in
	// "/" because the client appends method names to it.
	APIURL string
	// EditInterval is the least time between two edits of one message,
	// default 1.5 s (SANDBOT_SLACK_EDIT_INTERVAL).
	EditInterval time.Duration
	// UpdateBudgetPerMinute caps chat.update calls per minute across the
	// workspace, default 50 (Slack's Tier 3) (SANDBOT_SLACK_UPDATE_BUDGET).
	UpdateBudgetPerMinute int
	// FileUploadThreshold is the answer length in characters beyond which
	// the full answer is uploaded as a file with a summary message,
	// default 12,000 (SANDBOT_SLACK_FILE_UPLOAD_THRESHOLD).
	FileUploadThreshold int
	// SlashCommand is the registered channel-level command, default
	// "/sandbot" (SANDBOT_SLACK_SLASH_COMMAND).
	SlashCommand string
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeSocket
	}
	if c.ListenAddr == "" {
		c.ListenAddr = DefaultListenAddr
	}
	if c.EditInterval == 0 {
		c.EditInterval = DefaultEditInterval
	}
	if c.UpdateBudgetPerMinute == 0 {
		c.UpdateBudgetPerMinute = DefaultUpdateBudgetPerMinute
	}
	if c.FileUploadThreshold == 0 {
		c.FileUploadThreshold = DefaultFileUploadThreshold
	}
	if c.SlashCommand == "" {
		c.SlashCommand = DefaultSlashCommand
	}
	return c
}

// Validate reports every problem with the configuration, each naming the
// environment variable to fix and what is allowed. Secrets are never
// echoed: a malformed token is described by its prefix only.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("slack: "+format, a...)) }
	token := func(v, env, prefix, what string) {
		switch {
		case v == "":
			bad("%s is not set: set it to the %s (it starts with %q)", env, what, prefix)
		case !strings.HasPrefix(v, prefix):
			bad("%s does not look like a %s: it must start with %q, got %s", env, what, prefix, safePrefix(v))
		case strings.TrimSpace(v) != v:
			bad("%s has leading or trailing white space", env)
		}
	}
	token(c.BotToken, "SANDBOT_SLACK_BOT_TOKEN", "xoxb-", "bot user OAuth token")
	switch c.Mode {
	case ModeSocket:
		token(c.AppToken, "SANDBOT_SLACK_APP_TOKEN", "xapp-", "app-level token (with connections:write) that Socket Mode needs")
	case ModeHTTP:
		if c.SigningSecret == "" {
			bad("SANDBOT_SLACK_SIGNING_SECRET is not set: HTTP mode verifies every request with the app's signing secret (Basic Information → App Credentials)")
		}
		if c.ListenAddr == "" || !strings.Contains(c.ListenAddr, ":") {
			bad("SANDBOT_SLACK_LISTEN_ADDR %q is not a listen address like \":3000\" or \"127.0.0.1:3000\"", c.ListenAddr)
		}
	default:
		bad("SANDBOT_SLACK_MODE is %q: use \"socket\" (default, no public URL needed) or \"http\"", c.Mode)
	}
	if c.APIURL != "" {
		u, err := url.Parse(c.APIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.HasSuffix(c.APIURL, "/") {
			bad("SANDBOT_SLACK_API_URL %q must be an http(s) URL ending in \"/\", like \"https://slack.com/api/\"", c.APIURL)
		}
	}
	if c.EditInterval < 0 || (c.EditInterval > 0 && c.EditInterval < 100*time.Millisecond) {
		bad("SANDBOT_SLACK_EDIT_INTERVAL is %v: use at least 100ms (Slack throttles faster edits; default 1.5s)", c.EditInterval)
	}
	if c.UpdateBudgetPerMinute < 1 || c.UpdateBudgetPerMinute > 600 {
		bad("SANDBOT_SLACK_UPDATE_BUDGET is %d: use 1 to 600 chat.update calls per minute (Slack's Tier 3 allows about 50)", c.UpdateBudgetPerMinute)
	}
	if c.FileUploadThreshold < 1000 {
		bad("SANDBOT_SLACK_FILE_UPLOAD_THRESHOLD is %d: use at least 1000 characters (default 12000)", c.FileUploadThreshold)
	}
	if !strings.HasPrefix(c.SlashCommand, "/") || strings.ContainsAny(c.SlashCommand, " \t") {
		bad("SANDBOT_SLACK_SLASH_COMMAND %q must be one word starting with \"/\", like \"/sandbot\"", c.SlashCommand)
	}
	for _, list := range []struct {
		env string
		ids []string
	}{{"SANDBOT_SLACK_ALLOWED_CHANNELS", c.AllowedChannels}, {"SANDBOT_SLACK_ALLOWED_USERS", c.AllowedUsers}, {"SANDBOT_SLACK_APPROVERS", c.Approvers}} {
		for _, id := range list.ids {
			if id == "" || strings.ContainsAny(id, " \t<>@#") {
				bad("%s contains %q: list Slack IDs such as C0123ABCD or U0123ABCD, comma-separated (not names or mentions)", list.env, id)
			}
		}
	}
	return errors.Join(errs...)
}

// safePrefix names a token's type prefix (such as "xoxp") without showing
// any of the secret: only a short all-letter part before the first dash.
func safePrefix(v string) string {
	p, _, found := strings.Cut(v, "-")
	if !found || len(p) > 5 || strings.Trim(p, "abcdefghijklmnopqrstuvwxyz") != "" {
		return "(no token prefix)"
	}
	return p + "-"
}
