package workerapp

import (
	"encoding/pem"
	"os"

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
		{Name: "DAYTONA_API_KEY", Value: cfg.Daytona.APIKey},
		{Name: "E2B_API_KEY", Value: cfg.E2B.APIKey},
		{Name: "SANDBOT_GITHUB_TOKEN", Value: cfg.Repos.Token},
	}
	// Credentials written into the snapshot store's URL (s3://key:secret@...
	// or as query parameters).
	out = append(out, redact.URLSecrets("SANDBOT_SANDBOX_SNAPSHOT_URL", cfg.Sandbox.SnapshotURL)...)
	// The AWS SDK behind an s3:// store reads its credentials from the
	// environment (or files and instance metadata, which it never prints).
	for _, name := range awsSecretEnv {
		out = append(out, redact.Secret{Name: name, Value: os.Getenv(name)})
	}
	out = append(out, pemSecrets("SANDBOT_GITHUB_APP_KEY_FILE", cfg.Repos.AppKeyFile)...)
	return append(out, pemSecrets("SANDBOT_TEMPORAL_TLS_KEY", cfg.Temporal.TLSKey)...)
}

// awsSecretEnv are the AWS SDK's secret environment variables.
var awsSecretEnv = []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}

// pemSecrets are the DER bodies of the PEM blocks in the file at path (the
// mTLS private key): a PEM file is the base64 of its DER, wrapped into
// lines, which the redactor finds. A file that cannot be read yields none;
// the configuration check has already reported it.
func pemSecrets(name, path string) []redact.Secret {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []redact.Secret
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			return out
		}
		out = append(out, redact.Secret{Name: name, Value: string(b.Bytes)})
	}
}
