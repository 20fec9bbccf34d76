package discord

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/session"
)

var _ chat.FileSharer = (*Adapter)(nil)

// ShareFile implements chat.FileSharer: a message in the thread carrying
// the file (multipart, the bot needs Attach Files), with a line naming its
// workspace path. Discord takes files of up to 8 MiB from bots in any
// server; the worker's cap (SANDBOT_SHARE_MAX_BYTES) is far below it.
func (a *Adapter) ShareFile(ctx context.Context, th chat.Thread, f chat.SharedFile) error {
	if len(f.Data) > maxUpload {
		return fmt.Errorf("discord: share %s: %d bytes, more than %d", f.Name, len(f.Data), maxUpload)
	}
	ct := f.MimeType
	if ct == "" {
		ct = "application/octet-stream"
	}
	path := strings.ReplaceAll(safetext.Line(f.Path), "`", "'")
	ch := target(th)
	_, err := a.s.ChannelMessageSendComplex(ch, &discordgo.MessageSend{
		Content:         clampPlain(fmt.Sprintf("📎 `%s` (%s) from the workspace", path, session.FormatBytes(int64(len(f.Data)))), MaxContent),
		Files:           []*discordgo.File{{Name: f.Name, ContentType: ct, Reader: bytes.NewReader(f.Data)}},
		AllowedMentions: noMentions(),
	}, discordgo.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("discord: share %s in %s: %w", f.Name, ch, err)
	}
	return nil
}
