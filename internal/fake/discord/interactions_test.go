package fakediscord_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

func interactions(s *discordgo.Session) chan *discordgo.InteractionCreate {
	ch := make(chan *discordgo.InteractionCreate, 8)
	s.AddHandler(func(_ *discordgo.Session, i *discordgo.InteractionCreate) { ch <- i })
	return ch
}

func registerStop(t *testing.T, s *discordgo.Session) {
	t.Helper()
	_, err := s.ApplicationCommandBulkOverwrite(fakediscord.DefaultAppID, "", []*discordgo.ApplicationCommand{
		{Name: "fork", Description: "Fork", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionString, Name: "title", Description: "title"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSlashCommandDeferEditFollowUp(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents)
	got := interactions(s)
	open(t, s)
	registerStop(t, s)

	id, err := f.SlashCommand(fakediscord.DefaultChannelID, alice, "fork", fakediscord.CommandOption{Name: "title", Value: "try b"})
	if err != nil {
		t.Fatal(err)
	}
	ic := recv(t, got, "INTERACTION_CREATE")
	if ic.ID != id || ic.Type != discordgo.InteractionApplicationCommand || ic.Member == nil || ic.Member.User.ID != alice.User.ID {
		t.Fatalf("interaction = %+v", ic.Interaction)
	}
	data := ic.ApplicationCommandData()
	if data.Name != "fork" || data.GetOption("title").StringValue() != "try b" {
		t.Fatalf("data = %+v", data)
	}
	if err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral},
	}); err != nil {
		t.Fatal(err)
	}
	err = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource})
	if st, code := restCode(t, err); st != http.StatusBadRequest || code != fakediscord.CodeAlreadyAcked {
		t.Fatalf("second ack: %d/%d", st, code)
	}
	content := "forked"
	orig, err := s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{Content: &content})
	if err != nil {
		t.Fatal(err)
	}
	if orig.Content != "forked" || orig.Flags&discordgo.MessageFlagsEphemeral == 0 {
		t.Fatalf("@original = %+v", orig)
	}
	fu, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "more", Flags: discordgo.MessageFlagsEphemeral})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := f.Interaction(id)
	if !in.Acked || in.ResponseType != fakediscord.CallbackDeferMessage || in.OriginalID != orig.ID || len(in.FollowUps) != 1 || in.FollowUps[0] != fu.ID {
		t.Fatalf("recorded interaction = %+v", in)
	}
	if e := f.Edits(); len(e) != 1 || e[0].Via != "webhook" {
		t.Fatalf("edits = %+v", e)
	}
}

func TestAckDeadlineAndTokenExpiry(t *testing.T) {
	t.Parallel()
	// An ack deadline of 1ns has always passed by the time the callback
	// arrives.
	late := fakediscord.Start(t, fakediscord.Options{AckDeadline: time.Nanosecond})
	s := session(t, late, allIntents)
	got := interactions(s)
	open(t, s)
	registerStop(t, s)
	if _, err := late.SlashCommand(fakediscord.DefaultChannelID, alice, "fork"); err != nil {
		t.Fatal(err)
	}
	ic := recv(t, got, "interaction")
	err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource})
	if st, code := restCode(t, err); st != http.StatusNotFound || code != fakediscord.CodeUnknownInteraction {
		t.Fatalf("late ack: %d/%d", st, code)
	}

	f := fakediscord.Start(t, fakediscord.Options{})
	s2 := session(t, f, allIntents)
	got2 := interactions(s2)
	open(t, s2)
	registerStop(t, s2)
	id, _ := f.SlashCommand(fakediscord.DefaultChannelID, alice, "fork")
	ic2 := recv(t, got2, "interaction")
	if err := s2.InteractionRespond(ic2.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}); err != nil {
		t.Fatal(err)
	}
	f.ExpireInteraction(id)
	text := "too late"
	_, err = s2.InteractionResponseEdit(ic2.Interaction, &discordgo.WebhookEdit{Content: &text})
	if st, code := restCode(t, err); st != http.StatusUnauthorized || code != fakediscord.CodeInvalidToken {
		t.Fatalf("expired token edit: %d/%d", st, code)
	}
	_, err = s2.FollowupMessageCreate(ic2.Interaction, true, &discordgo.WebhookParams{Content: "too late"})
	if st, code := restCode(t, err); st != http.StatusUnauthorized || code != fakediscord.CodeInvalidToken {
		t.Fatalf("expired token follow-up: %d/%d", st, code)
	}
	// The bot token still works: a normal channel message gets through.
	if _, err := s2.ChannelMessageSend(fakediscord.DefaultChannelID, text); err != nil {
		t.Fatal(err)
	}
}

