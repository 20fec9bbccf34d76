package botapp

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/chat/discord"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/session"
)

// slackConfig maps the validated Slack settings onto the adapter's
// configuration. Zero pacing values take the adapter's defaults.
func slackConfig(cfg *config.Config) slack.Config {
	s := cfg.Slack
	return slack.Config{
		BotToken: s.BotToken, AppToken: s.AppToken, SigningSecret: s.SigningSecret, Mode: slack.Mode(s.Mode),
		ListenAddr: s.ListenAddr, AllowedChannels: s.AllowedChannels, AllowedUsers: s.AllowedUsers,
		Approvers: s.Approvers, RequireMention: s.RequireMention, APIURL: s.APIBase,
		EditInterval: s.EditInterval, UpdateBudgetPerMinute: s.UpdateBudget, FileUploadThreshold: s.UploadThreshold,
		Streaming: s.Streaming,
	}
}

// discordConfig maps the validated Discord settings onto the adapter's
// configuration. The /backend choices list the backends that running
// workers serve.
func discordConfig(cfg *config.Config, c client.Client) discord.Config {
	d := cfg.Discord
	return discord.Config{
		Token: d.Token, ApplicationID: d.AppID, GuildID: d.GuildID,
		AllowedGuilds: d.AllowedGuilds, AllowedChannels: d.AllowedChannels,
		AllowedUsers: d.AllowedUsers, AllowedRoles: d.AllowedRoles,
		ApproverRoles: d.ApproverRoles, MessageContentIntent: d.MessageContent,
		EditInterval: d.EditInterval, APIBase: d.APIBase, RequestsPerSecond: d.RequestsPerSecond,
		Backends: cfg.Backends(),
		ListBackends: func(ctx context.Context) ([]string, error) {
			return ServedBackends(ctx, c, cfg.Temporal.TaskQueue, cfg.Backends())
		},
	}
}

// ServedBackends returns which of the candidate backends have a worker
// polling their task queue right now.
func ServedBackends(ctx context.Context, c client.Client, taskQueue string, candidates []string) ([]string, error) {
	var served []string
	for _, name := range candidates {
		resp, err := c.DescribeTaskQueue(ctx, session.BackendQueue(taskQueue, name), enumspb.TASK_QUEUE_TYPE_ACTIVITY)
		if err != nil {
			return nil, fmt.Errorf("describe task queue of backend %s: %w", name, err)
		}
		if len(resp.GetPollers()) > 0 {
			served = append(served, name)
		}
	}
	return served, nil
}
