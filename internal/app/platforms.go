package app

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/chat/discord"
	"github.com/sandbot/sandbot/config"
)

// discordConfig maps SANDBOT_DISCORD_* onto the adapter's config. The
// /backend choices list the backends that running workers serve.
func discordConfig(cfg *config.Config, c client.Client) discord.Config {
	return discord.Config{
		Token: cfg.Discord.Token, ApplicationID: cfg.Discord.AppID, GuildID: cfg.Discord.GuildID,
		AllowedGuilds: cfg.Discord.AllowedGuilds, AllowedChannels: cfg.Discord.AllowedChannels,
		AllowedUsers: cfg.Discord.AllowedUsers, AllowedRoles: cfg.Discord.AllowedRoles,
		ApproverRoles: cfg.Discord.ApproverRoles, MessageContentIntent: cfg.Discord.MessageContent,
		EditInterval: cfg.Discord.EditInterval, APIBase: cfg.Discord.APIBase,
		Backends: cfg.Sandbox.Backends,
		ListBackends: func(ctx context.Context) ([]string, error) {
			return ServedBackends(ctx, c, cfg.Temporal.TaskQueue, cfg.Sandbox.Backends)
		},
	}
}

// platforms builds the runners of the enabled chat platforms.
func (b *Bot) platforms(ctx context.Context) ([]runner, error) {
	var rs []runner
	if b.discord != nil {
		a, err := discord.New(*b.discord, b.Core, b.log.With("platform", "discord"))
		if err != nil {
			return nil, fmt.Errorf("discord: %w", err)
		}
		rs = append(rs, runner{name: "discord", run: a.Run})
	}
	slackRunners, err := b.slackRunners()
	if err != nil {
		return nil, err
	}
	return append(rs, slackRunners...), nil
}
