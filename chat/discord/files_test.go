package discord_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// TestAttachmentsAreDescribedAndFilesShared: a mention with only a file
// opens its thread (named for the file) and reaches the core with the
// file's descriptor, not its URL in the text; a shared file goes into the
// thread as a message carrying it.
func TestAttachmentsAreDescribedAndFilesShared(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	um, err := f.UserMessageWithFiles(fakediscord.DefaultChannelID, alice, bot(), []fakediscord.UserFile{{Name: "data.csv", ContentType: "text/csv", Data: []byte("a,b")}})
	if err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "the message", func(r chattest.Record) bool { return len(r.Messages) == 1 })
	m := rec.Record().Messages[0]
	if len(m.Files) != 1 || m.Files[0].Platform != "discord" || m.Files[0].Name != "data.csv" || m.Files[0].Size != 3 || m.Files[0].URL == "" || strings.Contains(m.Text, "http") {
		t.Fatalf("message %+v", m)
	}
	if th := f.Threads(fakediscord.DefaultChannelID); len(th) != 1 || th[0].ID != um.ID || th[0].Name != "data.csv" {
		t.Fatalf("threads %+v", th)
	}
	if f.Downloads() != 0 {
		t.Fatal("the bot downloaded the file itself")
	}

	data := []byte{0, 1, 2, 0xfe}
	if err := a.ShareFile(t.Context(), m.Thread, chat.SharedFile{Name: "out.bin", Path: "build/out.bin", MimeType: "application/octet-stream", Data: data}); err != nil {
		t.Fatal(err)
	}
	var got []fakediscord.Message
	for _, bm := range f.Messages(um.ID) {
		if len(bm.Attachments) == 1 && bm.Attachments[0].Filename == "out.bin" {
			got = append(got, bm)
		}
	}
	if len(got) != 1 || !bytes.Equal(got[0].Attachments[0].Data, data) || !strings.Contains(got[0].Content, "build/out.bin") {
		t.Fatalf("shared %+v", got)
	}
}
