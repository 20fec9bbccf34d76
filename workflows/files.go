package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Files in and out of a session. Attachments of a turn's messages are
// saved into the workspace by the worker (sandbox.Activities.
// SaveAttachments, on the sandbox's queue) before the model first sees the
// messages; the user's message tells the model where they are. share_file
// reads a workspace file on the worker (ReadFile) and puts it up for the
// bot, which posts it to the thread once (TurnState.Shared, the
// shared_file query and a chat_ref of kind shared_file).

// filedMessage is a transcript entry (by position, as State.Appended
// counts) whose message brought attachments.
type filedMessage struct {
	pos   int
	files []session.Attachment
}

// saveAttachments downloads the files of the turn's messages into the
// workspace and tells the model, in each message, what was attached and
// what was not (and the thread, for what was not). Runs since
// changeAttachments only; no recorded history has attachments.
func (s *sessionRun) saveAttachments(ctx workflow.Context, msgs []filedMessage) {
	if workflow.GetVersion(ctx, changeAttachments, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	for _, m := range msgs {
		var res sandbox.SaveAttachmentsResult
		handle, err := s.ensureSandbox(ctx)
		if err == nil {
			req := sandbox.SaveAttachmentsRequest{Handle: handle, Files: m.files}
			err = workflow.ExecuteActivity(housekeepingOptions(ctx, handle.TaskQueue), sandboxActs.SaveAttachments, req).Get(ctx, &res)
			s.execRan = true // the workspace changed: snapshot it
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			for _, f := range m.files {
				res.Refused = append(res.Refused, sandbox.RefusedAttachment{Name: f.Name, Size: f.Size, Reason: "the sandbox could not take it: " + userError(err)})
			}
		}
		for _, r := range res.Refused {
			s.notice("📎 %s (%s) was not attached: %s.", r.Name, sandbox.FormatBytes(r.Size), r.Reason)
		}
		i := m.pos - s.st.firstPosition()
		if i < 0 || i >= len(s.st.Transcript) {
			continue // trimmed away already (a huge batch)
		}
		e := &s.st.Transcript[i]
		e.Msg.Content += attachedNote(res)
		for _, f := range res.Saved {
			if f.Image != nil {
				e.Msg.Images = append(e.Msg.Images, *f.Image)
			}
		}
	}
	s.touch()
}

// attachedNote is what the model reads about a message's files: a line
// per file, within session.AttachedLineOverhead plus the file's names.
func attachedNote(res sandbox.SaveAttachmentsResult) string {
	var b strings.Builder
	for _, f := range res.Saved {
		fmt.Fprintf(&b, "\nAttached: %s (%s, %s)", f.Path, oneWord(f.MimeType), sandbox.FormatBytes(f.Size))
	}
	for _, r := range res.Refused {
		fmt.Fprintf(&b, "\nNot attached: %s (%s): %s", oneLine(r.Name), sandbox.FormatBytes(r.Size), cutRunes(r.Reason, 120))
	}
	if b.Len() == 0 {
		return ""
	}
	return "\n" + b.String()
}

func oneWord(s string) string {
	if s == "" || strings.ContainsAny(s, " \n") || len(s) > 64 {
		return "unknown type"
	}
	return s
}

func cutRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// shareFile runs one share_file call: the worker reads the file (capped at
// SANDBOT_SHARE_MAX_BYTES, inside the workspace only), and the turn state
// lists it for the bot to post. The bytes stay in this run's memory (an
// activity result in history, read by the shared_file query), never in
// State: a continue-as-new drops those not yet posted (the bot then says
// so in the thread).
func (s *sessionRun) shareFile(ctx workflow.Context, tc session.ToolCall) error {
	if workflow.GetVersion(ctx, changeShareFile, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		s.failCall(ctx, tc, fmt.Sprintf("unknown tool %q; the only tool is %q", tc.Name, session.ShellToolName))
		return nil
	}
	args, err := agent.ParseShareFileArgs(tc.Arguments)
	if err != nil {
		s.failCall(ctx, tc, err.Error())
		return nil
	}
	handle, err := s.ensureSandbox(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return errStopped
		}
		s.failCall(ctx, tc, fmt.Sprintf("not shared: sandbox unavailable on backend %q: %s", s.st.Backend, userError(err)))
		return nil
	}
	c := s.call(tc.ID)
	c.Status = session.CallRunning
	c.StartedAt = workflow.Now(ctx)
	s.touch()
	var res sandbox.ReadFileResult
	err = workflow.ExecuteActivity(housekeepingOptions(ctx, handle.TaskQueue), sandboxActs.ReadFile, sandbox.ReadFileRequest{Handle: handle, Path: args.Path}).Get(ctx, &res)
	if err != nil {
		if ctx.Err() != nil {
			return errStopped
		}
		var ae *temporal.ApplicationError
		why := "not shared: " + userError(err)
		if errors.As(err, &ae) && ae.Type() == sandbox.ErrTypeFileRefused {
			why = "not shared: " + ae.Message()
		}
		s.failCall(ctx, tc, why)
		return nil
	}
	c = s.call(tc.ID)
	c.Status = session.CallCompleted
	c.EndedAt = workflow.Now(ctx)
	c.Duration = c.EndedAt.Sub(c.StartedAt)
	zero := 0
	c.ExitCode = &zero
	c.Output = fmt.Sprintf("%s (%s, %s)", res.Path, res.MimeType, sandbox.FormatBytes(res.Size))
	if s.shared == nil {
		s.shared = map[string][]byte{}
	}
	s.shared[tc.ID] = res.Data
	s.st.Last.Shared = append(s.st.Last.Shared, session.SharedFile{CallID: tc.ID, Path: res.Path, Name: res.Name, Size: res.Size, MimeType: res.MimeType})
	s.touch()
	s.toolResultNamed(ctx, tc.ID, session.ShareFileToolName, fmt.Sprintf("%s (%s, %s) is being posted to the chat thread; the people there will see it as a file.", res.Path, res.MimeType, sandbox.FormatBytes(res.Size)))
	return nil
}

// sharedFile answers the shared_file query.
func (s *sessionRun) sharedFile(req session.SharedFileRequest) (session.SharedFileData, error) {
	data, ok := s.shared[req.CallID]
	for _, f := range s.st.Last.Shared {
		if f.CallID == req.CallID {
			return session.SharedFileData{SharedFile: f, Data: data, Gone: !ok || f.Posted}, nil
		}
	}
	if ok {
		// A file of the turn before, which ended before the bot posted it.
		return session.SharedFileData{SharedFile: session.SharedFile{CallID: req.CallID, Size: int64(len(data))}, Data: data}, nil
	}
	return session.SharedFileData{SharedFile: session.SharedFile{CallID: req.CallID}, Gone: true}, nil
}

// sharedPosted records that the bot posted a shared file: no replica, and
// no restarted bot, posts it again, and the bytes are let go.
func (s *sessionRun) sharedPosted(callID string) {
	for i := range s.st.Last.Shared {
		if s.st.Last.Shared[i].CallID == callID {
			s.st.Last.Shared[i].Posted = true
		}
	}
	delete(s.shared, callID)
}
