package slack

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/session"
)

var _ chat.FileSharer = (*Adapter)(nil)

// ShareFile implements chat.FileSharer: the file the agent shared goes
// into the thread with files upload v2 (files.getUploadURLExternal, the
// upload, files.completeUploadExternal), with a comment naming its
// workspace path. Binary-safe: the bytes are streamed as they are.
func (a *Adapter) ShareFile(ctx context.Context, th chat.Thread, f chat.SharedFile) error {
	path := strings.ReplaceAll(safetext.Line(f.Path), "`", "'")
	comment := fmt.Sprintf("📎 `%s` (%s) from the workspace", escape(path), session.FormatBytes(int64(len(f.Data))))
	return a.call(ctx, "files.upload", func(ctx context.Context) error {
		_, err := a.api.UploadFileContext(ctx, slackgo.UploadFileParameters{
			Reader: bytes.NewReader(f.Data), FileSize: len(f.Data), Filename: f.Name, Title: f.Name,
			InitialComment: comment, Channel: th.Channel, ThreadTimestamp: th.Thread,
		})
		return err
	})
}
