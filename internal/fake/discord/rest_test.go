package fakediscord_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

func TestTransportLeavesGlobalsAlone(t *testing.T) {
	t.Parallel()
	a := fakediscord.Start(t, fakediscord.Options{})
	b := fakediscord.Start(t, fakediscord.Options{Token: "other"})
	sa, sb := session(t, a, 0), session(t, b, 0)
	sb.Token = "Bot other"
	if _, err := sa.ChannelMessageSend(fakediscord.DefaultChannelID, "to a"); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.ChannelMessageSend(fakediscord.DefaultChannelID, "to b"); err != nil {
		t.Fatal(err)
	}
	if got := a.Messages(fakediscord.DefaultChannelID); len(got) != 1 || got[0].Content != "to a" {
		t.Fatalf("fake a messages = %+v", got)
	}
	if got := b.Messages(fakediscord.DefaultChannelID); len(got) != 1 || got[0].Content != "to b" {
		t.Fatalf("fake b messages = %+v", got)
	}
	if discordgo.EndpointAPI != "https://discord.com/api/v9/" {
		t.Fatalf("global endpoint changed: %s", discordgo.EndpointAPI)
	}
	if r := a.Requests()[0]; r.Auth != "Bot "+fakediscord.DefaultToken || r.Path != "/api/v9/channels/"+fakediscord.DefaultChannelID+"/messages" {
		t.Fatalf("recorded request = %+v", r)
	}
}

func TestWrongTokenIsUnauthorized(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, 0)
	s.Token = "Bot nope"
	_, err := s.ChannelMessageSend(fakediscord.DefaultChannelID, "hi")
	if st, _ := restCode(t, err); st != http.StatusUnauthorized {
		t.Fatalf("status = %d, want 401", st)
	}
}

