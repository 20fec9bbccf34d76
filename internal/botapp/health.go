package botapp

import (
	"context"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/chat/discord"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/internal/app"
)

// Checks are the bot's readiness conditions: Temporal answers through c,
// and every enabled chat platform is connected (Slack's socket or HTTP
// listener, Discord's gateway). The terminal front end has nothing to
// check.
func (b *Bot) Checks(c client.Client) []app.Check {
	checks := []app.Check{app.TemporalCheck(c, b.cfg.Temporal.Namespace)}
	if a := b.Slack; a != nil {
		checks = append(checks, app.Check{Name: slack.Platform, Probe: func(context.Context) error { return a.Connected() }})
	}
	if a := b.Discord; a != nil {
		checks = append(checks, app.Check{Name: discord.Platform, Probe: func(context.Context) error { return a.Connected() }})
	}
	return checks
}
