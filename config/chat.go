package config

import (
	"encoding/base64"
	"strings"
	"time"
)

// Chat platform limits that configuration enforces. The adapters trust
// what config hands them and own their defaults (a zero value takes them;
// the registry documents them, pinned by a test of internal/botapp).
const (
	// maxDiscordRequestsPerSecond: Discord's global limit per bot token.
	maxDiscordRequestsPerSecond = 50
	// minSlackEditInterval: Slack throttles faster edits of one message.
	minSlackEditInterval = 100 * time.Millisecond
	// maxSlackUpdateBudget bounds chat.update calls a minute; Slack's Tier 3
	// allows about 50.
	maxSlackUpdateBudget = 600
	// minSlackUploadThreshold keeps short answers in the thread.
	minSlackUploadThreshold = 1000
	// minDiscordEditInterval: Discord allows about five edits per five
	// seconds per channel.
	minDiscordEditInterval = 250 * time.Millisecond
)

// slackConfigured reports whether any Slack credential is set: then Slack
// is meant to run and its settings are checked.
func (c *Config) slackConfigured() bool {
	return c.Slack.BotToken != "" || c.Slack.AppToken != "" || c.Slack.SigningSecret != ""
}

// discordConfigured reports whether Discord is meant to run.
func (c *Config) discordConfigured() bool { return c.Discord.Token != "" || c.Discord.AppID != "" }

func whenSlack(check func(*Config, *probs)) func(*Config, *probs) {
	return func(c *Config, p *probs) {
		if c.slackConfigured() {
			check(c, p)
		}
	}
}

func whenDiscord(check func(*Config, *probs)) func(*Config, *probs) {
	return func(c *Config, p *probs) {
		if c.discordConfigured() {
			check(c, p)
		}
	}
}

// slackHTTPMode reports whether Slack runs the HTTP Events API; any other
// valid mode is Socket Mode.
func (c *Config) slackHTTPMode() bool { return c.Slack.Mode == "http" }

