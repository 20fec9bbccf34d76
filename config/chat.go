package config

import (
	"fmt"
	"strings"
)

// SlackEnabled reports whether the Slack front end is configured.
func (c *Config) SlackEnabled() bool { return c.Slack.BotToken != "" }

// DiscordEnabled reports whether the Discord front end is configured.
func (c *Config) DiscordEnabled() bool { return c.Discord.Token != "" }

func (c *Config) validateSlack() []error {
	if !c.SlackEnabled() && c.Slack.AppToken == "" && c.Slack.SigningSecret == "" {
		return nil
	}
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", env(name), fmt.Sprintf(format, args...)))
	}
	if c.Slack.BotToken == "" {
		bad("SLACK_BOT_TOKEN", "is not set; copy the Bot User OAuth Token (xoxb-...) from the app's OAuth & Permissions page")
	} else if !strings.HasPrefix(c.Slack.BotToken, "xoxb-") {
		bad("SLACK_BOT_TOKEN", "does not look like a bot token: it must start with xoxb-")
	}
	switch c.Slack.Mode {
	case "socket":
		if c.Slack.AppToken == "" {
			bad("SLACK_APP_TOKEN", "is not set; Socket Mode needs an app-level token (xapp-...) with connections:write")
		} else if !strings.HasPrefix(c.Slack.AppToken, "xapp-") {
			bad("SLACK_APP_TOKEN", "does not look like an app-level token: it must start with xapp-")
		}
	case "http":
		if c.Slack.SigningSecret == "" {
			bad("SLACK_SIGNING_SECRET", "is not set; HTTP mode verifies every request with the app's signing secret")
		}
	default:
		bad("SLACK_MODE", "%q is not a mode; use socket or http", c.Slack.Mode)
	}
	if c.Slack.EditInterval < 0 {
		bad("SLACK_EDIT_INTERVAL", "must not be negative")
	}
	if c.Slack.UpdateBudget < 1 {
		bad("SLACK_UPDATE_BUDGET", "must be at least 1 chat.update per minute, got %d", c.Slack.UpdateBudget)
	}
	return errs
}

func (c *Config) validateDiscord() []error {
	if !c.DiscordEnabled() && c.Discord.AppID == "" {
		return nil
	}
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", env(name), fmt.Sprintf(format, args...)))
	}
	if c.Discord.Token == "" {
		bad("DISCORD_TOKEN", "is not set; copy the bot token from the Discord developer portal (Bot page)")
	} else if strings.HasPrefix(c.Discord.Token, "Bot ") {
		bad("DISCORD_TOKEN", "must be the bare token, without the \"Bot \" prefix")
	}
	if c.Discord.AppID == "" {
		bad("DISCORD_APP_ID", "is not set; copy the Application ID from the developer portal (General Information)")
	} else if strings.Trim(c.Discord.AppID, "0123456789") != "" {
		bad("DISCORD_APP_ID", "%q is not a Discord snowflake (digits only)", c.Discord.AppID)
	}
	if c.Discord.EditInterval < 0 {
		bad("DISCORD_EDIT_INTERVAL", "must not be negative")
	}
	return errs
}
