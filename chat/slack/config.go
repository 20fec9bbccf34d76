package slack

import (
	"errors"
	"fmt"
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
	DefaultEditBurst             = 4
	DefaultUpdateBudgetPerMinute = 50
	// DeleteBudgetPerMinute is the workspace's chat.delete budget (Tier 3).
	DeleteBudgetPerMinute      = 50
	DefaultFileUploadThreshold = 12000
	DefaultListenAddr          = ":3000"
	DefaultSlashCommand        = "/sandbot"
	DefaultAckWithin           = 2 * time.Second
)

// ForkShortcut is the callback_id of the "Fork this session" message
// shortcut (see deploy/slack-app-manifest.yaml).
const ForkShortcut = "fork_session"

// Config configures the Slack adapter. Zero values take the documented
// defaults. The bot's assembly fills it from package config, which reads
// and validates the environment; Validate here only catches programming
// errors, so its messages name fields, not environment variables.
type Config struct {
	// BotToken is the bot user OAuth token, xoxb-….
	BotToken string
	// AppToken is the app-level token with connections:write, xapp-…,
	// needed in Socket Mode.
	AppToken string
	// SigningSecret verifies HTTP-mode requests.
	SigningSecret string
	// Mode is "socket" (default) or "http".
	Mode Mode
	// ListenAddr is the HTTP-mode listen address, default ":3000".
	// Requests go to /slack/events, /slack/commands and
	// /slack/interactivity.
	ListenAddr string
	// AllowedChannels, if set, are the only channel IDs where sessions may
	// start. DMs count as channels.
	AllowedChannels []string
	// AllowedUsers, if set, are the only user IDs who may use the bot.
	AllowedUsers []string
	// Approvers are user IDs who may decide any approval, in addition to a
	// session's owner; messages from them carry chat.Message.Admin. The
	// same IDs go into the session's settings.
	Approvers []string
	// RequireMention makes replies in a session thread need a mention to
	// reach the session. DMs never need one.
	RequireMention bool
	// APIURL overrides Slack's Web API base, for example a fake's
	// "http://127.0.0.1:PORT/api/". It must end in "/" because the client
	// appends method names to it.
	APIURL string
	// EditInterval and EditBurst pace the edits of one message: up to
	// EditBurst edits back to back after a quiet spell, then one per
	// EditInterval (a token bucket, refilled one edit per EditInterval,
	// measured from the end of an edit). Defaults 1.5 s and 4: the status
	// post and a few quick tool calls after it show as they happen, the
	// turn's last edit does not wait out an interval, and a busy message
	// still averages one edit per EditInterval. UpdateBudgetPerMinute caps
	// the edits of all messages together.
	EditInterval time.Duration
	EditBurst    int
	// UpdateBudgetPerMinute caps chat.update calls per minute across the
	// workspace, default 50 (Slack's Tier 3).
	UpdateBudgetPerMinute int
	// FileUploadThreshold is the answer length in characters beyond which
	// the full answer is uploaded as a file with a summary message,
	// default 12,000.
	FileUploadThreshold int
	// Streaming puts each turn's tool calls, as task updates, and its
	// answer into a native streamed message (chat.startStream); the card
	// keeps the approvals and the Stop button (see stream.go). Off by
	// default.
	Streaming bool
	// SlashCommand is the registered channel-level command, default
	// "/sandbot" (as in deploy/slack-app-manifest.yaml).
	SlashCommand string
	// AckWithin is how long an event, command or interaction waits for its
	// work to be handed to the session, default 2 s (Slack allows 3). It is
	// acknowledged once handed on, so a bot that dies before leaves it
	// unacknowledged: Slack delivers an event again and shows the clicking
	// user that the app did not respond, instead of the message or click
	// vanishing. An event or click not handed on within AckWithin is not
	// acknowledged at all, for the same reason; a slash command is (its
	// answer comes later through its response_url).
	AckWithin time.Duration
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
	if c.EditBurst == 0 {
		c.EditBurst = DefaultEditBurst
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
	if c.AckWithin == 0 {
		c.AckWithin = DefaultAckWithin
	}
	return c
}

// Validate reports a configuration the adapter cannot run with: missing
// credentials for the mode, an unknown mode, negative limits, a malformed
// API URL or slash command. Operators' mistakes are caught earlier, by
// package config, with the variable to fix; these are programming errors.
// Secrets are never echoed.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("slack: config: "+format, a...)) }
	if c.BotToken == "" {
		bad("BotToken is empty")
	}
	switch c.Mode {
	case ModeSocket:
		if c.AppToken == "" {
			bad("AppToken is empty; Socket Mode needs an app-level token")
		}
	case ModeHTTP:
		if c.SigningSecret == "" {
			bad("SigningSecret is empty; HTTP mode verifies every request with it")
		}
	default:
		bad("Mode %q is neither %q nor %q", c.Mode, ModeSocket, ModeHTTP)
	}
	if c.APIURL != "" && !strings.HasSuffix(c.APIURL, "/") {
		bad("APIURL %q must end in \"/\"", c.APIURL)
	}
	if c.EditInterval < 0 || c.EditBurst < 0 || c.UpdateBudgetPerMinute < 0 || c.FileUploadThreshold < 0 {
		bad("EditInterval, EditBurst, UpdateBudgetPerMinute and FileUploadThreshold must not be negative (zero means the default)")
	}
	if !strings.HasPrefix(c.SlashCommand, "/") || strings.ContainsAny(c.SlashCommand, " \t") {
		bad("SlashCommand %q must be one word starting with \"/\"", c.SlashCommand)
	}
	return errors.Join(errs...)
}
