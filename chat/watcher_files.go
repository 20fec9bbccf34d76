package chat

import (
	"context"
	"fmt"

	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/session"
)

// filesOnlyText is the text of a message that brought files and no words.
const filesOnlyText = "(The user sent the attached files without a message.)"

// share posts the files the turn's share_file calls put up and no bot has
// posted yet, each once: the watch lease makes this replica the only one
// posting for the session, the session records each post (a chat_ref of
// kind shared_file, which sets Posted), and a restarted bot reads Posted
// before it posts. Only a bot that dies between the upload and the record
// can post a file twice.
func (w *watcher) share(ctx context.Context, v *view, ts session.TurnState) {
	for _, f := range ts.Shared {
		if f.Posted || v.shared[f.CallID] {
			continue
		}
		if v.shared == nil {
			v.shared = map[string]bool{}
		}
		if !w.limit(ctx) {
			return
		}
		if err := w.postShared(ctx, f); err != nil {
			w.log.Warn("watcher: posting a shared file failed; trying again at the next poll", "turn", v.turn, "call_id", f.CallID, "err", err)
			return
		}
		v.shared[f.CallID] = true
		cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
		if err := w.feed.RecordChatRef(cctx, w.id, session.ChatRefRequest{Turn: v.turn, Kind: session.ChatRefSharedFile, Ref: f.CallID}); err != nil {
			w.log.Warn("watcher: record shared file", "turn", v.turn, "call_id", f.CallID, "err", err)
		}
		cancel()
	}
}

// postShared puts one shared file into the thread: as a file where the
// platform takes files, else (the terminal) as a line naming it.
func (w *watcher) postShared(ctx context.Context, f session.SharedFile) error {
	line := fmt.Sprintf("📎 Shared `%s` (%s) from the workspace.", safetext.Line(f.Path), session.FormatBytes(f.Size))
	fs, ok := w.p.(FileSharer)
	if !ok {
		_, err := w.p.PostText(ctx, w.th, line)
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	data, err := w.feed.SharedFile(cctx, w.id, session.SharedFileRequest{CallID: f.CallID})
	cancel()
	if err != nil {
		return err
	}
	if data.Gone || data.Data == nil && f.Size > 0 {
		// The session no longer holds the bytes (it continued as new
		// before any bot posted them): say so rather than lose it quietly.
		_, err := w.p.PostText(ctx, w.th, fmt.Sprintf("📎 The agent shared `%s` (%s), but the session no longer holds it; it is still in the workspace, so ask again to have it posted.", safetext.Line(f.Path), session.FormatBytes(f.Size)))
		return err
	}
	return fs.ShareFile(ctx, w.th, SharedFile{Name: f.Name, Path: f.Path, MimeType: f.MimeType, Data: data.Data})
}