func TestSendEditComponentsEmbedsFiles(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, 0)
	m, err := s.ChannelMessageSendComplex(fakediscord.DefaultChannelID, &discordgo.MessageSend{
		Content: "status",
		Embeds:  []*discordgo.MessageEmbed{{Title: "Turn 1", Description: "running"}},
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "Approve", Style: discordgo.SuccessButton, CustomID: "approve:x"},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Author == nil || !m.Author.Bot || len(m.Components) != 1 || len(m.Embeds) != 1 {
		t.Fatalf("returned message = %+v", m)
	}
	if _, err := s.ChannelMessageEdit(fakediscord.DefaultChannelID, m.ID, "status v2"); err != nil {
		t.Fatal(err)
	}
	got, _ := f.Message(m.ID)
	if got.Content != "status v2" || !strings.Contains(string(got.Components), "approve:x") {
		t.Fatalf("edit must replace content and keep components: %+v", got)
	}
	edits := f.Edits()
	if len(edits) != 1 || edits[0].Via != "channel" || edits[0].Content != "status v2" || edits[0].At.IsZero() {
		t.Fatalf("edits = %+v", edits)
	}

	// Multipart upload with payload_json and files[0].
	body := bytes.Repeat([]byte("log line\n"), 1000)
	fm, err := s.ChannelMessageSendComplex(fakediscord.DefaultChannelID, &discordgo.MessageSend{
		Content: "full output attached",
		Files:   []*discordgo.File{{Name: "output.txt", ContentType: "text/plain", Reader: bytes.NewReader(body)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(fm.Attachments) != 1 || fm.Attachments[0].Filename != "output.txt" || fm.Attachments[0].Size != len(body) {
		t.Fatalf("attachments = %+v", fm.Attachments)
	}
	stored, _ := f.Message(fm.ID)
	if !bytes.Equal(stored.Attachments[0].Data, body) {
		t.Fatal("stored attachment differs from the upload")
	}
}

func TestLimitsAnswer400(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, 0)
	btn := func(id string) discordgo.MessageComponent {
		return discordgo.Button{Label: "b", Style: discordgo.PrimaryButton, CustomID: id}
	}
	row := func(ids ...string) discordgo.MessageComponent {
		var cs []discordgo.MessageComponent
		for _, id := range ids {
			cs = append(cs, btn(id))
		}
		return discordgo.ActionsRow{Components: cs}
	}
	cases := []struct {
		name string
		msg  *discordgo.MessageSend
		code int
	}{
		{"content over 2000", &discordgo.MessageSend{Content: strings.Repeat("x", 2001)}, fakediscord.CodeInvalidFormBody},
		{"six buttons in a row", &discordgo.MessageSend{Components: []discordgo.MessageComponent{row("1", "2", "3", "4", "5", "6")}}, fakediscord.CodeInvalidFormBody},
		{"six rows", &discordgo.MessageSend{Components: []discordgo.MessageComponent{row("1"), row("2"), row("3"), row("4"), row("5"), row("6")}}, fakediscord.CodeInvalidFormBody},
		{"custom_id over 100", &discordgo.MessageSend{Components: []discordgo.MessageComponent{row(strings.Repeat("c", 101))}}, fakediscord.CodeInvalidFormBody},
		{"duplicate custom_id", &discordgo.MessageSend{Components: []discordgo.MessageComponent{row("a", "a")}}, fakediscord.CodeInvalidFormBody},
		{"embed description over 4096", &discordgo.MessageSend{Embeds: []*discordgo.MessageEmbed{{Description: strings.Repeat("d", 4097)}}}, fakediscord.CodeInvalidFormBody},
		{"embeds over 6000 in total", &discordgo.MessageSend{Embeds: []*discordgo.MessageEmbed{{Description: strings.Repeat("d", 4000)}, {Description: strings.Repeat("d", 2001)}}}, fakediscord.CodeInvalidFormBody},
		{"empty", &discordgo.MessageSend{}, fakediscord.CodeEmptyMessage},
	}
	for _, tc := range cases {
		_, err := s.ChannelMessageSendComplex(fakediscord.DefaultChannelID, tc.msg)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		st, code := restCode(t, err)
		if st != http.StatusBadRequest || code != tc.code {
			t.Errorf("%s: status %d code %d, want 400 %d", tc.name, st, code, tc.code)
		}
	}
	// Exactly at the limits is fine.
	if _, err := s.ChannelMessageSendComplex(fakediscord.DefaultChannelID, &discordgo.MessageSend{
		Content:    strings.Repeat("x", 2000),
		Components: []discordgo.MessageComponent{row("1", "2", "3", "4", strings.Repeat("c", 100)), row("6"), row("7"), row("8"), row("9")},
	}); err != nil {
		t.Fatalf("message at the limits rejected: %v", err)
	}
	// An oversized edit is refused and leaves the message alone.
	m, err := s.ChannelMessageSend(fakediscord.DefaultChannelID, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ChannelMessageEdit(fakediscord.DefaultChannelID, m.ID, strings.Repeat("y", 2001)); err == nil {
		t.Fatal("oversized edit accepted")
	}
	if got, _ := f.Message(m.ID); got.Content != "ok" {
		t.Fatalf("refused edit changed the message: %q", got.Content)
	}
}

func TestEditingAUsersMessageIsForbidden(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, 0)
	um, err := f.UserMessage(fakediscord.DefaultChannelID, alice, "mine")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.ChannelMessageEdit(fakediscord.DefaultChannelID, um.ID, "hijack")
	if st, code := restCode(t, err); st != http.StatusForbidden || code != fakediscord.CodeCannotEditOthers {
		t.Fatalf("got %d/%d, want 403/%d", st, code, fakediscord.CodeCannotEditOthers)
	}
}

func TestThreads(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents)
	created := make(chan *discordgo.ThreadCreate, 4)
	s.AddHandler(func(_ *discordgo.Session, tc *discordgo.ThreadCreate) { created <- tc })
	open(t, s)

	um, err := f.UserMessage(fakediscord.DefaultChannelID, alice, "<@"+fakediscord.DefaultAppID+"> fix it")
	if err != nil {
		t.Fatal(err)
	}
	th, err := s.MessageThreadStart(fakediscord.DefaultChannelID, um.ID, "fix it", 1440)
	if err != nil {
		t.Fatal(err)
	}
	if th.ID != um.ID || th.ParentID != fakediscord.DefaultChannelID || th.OwnerID != fakediscord.DefaultAppID || th.Type != discordgo.ChannelTypeGuildPublicThread {
		t.Fatalf("thread = %+v", th)
	}
	tc := recv(t, created, "THREAD_CREATE")
	if tc.ID != th.ID || !tc.NewlyCreated || tc.OwnerID != fakediscord.DefaultAppID {
		t.Fatalf("THREAD_CREATE = %+v", tc.Channel)
	}
	_, err = s.MessageThreadStart(fakediscord.DefaultChannelID, um.ID, "again", 1440)
	if _, code := restCode(t, err); code != fakediscord.CodeThreadExists {
		t.Fatalf("second thread from one message: code %d, want %d", code, fakediscord.CodeThreadExists)
	}
	bare, err := s.ThreadStart(fakediscord.DefaultChannelID, "bare", discordgo.ChannelTypeGuildPublicThread, 60)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Channel(bare.ID)
	if err != nil || got.ParentID != fakediscord.DefaultChannelID || !got.IsThread() {
		t.Fatalf("GET channel = %+v, %v", got, err)
	}
	if n := len(f.Threads(fakediscord.DefaultChannelID)); n != 2 {
		t.Fatalf("threads = %d, want 2", n)
	}
	if _, err := s.ChannelMessageSend(th.ID, "in thread"); err != nil {
		t.Fatal(err)
	}
	if msgs := f.Messages(th.ID); len(msgs) != 1 || msgs[0].GuildID != fakediscord.DefaultGuildID {
		t.Fatalf("thread messages = %+v", msgs)
	}
}

func TestRateLimitIsRetriedByDiscordgo(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, 0)
	m, err := s.ChannelMessageSend(fakediscord.DefaultChannelID, "v1")
	if err != nil {
		t.Fatal(err)
	}
	f.RateLimitNext(fakediscord.RouteEditMessage, 2, 0, false)
	if _, err := s.ChannelMessageEdit(fakediscord.DefaultChannelID, m.ID, "v2"); err != nil {
		t.Fatalf("edit after 429s: %v", err)
	}
	if n := f.RateLimited(); n != 2 {
		t.Fatalf("429s = %d, want 2", n)
	}
	if got, _ := f.Message(m.ID); got.Content != "v2" || len(f.Edits()) != 1 {
		t.Fatalf("edit lost or doubled: %q, %d edits", got.Content, len(f.Edits()))
	}

	// With retries off, discordgo surfaces the 429 with the fake's retry_after.
	f.RateLimitNext(fakediscord.RouteEditMessage, 1, 1500*time.Millisecond, true)
	s.ShouldRetryOnRateLimit = false
	_, err = s.ChannelMessageEdit(fakediscord.DefaultChannelID, m.ID, "v3")
	var rl *discordgo.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter.Milliseconds() != 1500 {
		t.Fatalf("want RateLimitError with retry_after 1.5s, got %v", err)
	}
}

func TestApplicationCommands(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, 0)
	cmds := []*discordgo.ApplicationCommand{
		{Name: "stop", Description: "Stop the turn"},
		{Name: "backend", Description: "Switch backend", Options: []*discordgo.ApplicationCommandOption{{
			Type: discordgo.ApplicationCommandOptionString, Name: "name", Description: "backend", Required: true,
			Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "local", Value: "local"}, {Name: "docker", Value: "docker"}},
		}}},
	}
	got, err := s.ApplicationCommandBulkOverwrite(fakediscord.DefaultAppID, fakediscord.DefaultGuildID, cmds)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID == "" || got[0].ApplicationID != fakediscord.DefaultAppID || got[1].GuildID != fakediscord.DefaultGuildID {
		t.Fatalf("registered = %+v", got)
	}
	if len(f.Commands(fakediscord.DefaultGuildID)) != 2 || len(f.Commands("")) != 0 {
		t.Fatal("commands stored in the wrong scope")
	}
	if _, err := s.ApplicationCommandBulkOverwrite(fakediscord.DefaultAppID, "", cmds[:1]); err != nil || len(f.Commands("")) != 1 {
		t.Fatalf("global overwrite: %v", err)
	}
	bad := []*discordgo.ApplicationCommand{{Name: "Bad Name", Description: "x"}}
	if _, err := s.ApplicationCommandBulkOverwrite(fakediscord.DefaultAppID, "", bad); err == nil {
		t.Fatal("invalid command name accepted")
	}
	if len(f.Commands("")) != 1 {
		t.Fatal("a refused overwrite replaced the commands")
	}
	if _, err := f.SlashCommand(fakediscord.DefaultChannelID, alice, "backend", fakediscord.CommandOption{Name: "name", Value: "e2b"}); err == nil {
		t.Fatal("value outside the choices accepted")
	}
	if _, err := f.SlashCommand(fakediscord.DefaultChannelID, alice, "nope"); err == nil {
		t.Fatal("unregistered command accepted")
	}
}
