package workerapp

import (
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/redact"
)

// secrets are the values the worker holds that no session may ever see: the
// activities scrub them from command output, model answers and error texts
// (see redact). cmd/worker and cmd/dev read the same configuration, so
// the chat tokens are included whenever the process has them (cmd/dev
// always runs the bot too). Every registry variable marked Secret must be
// listed here; a test checks it.
func secrets(cfg *config.Config) []redact.Secret {
	out := []redact.Secret{
		{Name: "SANDBOT_MODEL_API_KEY", Value: cfg.Model.APIKey},
		{Name: "SANDBOT_DECISION_KEY", Value: cfg.DecisionKey},
		{Name: "SANDBOT_TEMPORAL_API_KEY", Value: cfg.Temporal.APIKey},
		{Name: "SANDBOT_SLACK_BOT_TOKEN", Value: cfg.Slack.BotToken},
		{Name: "SANDBOT_SLACK_APP_TOKEN", Value: cfg.Slack.AppToken},
		{Name: "SANDBOT_SLACK_SIGNING_SECRET", Value: cfg.Slack.SigningSecret},
		{Name: "SANDBOT_DISCORD_TOKEN", Value: cfg.Discord.Token},
	}
	// Credentials written into the snapshot store's URL (s3://key:secret@...
	// or as query parameters).
	return append(out, redact.URLSecrets("SANDBOT_SANDBOX_SNAPSHOT_URL", cfg.Sandbox.SnapshotURL)...)
}