func TestButtonModalAndUpdates(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents)
	got := interactions(s)
	open(t, s)
	m, err := s.ChannelMessageSendComplex(fakediscord.DefaultChannelID, &discordgo.MessageSend{
		Content: "approve `rm -rf build`?",
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "Approve", Style: discordgo.SuccessButton, CustomID: "a:1"},
			discordgo.Button{Label: "Reject", Style: discordgo.DangerButton, CustomID: "r:1"},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ClickButton(m.ID, alice, "nope"); err == nil {
		t.Fatal("clicking a button that is not there succeeded")
	}

	// Reject opens a modal; its submit is deferred, then @original (the
	// button message) is edited through the webhook.
	rid, err := f.ClickButton(m.ID, alice, "r:1")
	if err != nil {
		t.Fatal(err)
	}
	ic := recv(t, got, "button")
	if ic.Type != discordgo.InteractionMessageComponent || ic.MessageComponentData().CustomID != "r:1" || ic.Message.ID != m.ID {
		t.Fatalf("button interaction = %+v", ic.Interaction)
	}
	badModal := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: &discordgo.InteractionResponseData{
		CustomID: "m:1", Title: strings.Repeat("t", 46),
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.TextInput{CustomID: "reason", Label: "Reason", Style: discordgo.TextInputParagraph},
		}}},
	}}
	if err := s.InteractionRespond(ic.Interaction, badModal); err == nil {
		t.Fatal("modal title over 45 accepted")
	}
	badModal.Data.Title = "Reject"
	if err := s.InteractionRespond(ic.Interaction, badModal); err != nil {
		t.Fatal(err)
	}
	sid, err := f.SubmitModal(rid, alice, map[string]string{"reason": "too risky"})
	if err != nil {
		t.Fatal(err)
	}
	sub := recv(t, got, "modal submit")
	md := sub.ModalSubmitData()
	reason := md.Components[0].(*discordgo.ActionsRow).Components[0].(*discordgo.TextInput).Value
	if sub.ID != sid || md.CustomID != "m:1" || reason != "too risky" || sub.Message == nil || sub.Message.ID != m.ID {
		t.Fatalf("modal submit = %+v (reason %q)", sub.Interaction, reason)
	}
	if err := s.InteractionRespond(sub.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}); err != nil {
		t.Fatal(err)
	}
	text := "Rejected by alice: too risky"
	empty := []discordgo.MessageComponent{}
	if _, err := s.InteractionResponseEdit(sub.Interaction, &discordgo.WebhookEdit{Content: &text, Components: &empty}); err != nil {
		t.Fatal(err)
	}
	if after, _ := f.Message(m.ID); after.Content != text || string(after.Components) != "[]" {
		t.Fatalf("button message after decision = %+v", after)
	}

	// Type 7 updates the message in place in the callback itself.
	m2, _ := s.ChannelMessageSendComplex(fakediscord.DefaultChannelID, &discordgo.MessageSend{Content: "x",
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "Approve", Style: discordgo.SuccessButton, CustomID: "a:2"}}}}})
	if _, err := f.ClickButton(m2.ID, alice, "a:2"); err != nil {
		t.Fatal(err)
	}
	ic2 := recv(t, got, "second button")
	if err := s.InteractionRespond(ic2.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseUpdateMessage,
		Data: &discordgo.InteractionResponseData{Content: "Approved by alice", Components: []discordgo.MessageComponent{}}}); err != nil {
		t.Fatal(err)
	}
	edits := f.Edits()
	if last := edits[len(edits)-1]; last.Via != "interaction" || last.MessageID != m2.ID || last.Content != "Approved by alice" {
		t.Fatalf("last edit = %+v", last)
	}
}

func TestTokenLifetimeOption(t *testing.T) {
	t.Parallel()
	// A lifetime of 1ns has passed by the time any webhook call arrives,
	// while the ack deadline (default 3 s) still holds.
	f := fakediscord.Start(t, fakediscord.Options{TokenLifetime: time.Nanosecond})
	s := session(t, f, allIntents)
	got := interactions(s)
	open(t, s)
	registerStop(t, s)
	if _, err := f.SlashCommand(fakediscord.DefaultChannelID, alice, "fork"); err != nil {
		t.Fatal(err)
	}
	ic := recv(t, got, "interaction")
	if err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}); err != nil {
		t.Fatal(err)
	}
	text := "late"
	_, err := s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{Content: &text})
	if st, code := restCode(t, err); st != http.StatusUnauthorized || code != fakediscord.CodeInvalidToken {
		t.Fatalf("edit after the lifetime: %d/%d", st, code)
	}
	gb, err := s.GatewayBot()
	if err != nil || gb.Shards != 1 || !strings.HasPrefix(gb.URL, "ws://127.0.0.1:") {
		t.Fatalf("gateway/bot = %+v, %v", gb, err)
	}
}