var chatVars = []Var{
	// Slack.
	{Name: "SANDBOT_SLACK_BOT_TOKEN", Readers: all, Secret: true,
		Doc:   "Bot User OAuth Token, xoxb-...; enables Slack (the worker downloads Slack attachments with it, files:read)",
		field: func(c *Config) any { return &c.Slack.BotToken },
		check: whenSlack(func(c *Config, p *probs) {
			checkToken(p, c.Slack.BotToken, "xoxb-", "the Bot User OAuth Token from the app's OAuth & Permissions page")
		})},
	{Name: "SANDBOT_SLACK_APP_TOKEN", Readers: bot, Secret: true,
		Doc:   "app-level token with connections:write, xapp-... (Socket Mode)",
		field: func(c *Config) any { return &c.Slack.AppToken },
		check: whenSlack(func(c *Config, p *probs) {
			if !c.slackHTTPMode() {
				checkToken(p, c.Slack.AppToken, "xapp-", "an app-level token with connections:write, which Socket Mode needs (Basic Information → App-Level Tokens)")
			}
		})},
	{Name: "SANDBOT_SLACK_SIGNING_SECRET", Readers: bot, Secret: true,
		Doc:   "verifies every request in HTTP mode",
		field: func(c *Config) any { return &c.Slack.SigningSecret },
		check: whenSlack(func(c *Config, p *probs) {
			if c.slackHTTPMode() && c.Slack.SigningSecret == "" {
				p.add("is not set; use the app's signing secret (Basic Information → App Credentials): HTTP mode verifies every request with it")
			}
		})},
	{Name: "SANDBOT_SLACK_MODE", DefaultDoc: "socket", Readers: bot,
		Doc:   "socket (Socket Mode, no public URL) or http (Events API)",
		field: func(c *Config) any { return &c.Slack.Mode },
		check: whenSlack(func(c *Config, p *probs) {
			switch c.Slack.Mode {
			case "", "socket", "http":
			default:
				p.add("%q is not a mode; use socket (no public URL needed) or http", c.Slack.Mode)
			}
		})},
	{Name: "SANDBOT_SLACK_LISTEN_ADDR", DefaultDoc: ":3000", Readers: bot,
		Doc:   "HTTP mode's listen address (/slack/events, /slack/interactivity, /slack/commands)",
		field: func(c *Config) any { return &c.Slack.ListenAddr },
		check: whenSlack(func(c *Config, p *probs) {
			if c.slackHTTPMode() {
				checkHostPort(p, c.Slack.ListenAddr, `a listen address such as ":3000" or "127.0.0.1:3000"`, false)
			}
		})},
	{Name: "SANDBOT_SLACK_ALLOWED_CHANNELS", Readers: bot,
		Doc:   "only these channel IDs may start sessions (DMs count as channels)",
		field: func(c *Config) any { return &c.Slack.AllowedChannels },
		check: whenSlack(func(c *Config, p *probs) { checkSlackIDs(p, c.Slack.AllowedChannels) })},
	{Name: "SANDBOT_SLACK_ALLOWED_USERS", Readers: bot,
		Doc:   "only these user IDs may use the bot",
		field: func(c *Config) any { return &c.Slack.AllowedUsers },
		check: whenSlack(func(c *Config, p *probs) { checkSlackIDs(p, c.Slack.AllowedUsers) })},
	{Name: "SANDBOT_SLACK_APPROVERS", Readers: bot,
		Doc:   "user IDs that may approve in every session",
		field: func(c *Config) any { return &c.Slack.Approvers },
		check: whenSlack(func(c *Config, p *probs) { checkSlackIDs(p, c.Slack.Approvers) })},
	{Name: "SANDBOT_SLACK_REQUIRE_MENTION", Default: "false", Readers: bot,
		Doc:   "replies in a session thread need a mention (DMs never do)",
		field: func(c *Config) any { return &c.Slack.RequireMention }},
	{Name: "SANDBOT_SLACK_API_BASE", Readers: all,
		Doc:   "Slack Web API base ending in /, e.g. a fake's http://127.0.0.1:PORT/api/ (the worker then downloads Slack attachments from that origin too)",
		field: func(c *Config) any { return &c.Slack.APIBase },
		check: whenSlack(func(c *Config, p *probs) {
			if c.Slack.APIBase != "" {
				checkHTTPURL(p, c.Slack.APIBase, "https://slack.com/api/", true)
			}
		})},
	{Name: "SANDBOT_SLACK_EDIT_INTERVAL", DefaultDoc: "1.5s", Readers: bot,
		Doc:   "least time between edits of one status message",
		field: func(c *Config) any { return &c.Slack.EditInterval },
		check: whenSlack(func(c *Config, p *probs) {
			if d := c.Slack.EditInterval; d < 0 || (d > 0 && d < minSlackEditInterval) {
				p.add("%s is too fast; use at least %s (Slack throttles faster edits)", d, minSlackEditInterval)
			}
		})},
	{Name: "SANDBOT_SLACK_UPDATE_BUDGET", DefaultDoc: "50", Readers: bot,
		Doc:   "chat.update calls a minute per workspace",
		field: func(c *Config) any { return &c.Slack.UpdateBudget },
		check: whenSlack(func(c *Config, p *probs) {
			if n := c.Slack.UpdateBudget; n < 0 || n > maxSlackUpdateBudget {
				p.add("%d is out of range; use 1 to %d chat.update calls a minute (Slack's Tier 3 allows about 50)", n, maxSlackUpdateBudget)
			}
		})},
	{Name: "SANDBOT_SLACK_UPLOAD_THRESHOLD", DefaultDoc: "12000", Readers: bot,
		Doc:   "answers longer than this many characters go up as a file",
		field: func(c *Config) any { return &c.Slack.UploadThreshold },
		check: whenSlack(func(c *Config, p *probs) {
			if n := c.Slack.UploadThreshold; n < 0 || (n > 0 && n < minSlackUploadThreshold) {
				p.add("%d is too small; use at least %d characters", n, minSlackUploadThreshold)
			}
		})},
	{Name: "SANDBOT_SLACK_STREAMING", Default: "false", Readers: bot,
		Doc:   "stream each turn's tool calls and answer into a native Slack streamed message (the card keeps approvals and Stop)",
		field: func(c *Config) any { return &c.Slack.Streaming }},

	// Discord.
	{Name: "SANDBOT_DISCORD_TOKEN", Readers: bot, Secret: true,
		Doc:   "bot token, without \"Bot \"; enables Discord",
		field: func(c *Config) any { return &c.Discord.Token },
		check: whenDiscord(func(c *Config, p *probs) {
			switch tok := c.Discord.Token; {
			case tok == "":
				p.add("is not set; use the bot token from the Developer Portal (Bot → Reset Token)")
			case strings.HasPrefix(tok, "Bot "):
				p.add("starts with \"Bot \"; use the bare token")
			case strings.ContainsAny(tok, " \t\r\n"):
				p.add("contains white space; use the token alone")
			case !discordTokenShape(tok):
				p.add("does not look like a bot token; use the token from the Developer Portal (three dot-separated parts, the first the bot's ID in base64)")
			}
		})},
	{Name: "SANDBOT_DISCORD_APP_ID", Readers: bot,
		Doc:   "Application ID",
		field: func(c *Config) any { return &c.Discord.AppID },
		check: whenDiscord(func(c *Config, p *probs) {
			if c.Discord.AppID == "" {
				p.add("is not set; use the Application ID from the Developer Portal (General Information)")
				return
			}
			checkSnowflakes(p, []string{c.Discord.AppID})
		})},
	{Name: "SANDBOT_DISCORD_GUILD_ID", Readers: bot,
		Doc:   "register the slash commands in this server only (they appear at once)",
		field: func(c *Config) any { return &c.Discord.GuildID },
		check: whenDiscord(func(c *Config, p *probs) {
			g := c.Discord.GuildID
			if g == "" {
				return
			}
			if checkSnowflakes(p, []string{g}) && len(c.Discord.AllowedGuilds) > 0 && !contains(c.Discord.AllowedGuilds, g) {
				p.add("%s is not in SANDBOT_DISCORD_ALLOWED_GUILDS, so its commands could never be used; use an allowed guild", g)
			}
		})},
	{Name: "SANDBOT_DISCORD_ALLOWED_GUILDS", Readers: bot,
		Doc:   "only these servers may use the bot",
		field: func(c *Config) any { return &c.Discord.AllowedGuilds },
		check: whenDiscord(func(c *Config, p *probs) { checkSnowflakes(p, c.Discord.AllowedGuilds) })},
	{Name: "SANDBOT_DISCORD_ALLOWED_CHANNELS", Readers: bot,
		Doc:   "only these channels may start sessions (a thread counts as its channel)",
		field: func(c *Config) any { return &c.Discord.AllowedChannels },
		check: whenDiscord(func(c *Config, p *probs) { checkSnowflakes(p, c.Discord.AllowedChannels) })},
	{Name: "SANDBOT_DISCORD_ALLOWED_USERS", Readers: bot,
		Doc:   "only these users (or holders of an allowed role) may use the bot",
		field: func(c *Config) any { return &c.Discord.AllowedUsers },
		check: whenDiscord(func(c *Config, p *probs) { checkSnowflakes(p, c.Discord.AllowedUsers) })},
	{Name: "SANDBOT_DISCORD_ALLOWED_ROLES", Readers: bot,
		Doc:   "holders of these roles may use the bot",
		field: func(c *Config) any { return &c.Discord.AllowedRoles },
		check: whenDiscord(func(c *Config, p *probs) { checkSnowflakes(p, c.Discord.AllowedRoles) })},
	{Name: "SANDBOT_DISCORD_APPROVER_ROLES", Readers: bot,
		Doc:   "holders of these roles may approve in every session",
		field: func(c *Config) any { return &c.Discord.ApproverRoles },
		check: whenDiscord(func(c *Config, p *probs) { checkSnowflakes(p, c.Discord.ApproverRoles) })},
	{Name: "SANDBOT_DISCORD_MESSAGE_CONTENT", Default: "true", Readers: bot,
		Doc:   "use the privileged Message Content intent (false: mention the bot in every message)",
		field: func(c *Config) any { return &c.Discord.MessageContent }},
	{Name: "SANDBOT_DISCORD_EDIT_INTERVAL", DefaultDoc: "1s", Readers: bot,
		Doc:   "least time between edits of one status message (bursts of 5)",
		field: func(c *Config) any { return &c.Discord.EditInterval },
		check: whenDiscord(func(c *Config, p *probs) {
			if d := c.Discord.EditInterval; d < 0 || (d > 0 && d < minDiscordEditInterval) {
				p.add("%s is too fast; use %s or more (Discord allows about 5 edits per 5 s per channel)", d, minDiscordEditInterval)
			}
		})},
	{Name: "SANDBOT_DISCORD_REQUESTS_PER_SECOND", DefaultDoc: "20", Readers: bot,
		Doc:   "REST requests a second this bot replica sends to Discord, interaction answers excepted; Discord allows 50 a second per bot token, shared by every replica, so give each of N replicas about 40/N (20 for two)",
		field: func(c *Config) any { return &c.Discord.RequestsPerSecond },
		check: whenDiscord(func(c *Config, p *probs) {
			if n := c.Discord.RequestsPerSecond; n < 0 || n > maxDiscordRequestsPerSecond {
				p.add("is %d; use 1 to %d (Discord's limit per bot token, shared by every replica: about 40/N for N replicas)", n, maxDiscordRequestsPerSecond)
			}
		})},
	{Name: "SANDBOT_DISCORD_API_BASE", Readers: all,
		Doc:   "Discord REST base instead of https://discord.com, e.g. a fake's http://127.0.0.1:PORT (the worker then downloads Discord attachments from that origin too)",
		field: func(c *Config) any { return &c.Discord.APIBase },
		check: whenDiscord(func(c *Config, p *probs) {
			if c.Discord.APIBase != "" {
				checkHTTPURL(p, c.Discord.APIBase, "http://127.0.0.1:8099", false)
			}
		})},
}

