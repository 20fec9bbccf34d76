package config

import (
	"strconv"

	"github.com/sandbot/sandbot/session"
)

// Attach is what the worker allows of files in and out of a session: the
// attachments of chat messages it downloads into workspaces, and the
// files the agent shares to the thread (share_file).
type Attach struct {
	// MaxFiles, MaxFileBytes and MaxTotalBytes cap one message's
	// attachments: how many, how large each, how large together.
	MaxFiles      int
	MaxFileBytes  Bytes
	MaxTotalBytes Bytes
	// ShareMaxBytes caps a file share_file posts (the bytes travel to
	// the bot through Temporal, so at most session.MaxShareBytesCeiling).
	ShareMaxBytes Bytes
}

// Attachment defaults (the worker's sandbox package owns the same numbers
// for a zero value; TestFileDefaultsAgree in internal/workerapp keeps them
// equal).
const (
	defaultAttachMaxFiles      = 10
	defaultAttachMaxFileBytes  = "20m"
	defaultAttachMaxTotalBytes = "50m"
	defaultShareMaxBytes       = "1m"
	defaultVisionMaxBytes      = "5m"
)

var attachVars = []Var{
	{Name: "SANDBOT_ATTACH_MAX_FILES", Default: strconv.Itoa(defaultAttachMaxFiles), Readers: worker,
		Doc:   "most files of one chat message downloaded into the workspace (attachments/); the rest are named in the thread as not attached",
		field: func(c *Config) any { return &c.Attach.MaxFiles },
		check: func(c *Config, p *probs) { checkMin(p, c.Attach.MaxFiles, 1, "files") }},
	{Name: "SANDBOT_ATTACH_MAX_FILE_BYTES", Default: defaultAttachMaxFileBytes, Readers: worker,
		Doc:   "largest attachment downloaded; a larger one is named in the thread with its size and this limit",
		field: func(c *Config) any { return &c.Attach.MaxFileBytes },
		check: func(c *Config, p *probs) { checkBytesMin(p, c.Attach.MaxFileBytes, 1) }},
	{Name: "SANDBOT_ATTACH_MAX_TOTAL_BYTES", Default: defaultAttachMaxTotalBytes, Readers: worker,
		Doc:   "most bytes of one message's attachments together",
		field: func(c *Config) any { return &c.Attach.MaxTotalBytes },
		check: func(c *Config, p *probs) { checkBytesMin(p, c.Attach.MaxTotalBytes, 1) }},
	{Name: "SANDBOT_SHARE_MAX_BYTES", Default: defaultShareMaxBytes, Readers: worker,
		Doc:   "largest workspace file the agent may post to the thread (share_file); at most 1m, since the bytes reach the bot through Temporal",
		field: func(c *Config) any { return &c.Attach.ShareMaxBytes },
		check: func(c *Config, p *probs) {
			if n := c.Attach.ShareMaxBytes; n < 1 || n > session.MaxShareBytesCeiling {
				p.add("%d bytes is out of range; use 1 to %d bytes (1m): the file travels to the bot inside a Temporal payload", int64(n), session.MaxShareBytesCeiling)
			}
		}},
	{Name: "SANDBOT_MODEL_VISION", Default: "false", Readers: worker,
		Doc:   "the model takes images: attached png, jpeg, gif and webp files are also sent to it as image parts",
		field: func(c *Config) any { return &c.Model.Vision }},
	{Name: "SANDBOT_MODEL_VISION_MAX_BYTES", Default: defaultVisionMaxBytes, Readers: worker,
		Doc:   "largest attached image sent to the model (with SANDBOT_MODEL_VISION); larger ones are only saved in the workspace",
		field: func(c *Config) any { return &c.Model.VisionMaxBytes },
		check: func(c *Config, p *probs) { checkBytesMin(p, c.Model.VisionMaxBytes, 1) }},
}

func checkBytesMin(p *probs, n Bytes, lowest int64) {
	if int64(n) < lowest {
		p.add("%d bytes is too low; use at least %d (sizes like 512k or 20m work)", int64(n), lowest)
	}
}
