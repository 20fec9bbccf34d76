package fakediscord_test

import (
	"io"
	"net/http"
	"testing"

	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// TestUserAttachmentsAreServed: a user's attachment is on the stored
// message with a URL the fake serves, without credentials, as the CDN does.
func TestUserAttachmentsAreServed(t *testing.T) {
	f := fakediscord.Start(t, fakediscord.Options{})
	f.AddGuild(fakediscord.Guild{ID: "1", Name: "g"})
	f.AddChannel(fakediscord.Channel{ID: "2", Type: fakediscord.ChannelText, GuildID: "1", Name: "c"})
	m, err := f.UserMessageWithFiles("2", fakediscord.Member{User: fakediscord.User{ID: "3", Username: "ann"}}, "see", []fakediscord.UserFile{{Name: "d.csv", ContentType: "text/csv", Data: []byte("a,b")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Attachments) != 1 || m.Attachments[0].URL == "" {
		t.Fatalf("attachments %+v", m.Attachments)
	}
	resp, err := http.Get(m.Attachments[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "a,b" || resp.Header.Get("Content-Type") != "text/csv" || f.Downloads() != 1 {
		t.Fatalf("served %q (%s), %d downloads", b, resp.Header.Get("Content-Type"), f.Downloads())
	}
}