// checkToken checks a Slack token without ever echoing it: a wrong token
// is described by its type prefix only.
func checkToken(p *probs, v, prefix, use string) {
	switch {
	case v == "":
		p.add("is not set; use %s (it starts with %s)", use, prefix)
	case strings.TrimSpace(v) != v:
		p.add("has leading or trailing white space; use the token alone")
	case !strings.HasPrefix(v, prefix):
		p.add("starts with %s; use a token that starts with %s: %s", safePrefix(v), prefix, use)
	}
}

// safePrefix names a token's type prefix (such as "xoxp-") without showing
// any of the secret: only a short all-letter part before the first dash.
func safePrefix(v string) string {
	pre, _, found := strings.Cut(v, "-")
	if !found || len(pre) > 5 || strings.Trim(pre, "abcdefghijklmnopqrstuvwxyz") != "" {
		return "(no token prefix)"
	}
	return pre + "-"
}

func checkSlackIDs(p *probs, ids []string) {
	for _, id := range ids {
		if strings.ContainsAny(id, " \t<>@#") {
			p.add("contains %q; use Slack IDs such as C0123ABCD or U0123ABCD, comma-separated (not names or mentions)", id)
		}
	}
}

// checkSnowflakes reports IDs that are not Discord IDs; it returns whether
// all are.
func checkSnowflakes(p *probs, ids []string) bool {
	ok := true
	for _, id := range ids {
		if !snowflake(id) {
			p.add("%q is not a Discord ID; use 17 to 20 digits (enable Developer Mode and use Copy ID)", id)
			ok = false
		}
	}
	return ok
}

func snowflake(s string) bool {
	return len(s) >= 17 && len(s) <= 20 && strings.Trim(s, "0123456789") == ""
}

// discordTokenShape reports whether tok has a bot token's three parts, the
// first being a base64-encoded snowflake.
func discordTokenShape(tok string) bool {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return false
	}
	first := strings.TrimRight(parts[0], "=")
	id, err := base64.RawStdEncoding.DecodeString(first)
	if err != nil {
		id, err = base64.RawURLEncoding.DecodeString(first)
	}
	return err == nil && snowflake(string(id))
}
