package app

import (
	"context"
	"fmt"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
)

// slackSetup holds the Slack adapter between building the core (which
// needs the adapter's budget) and running it.
type slackSetup struct {
	adapter *slack.Adapter
}

// slackSetup builds the Slack adapter when it is configured and registers
// its edit budget. Access rules (allowed channels and users) are enforced
// by the adapter at the edge.
func (b *Bot) slackSetup(budgets map[string]chat.Budget, _ map[string]func(chat.User, chat.Thread) error) error {
	if !b.cfg.SlackEnabled() {
		return nil
	}
	s := b.cfg.Slack
	a, err := slack.New(slack.Config{
		BotToken: s.BotToken, AppToken: s.AppToken, SigningSecret: s.SigningSecret, Mode: slack.Mode(s.Mode),
		ListenAddr: s.ListenAddr, AllowedChannels: s.AllowedChannels, AllowedUsers: s.AllowedUsers,
		Approvers: s.Approvers, RequireMention: s.RequireMention, APIURL: s.APIBase,
		EditInterval: s.EditInterval, UpdateBudgetPerMinute: s.UpdateBudget, FileUploadThreshold: s.UploadThreshold,
	}, b.log.With("platform", "slack"))
	if err != nil {
		return fmt.Errorf("slack: %w", err)
	}
	b.slack = &slackSetup{adapter: a}
	budgets[slack.Platform] = a.Budget()
	return nil
}

func (b *Bot) slackRunners() ([]runner, error) {
	if b.slack == nil {
		return nil, nil
	}
	a := b.slack.adapter
	return []runner{{name: "slack", run: func(ctx context.Context) error { return a.Run(ctx, b.Core) }}}, nil
}
