package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// TestAttachmentsReachTheModelAndTheThread: a message's files are saved by
// SaveAttachments on the sandbox's queue before the model sees the
// message; the model reads their paths (and gets the image reference);
// a refused file is a notice in the thread naming it, its size and the
// limit, and a line for the model.
func TestAttachmentsReachTheModelAndTheThread(t *testing.T) {
	h := newHarness(t, final("got them"))
	var saved []sandbox.SaveAttachmentsRequest
	h.env.RegisterActivity(sandboxActs.SaveAttachments)
	h.env.OnActivity(sandboxActs.SaveAttachments, mock.Anything, mock.Anything).Return(func(_ context.Context, req sandbox.SaveAttachmentsRequest) (sandbox.SaveAttachmentsResult, error) {
		saved = append(saved, req)
		return sandbox.SaveAttachmentsResult{
			Saved: []sandbox.SavedAttachment{
				{Name: "a.png", Path: "attachments/a.png", Size: 2048, MimeType: "image/png", Image: &session.ImageRef{Key: "sessions/x/attachments/abc", MimeType: "image/png", Path: "attachments/a.png", Bytes: 2048}},
			},
			Refused: []sandbox.RefusedAttachment{{Name: "big.iso", Size: 3 << 30, Reason: "it is 3 GiB; a file may be at most 20 MiB (SANDBOT_ATTACH_MAX_FILE_BYTES)"}},
		}, nil
	})
	files := []session.Attachment{
		{Platform: "slack", Name: "a.png", Size: 2048, MimeType: "image/png", URL: "https://files.slack.com/a"},
		{Platform: "slack", Name: "big.iso", Size: 3 << 30, URL: "https://files.slack.com/b"},
	}
	h.at(0, func() {
		h.update(session.UpdateSendMessage, session.MessageRequest{EventID: "e1", User: owner, Attachments: files}, nil)
	})
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveNever))
	if len(saved) != 1 || len(saved[0].Files) != 2 {
		t.Fatalf("SaveAttachments got %+v", saved)
	}
	user := h.model.requests()[0].Messages[0]
	if !strings.Contains(user.Content, "Attached: attachments/a.png (image/png, 2 KiB)") || !strings.Contains(user.Content, "Not attached: big.iso (3 GiB)") {
		t.Fatalf("the model read:\n%s", user.Content)
	}
	if len(user.Images) != 1 || user.Images[0].Key != "sessions/x/attachments/abc" {
		t.Fatalf("images %+v", user.Images)
	}
	if n := strings.Join(end.Notices, "\n"); !strings.Contains(n, "big.iso (3 GiB) was not attached") || !strings.Contains(n, "SANDBOT_ATTACH_MAX_FILE_BYTES") {
		t.Fatalf("notices %q", end.Notices)
	}
}

// TestAttachmentsCountAgainstTheMessageLimit: descriptors count against
// the 64 KiB message limit, and more than session.MaxAttachments are
// refused, so nothing from attachments bypasses the limit.
func TestAttachmentsCountAgainstTheMessageLimit(t *testing.T) {
	h := newHarness(t)
	many := make([]session.Attachment, session.MaxAttachments+1)
	for i := range many {
		many[i] = session.Attachment{Platform: "slack", Name: "f", URL: "https://files.slack.com/f"}
	}
	long := []session.Attachment{{Platform: "slack", Name: "f", URL: "https://files.slack.com/" + strings.Repeat("u", 2000)}}
	h.at(0, func() {
		h.update(session.UpdateSendMessage, session.MessageRequest{EventID: "e1", User: owner, Text: "hi", Attachments: many}, nil)
		h.update(session.UpdateSendMessage, session.MessageRequest{EventID: "e2", User: owner, Text: strings.Repeat("x", session.MaxMessageBytes-2000), Attachments: long}, nil)
	})
	h.destroyAt(time.Minute)
	h.run(h.input(session.ApproveNever))
	if len(h.rejects) != 2 || !strings.Contains(h.rejects[0], "at most 20 are accepted") || !strings.Contains(h.rejects[1], "the limit is 65536 bytes") {
		t.Fatalf("rejections %q", h.rejects)
	}
}

// TestShareFileListsTheFileForTheBot: a share_file call reads the file on
// the sandbox's queue, tells the model it is being posted, and lists it in
// the turn state; the bytes are served by the shared_file query until the
// bot records the post. A refused path is a tool error the model reads.
func TestShareFileListsTheFileForTheBot(t *testing.T) {
	share := func(id, path string) agent.ModelResponse {
		return agent.ModelResponse{ToolCalls: []session.ToolCall{{ID: id, Name: session.ShareFileToolName, Arguments: `{"path":"` + path + `"}`}}}
	}
	h := newHarness(t, share("c1", "out/r.csv"), share("c2", "/etc/passwd"), final("done"))
	h.env.RegisterActivity(sandboxActs.ReadFile)
	h.env.OnActivity(sandboxActs.ReadFile, mock.Anything, mock.Anything).Return(func(_ context.Context, req sandbox.ReadFileRequest) (sandbox.ReadFileResult, error) {
		if req.Path != "out/r.csv" {
			return sandbox.ReadFileResult{}, sandbox.FileRefusedError("/etc/passwd is outside the workspace; give a path relative to the workspace root")
		}
		return sandbox.ReadFileResult{Path: "out/r.csv", Name: "r.csv", Size: 4, MimeType: "text/csv", Data: []byte("a,b\n")}, nil
	})
	h.at(0, func() { h.send("e1", "share it") })
	var end session.TurnState
	var before, after session.SharedFileData
	h.at(time.Minute, func() {
		end = h.state()
		v, err := h.env.QueryWorkflow(session.QuerySharedFile, session.SharedFileRequest{CallID: "c1"})
		if err != nil || v.Get(&before) != nil {
			t.Errorf("query: %v", err)
		}
		h.update(session.UpdateChatRef, session.ChatRefRequest{Turn: 1, Kind: session.ChatRefSharedFile, Ref: "c1"}, nil)
	})
	h.at(90*time.Second, func() {
		v, err := h.env.QueryWorkflow(session.QuerySharedFile, session.SharedFileRequest{CallID: "c1"})
		if err != nil || v.Get(&after) != nil {
			t.Errorf("query: %v", err)
		}
		end = h.state()
	})
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveNever))
	if string(before.Data) != "a,b\n" || before.Gone || before.Name != "r.csv" {
		t.Fatalf("before the post: %+v", before)
	}
	if !after.Gone || after.Data != nil || len(end.Shared) != 1 || !end.Shared[0].Posted {
		t.Fatalf("after the post: %+v, shared %+v", after, end.Shared)
	}
	msgs := h.model.requests()[2].Messages
	var results []string
	for _, m := range msgs {
		if m.Role == session.RoleTool {
			results = append(results, m.Content)
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], "being posted to the chat thread") || !strings.Contains(results[1], "outside the workspace") {
		t.Fatalf("tool results %q", results)
	}
}
