package fakediscord_test

import (
	"testing"

	"github.com/bwmarrin/discordgo"

	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// A follow-up while the deferred "thinking…" message still loads edits
// it, keeping the deferral's visibility (Discord's compatibility rule); once
// the deferred message is gone, a follow-up is a message of its own with
// its own visibility.
func TestFollowUpWhileThinkingEditsTheDeferral(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents)
	got := interactions(s)
	open(t, s)
	registerStop(t, s)
	defer1 := func() (string, *discordgo.InteractionCreate) {
		t.Helper()
		id, err := f.SlashCommand(fakediscord.DefaultChannelID, alice, "fork")
		if err != nil {
			t.Fatal(err)
		}
		ic := recv(t, got, "interaction")
		if err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral},
		}); err != nil {
			t.Fatal(err)
		}
		return id, ic
	}

	id, ic := defer1()
	fu, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "for everyone?"})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := f.Interaction(id)
	orig, _ := f.Message(in.OriginalID)
	if fu.ID != in.OriginalID || len(in.FollowUps) != 0 || !orig.Ephemeral() || orig.Content != "for everyone?" {
		t.Fatalf("follow-up while thinking: returned %s, interaction %+v, original %+v", fu.ID, in, orig)
	}

	id, ic = defer1()
	if err := s.InteractionResponseDelete(ic.Interaction); err != nil {
		t.Fatal(err)
	}
	fu, err = s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "for everyone"})
	if err != nil {
		t.Fatal(err)
	}
	in, _ = f.Interaction(id)
	m, _ := f.Message(fu.ID)
	if len(in.FollowUps) != 1 || in.FollowUps[0] != fu.ID || m.Ephemeral() || m.Content != "for everyone" {
		t.Fatalf("follow-up after the deferral went: interaction %+v, message %+v", in, m)
	}
}

// SubmitModalWith sends the shapes a bot meets besides the usual one: a
// submit without the interaction's message, and inputs that differ from
// the modal's.
func TestSubmitModalWithOtherShapes(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents)
	got := interactions(s)
	open(t, s)
	m, err := s.ChannelMessageSendComplex(fakediscord.DefaultChannelID, &discordgo.MessageSend{
		Content: "approve?",
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.Button{Label: "Reject", Style: discordgo.DangerButton, CustomID: "r:1"},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rid, _ := f.ClickButton(m.ID, alice, "r:1")
	ic := recv(t, got, "button")
	if err := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: &discordgo.InteractionResponseData{
		CustomID: "m:1", Title: "Reject",
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.TextInput{CustomID: "reason", Label: "Reason", Style: discordgo.TextInputParagraph},
		}}},
	}}); err != nil {
		t.Fatal(err)
	}

	sid, err := f.SubmitModalWith(rid, alice, fakediscord.ModalSubmission{Values: map[string]string{"why": "old form"}, Inputs: []string{"why"}, NoMessage: true})
	if err != nil {
		t.Fatal(err)
	}
	sub := recv(t, got, "modal submit")
	md := sub.ModalSubmitData()
	if sub.ID != sid || sub.Message != nil || md.CustomID != "m:1" || len(md.Components) != 1 {
		t.Fatalf("submit = %+v, data %+v", sub.Interaction, md)
	}
	if ti := md.Components[0].(*discordgo.ActionsRow).Components[0].(*discordgo.TextInput); ti.CustomID != "why" || ti.Value != "old form" {
		t.Fatalf("input = %+v", ti)
	}
	// Without a message, only a new response fits: a deferred update is
	// refused, as on Discord.
	if err := s.InteractionRespond(sub.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}); err == nil {
		t.Fatal("deferred update accepted for a modal submit without a message")
	}

	if _, err := f.SubmitModalWith(rid, alice, fakediscord.ModalSubmission{Inputs: []string{}}); err != nil {
		t.Fatal(err)
	}
	if sub := recv(t, got, "empty submit"); len(sub.ModalSubmitData().Components) != 0 || sub.Message == nil || sub.Message.ID != m.ID {
		t.Fatalf("empty submit = %+v", sub.Interaction)
	}
}
