package integration

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/config"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

// pngBytes is a tiny "image" whose bytes say PNG.
var pngBytes = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{1, 2, 3}, 40)...)

// filesWorker gives the stack's worker what files in and out need: the
// chat platform's settings the bot got after the worker started (the
// worker downloads with the Slack token from the fake's origin), vision,
// and small caps; then starts it again.
func filesWorker(s *stack) {
	s.t.Helper()
	s.cfg.Model.Vision = true
	s.cfg.Model.VisionMaxBytes = 1 << 20
	s.cfg.Attach.MaxFileBytes = 1000
	if err := s.cfg.Validate(config.RoleDev); err != nil {
		s.t.Fatal(err)
	}
	s.worker.Stop()
	s.startWorker()
}

// TestSlackFilesInAndOut: a mention with three files. The worker downloads
// two into attachments/ with the bot token (files:read), refuses the one
// over SANDBOT_ATTACH_MAX_FILE_BYTES with a notice in the thread naming
// it, its size and the limit, and the model is told the paths and gets
// the image as an image part. The model then shares a workspace file,
// which the bot uploads to the thread once (files upload v2), and tries to
// share /etc/passwd, which fails with a tool error it reads.
func TestSlackFilesInAndOut(t *testing.T) {
	e := newSlackEnv(t, slackOptions{stack: []stackOption{slackNoApprovals}})
	filesWorker(e.s)
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("cat attachments/notes.txt > out.txt && echo done >> out.txt")),
		fakeopenai.ToolCallStep("c2", session.ShareFileToolName, `{"path":"out.txt"}`),
		fakeopenai.ToolCallStep("c3", session.ShareFileToolName, `{"path":"../../../etc/passwd"}`),
		fakeopenai.FinalStep("Shared out.txt."),
	)
	sent := e.send(fakeslack.UserMessage{User: slackAlice, Channel: e.channel, Text: e.f.Mention() + " summarise these", Files: []fakeslack.UserFile{
		{Name: "notes.txt", MimeType: "text/plain", Content: []byte("hello notes\n")},
		{Name: "../pic.png", MimeType: "image/png", Content: pngBytes},
		{Name: "big.bin", Content: bytes.Repeat([]byte("z"), 5000)},
	}})
	th := e.thread(sent.Message.TS)
	ts := e.waitDone(th, 1)

	reqs := e.s.model.Requests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	var user fakeopenai.ChatMessage
	for _, m := range reqs[0].Body.Messages {
		if m.Role == "user" {
			user = m
		}
	}
	for _, want := range []string{"summarise these", "Attached: attachments/notes.txt (text/plain, 12 B)", "Attached: attachments/pic.png (image/png, ", "Not attached: big.bin (4.9 KiB)"} {
		if !strings.Contains(user.Content, want) {
			t.Fatalf("the model's user message lacks %q:\n%s", want, user.Content)
		}
	}
	if len(user.Images) != 1 || user.Images[0].MimeType != "image/png" || !bytes.Equal(user.Images[0].Data, pngBytes) {
		t.Fatalf("the image did not reach the model as an image part: %+v", user.Images)
	}
	if got, ok := workspaceFile(t, e.s, th, "attachments/notes.txt"); !ok || got != "hello notes\n" {
		t.Fatalf("attachments/notes.txt = %q, %v", got, ok)
	}
	notice := strings.Join(ts.Notices, "\n")
	if !strings.Contains(notice, "big.bin (4.9 KiB) was not attached") || !strings.Contains(notice, "1000 B (SANDBOT_ATTACH_MAX_FILE_BYTES)") {
		t.Fatalf("notices: %q", ts.Notices)
	}
	card := messageText(e.message(ts.StatusRef))
	if !strings.Contains(card, "big.bin") || !strings.Contains(card, "SANDBOT_ATTACH_MAX_FILE_BYTES") {
		t.Fatalf("the card does not tell the user about big.bin:\n%s", card)
	}

	// Files out: one upload, in the thread, with the file's bytes.
	snap := e.wait("the shared file in the thread", func(sn fakeslack.Snapshot) bool {
		for _, f := range sn.Files {
			if f.Name == "out.txt" && f.Shared {
				return true
			}
		}
		return false
	})
	var uploads []fakeslack.File
	for _, f := range snap.Files {
		if f.Name == "out.txt" {
			uploads = append(uploads, f)
		}
	}
	if len(uploads) != 1 || string(uploads[0].Content) != "hello notes\ndone\n" || uploads[0].ThreadTS != th.Thread || !strings.Contains(uploads[0].Comment, "out.txt") {
		t.Fatalf("uploads of out.txt: %+v", uploads)
	}
	if len(ts.Shared) != 1 || !ts.Shared[0].Posted {
		e.waitTurn(th, "the shared file recorded as posted", func(ts session.TurnState) bool { return len(ts.Shared) == 1 && ts.Shared[0].Posted })
	}
	var refused string
	for _, m := range e.s.model.Requests()[3].Body.Messages {
		if m.Role == "tool" && m.ToolCallID == "c3" {
			refused = m.Content
		}
	}
	if !strings.Contains(refused, "outside the workspace") {
		t.Fatalf("share_file of /etc/passwd answered %q", refused)
	}
	downloads := 0
	for _, c := range snap.Calls {
		if c.Method == "files.download" {
			downloads++
			if c.Form.Get("authorized") != "yes" {
				t.Fatalf("a download without the bot token: %+v", c.Form)
			}
		}
	}
	if downloads != 2 {
		t.Fatalf("%d downloads; want 2 (the file over the cap is not fetched)", downloads)
	}

	// A restarted bot does not upload the file again.
	e.restart()
	e.waitWatcher(th)
	n := 0
	for _, f := range e.f.Snapshot().Files {
		if f.Name == "out.txt" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("out.txt uploaded %d times after a restart", n)
	}
	recordHistory(t, e.s, th.ID(), "files")
}

