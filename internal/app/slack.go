package app

import "github.com/sandbot/sandbot/chat"

// slackSetup holds the Slack adapter's config until it runs.
type slackSetup struct{}

func (b *Bot) slackSetup(budgets map[string]chat.Budget, auth map[string]func(chat.User, chat.Thread) error) error {
	return nil
}

func (b *Bot) slackRunners() ([]runner, error) { return nil, nil }
