package workerapp

import (
	"github.com/sandbot/sandbot/attach"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox"
)

// configureFiles gives the sandbox activities what files in and out of a
// session need: the attachment fetcher, which holds the Slack bot token
// (files:read) and reaches only the platforms' file hosts, the caps on
// attachments, whether images are kept for a vision model, and the cap on
// shared files.
func configureFiles(acts *sandbox.Activities, cfg *config.Config) error {
	f, err := attach.New(attach.Config{
		SlackToken: cfg.Slack.BotToken,
		SlackBase:  cfg.Slack.APIBase, DiscordBase: cfg.Discord.APIBase,
	})
	if err != nil {
		return err
	}
	acts.Fetcher = f
	acts.Attach = sandbox.AttachLimits{
		MaxFiles: cfg.Attach.MaxFiles, MaxFileBytes: int64(cfg.Attach.MaxFileBytes), MaxTotalBytes: int64(cfg.Attach.MaxTotalBytes),
	}
	if cfg.Model.Vision {
		acts.Attach.VisionMaxBytes = int64(cfg.Model.VisionMaxBytes)
	}
	acts.ShareMaxBytes = int64(cfg.Attach.ShareMaxBytes)
	return nil
}