// TestSlackAttachmentURLElsewhereIsRefused is the SSRF attack end to end:
// a message event whose file points at the Temporal frontend (or any host
// but Slack's) is not fetched; the thread says why and the turn goes on.
func TestSlackAttachmentURLElsewhereIsRefused(t *testing.T) {
	e := newSlackEnv(t, slackOptions{stack: []stackOption{slackNoApprovals}})
	filesWorker(e.s)
	e.s.model.Push(fakeopenai.FinalStep("ok"))
	sent := e.send(fakeslack.UserMessage{User: slackAlice, Channel: e.channel, Text: e.f.Mention() + " look", Files: []fakeslack.UserFile{
		{Name: "frontend.bin", Content: []byte("x"), URL: "http://" + srv.HostPort() + "/"},
	}})
	th := e.thread(sent.Message.TS)
	ts := e.waitDone(th, 1)
	if notice := strings.Join(ts.Notices, "\n"); !strings.Contains(notice, "frontend.bin") || !strings.Contains(notice, "files.slack.com") {
		t.Fatalf("notices: %q", ts.Notices)
	}
	if _, ok := workspaceFile(t, e.s, th, "attachments/frontend.bin"); ok {
		t.Fatal("the refused file is in the workspace")
	}
}

// TestDiscordFilesInAndOut: a mention with a file and an image in Discord.
// The worker downloads them from the CDN (no credential), the model is
// told the paths and gets the image as an image part, and the file the
// model shares arrives in the session thread as a message with an
// attachment, once; a directory cannot be shared.
func TestDiscordFilesInAndOut(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{stack: []stackOption{slackNoApprovals}})
	filesWorker(e.s)
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("mkdir -p out && cp attachments/data.csv out/report.csv")),
		fakeopenai.ToolCallStep("c2", session.ShareFileToolName, `{"path":"out"}`),
		fakeopenai.ToolCallStep("c3", session.ShareFileToolName, `{"path":"out/report.csv"}`),
		fakeopenai.FinalStep("Here is the report."),
	)
	m, err := e.f.UserMessageWithFiles(e.channel, discordAlice, "<@"+e.f.AppID()+"> make a report", []fakediscord.UserFile{
		{Name: "data.csv", ContentType: "text/csv", Data: []byte("a,b\n1,2\n")},
		{Name: "shot.png", ContentType: "image/png", Data: pngBytes},
	})
	if err != nil {
		t.Fatal(err)
	}
	th := e.thread(m.ID)
	e.waitDone(th, 1)

	var user fakeopenai.ChatMessage
	for _, msg := range e.s.model.Requests()[0].Body.Messages {
		if msg.Role == "user" {
			user = msg
		}
	}
	if !strings.Contains(user.Content, "Attached: attachments/data.csv (text/csv, 8 B)") || !strings.Contains(user.Content, "Attached: attachments/shot.png (image/png") ||
		strings.Contains(user.Content, "http") {
		t.Fatalf("the model's user message:\n%s", user.Content)
	}
	if len(user.Images) != 1 || !bytes.Equal(user.Images[0].Data, pngBytes) {
		t.Fatalf("images: %+v", user.Images)
	}
	if e.f.Downloads() != 2 {
		t.Fatalf("%d downloads from the CDN, want 2", e.f.Downloads())
	}
	var shared []fakediscord.Message
	e.wait("the shared file in the thread", func() bool {
		shared = nil
		for _, bm := range e.botMessages(th.Thread) {
			for _, a := range bm.Attachments {
				if a.Filename == "report.csv" {
					shared = append(shared, bm)
				}
			}
		}
		return len(shared) > 0
	})
	if len(shared) != 1 || string(shared[0].Attachments[0].Data) != "a,b\n1,2\n" || !strings.Contains(shared[0].Content, "out/report.csv") {
		t.Fatalf("shared messages: %+v", shared)
	}
	var dirResult string
	for _, msg := range e.s.model.Requests()[2].Body.Messages {
		if msg.Role == "tool" && msg.ToolCallID == "c2" {
			dirResult = msg.Content
		}
	}
	if !strings.Contains(dirResult, "is a directory") {
		t.Fatalf("share_file of a directory answered %q", dirResult)
	}
}
