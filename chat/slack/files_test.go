package slack_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// TestFilesOfAMessageAreDescribed: the files of a mention reach the core
// as descriptors with Slack's url_private_download (the worker fetches
// them); the adapter itself downloads nothing.
func TestFilesOfAMessageAreDescribed(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	core := newRecCore()
	env.Run(core)
	mustSend(t, ctx, env, fakeslack.UserMessage{Text: env.Fake.Mention() + " look", Files: []fakeslack.UserFile{{Name: "a.png", MimeType: "image/png", Content: []byte("png")}}})
	st := core.WaitFor(t, "the message", func(s chattest.Record) bool { return len(s.Messages) >= 1 })
	files := st.Messages[0].Files
	if len(files) != 1 || files[0].Platform != "slack" || files[0].Name != "a.png" || files[0].Size != 3 || files[0].MimeType != "image/png" ||
		!strings.Contains(files[0].URL, "/files-pri/") || files[0].ID == "" {
		t.Fatalf("files %+v", files)
	}
	if n := len(env.Fake.Snapshot().CallsTo("files.download")); n != 0 {
		t.Fatalf("the bot downloaded the file itself (%d calls)", n)
	}
}

// TestShareFileUploadsIntoTheThread: a shared file goes up with files
// upload v2 into the thread, bytes as they are, with a comment naming its
// workspace path.
func TestShareFileUploadsIntoTheThread(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{})
	env.Run(newRecCore())
	th := chat.Thread{Platform: "slack", Workspace: "T0001", Channel: "C0001", Thread: env.Fake.NewTS()}
	data := []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}
	if err := env.Adapter.ShareFile(ctx, th, chat.SharedFile{Name: "plot.png", Path: "out/plot.png", MimeType: "image/png", Data: data}); err != nil {
		t.Fatal(err)
	}
	var got []fakeslack.File
	for _, f := range env.Fake.Snapshot().Files {
		if f.Name == "plot.png" {
			got = append(got, f)
		}
	}
	if len(got) != 1 || !bytes.Equal(got[0].Content, data) || got[0].ThreadTS != th.Thread || got[0].Channel != "C0001" || !strings.Contains(got[0].Comment, "out/plot.png") {
		t.Fatalf("uploads %+v", got)
	}
}
