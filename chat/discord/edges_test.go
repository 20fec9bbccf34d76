package discord_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// Discord shows embed footers without Markdown, so the card footer goes
// out as plain text, while the description keeps its Markdown.
func TestCardFooterIsPlainText(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)
	card := func(footer string) chat.Card {
		return chat.Card{Title: "📋 Session", Blocks: []chat.Block{
			{Kind: chat.BlockFields, Fields: []chat.Field{{Label: "Backend", Value: "local"}}},
			{Kind: chat.BlockText, Text: "[Open in the Temporal UI](http://ui/x) · `make test`"},
			{Kind: chat.BlockContext, Text: footer},
		}}
	}
	ref, err := a.Post(t.Context(), th, card("Workflow `"+th.ID()+"`"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := f.Message(ref)
	if fs := m.EmbedFooters(); len(fs) != 1 || fs[0] != "Workflow "+th.ID() {
		t.Fatalf("footer = %q, want plain %q", fs, "Workflow "+th.ID())
	}
	if text := m.EmbedText(); !strings.Contains(text, "**Backend:** local") || !strings.Contains(text, "[Open in the Temporal UI](http://ui/x) · `make test`") {
		t.Fatalf("description lost its Markdown:\n%s", text)
	}

	// Edits convert the footer the same way.
	if err := a.Edit(t.Context(), th, ref, card("**Turn 2** · _docker_ · [PR](https://github.com/o/r/pull/7)")); err != nil {
		t.Fatal(err)
	}
	edits := f.Edits()
	if fs := edits[len(edits)-1].EmbedFooters(); len(fs) != 1 || fs[0] != "Turn 2 · docker · PR (https://github.com/o/r/pull/7)" {
		t.Fatalf("edited footer = %q", fs)
	}
}

// rejectModal clicks Reject on a fresh approval card and waits for the
// modal; it returns the click's interaction ID.
func rejectModal(t *testing.T, f *fakediscord.Server, a *discord.Adapter, th chat.Thread) string {
	t.Helper()
	ref, ids := statusMessage(t, a, th)
	rid, err := f.ClickButton(ref, alice, ids[chat.ActionReject])
	if err != nil {
		t.Fatal(err)
	}
	wait(t, f, "modal", func() bool { return interaction(t, f, rid).ResponseType == fakediscord.CallbackModal })
	return rid
}

// answerOf waits until interaction id has an answer and returns it: the
// deferred response once edited, or its single follow-up.
func answerOf(t *testing.T, f *fakediscord.Server, id string) fakediscord.Message {
	t.Helper()
	var got fakediscord.Message
	wait(t, f, "interaction "+id+" answered", func() bool {
		in := interaction(t, f, id)
		if len(in.FollowUps) > 0 {
			got, _ = f.Message(in.FollowUps[len(in.FollowUps)-1])
			return true
		}
		orig, ok := f.Message(in.OriginalID)
		got = orig
		return ok && in.ResponseType == fakediscord.CallbackDeferMessage && !orig.Loading() && !orig.Deleted
	})
	return got
}

// A modal submit that carries no message can only be deferred with a
// private "thinking…"; a decision the core takes without a refusal must
// still replace it.
func TestModalSubmitWithoutMessageIsAnswered(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)

	rid := rejectModal(t, f, a, th)
	sid, err := f.SubmitModalWith(rid, alice, fakediscord.ModalSubmission{Values: map[string]string{"reason": "not on main"}, NoMessage: true})
	if err != nil {
		t.Fatal(err)
	}
	got := answerOf(t, f, sid)
	in := interaction(t, f, sid)
	if in.ResponseType != fakediscord.CallbackDeferMessage || in.ResponseFlags&fakediscord.FlagEphemeral == 0 {
		t.Fatalf("submit without a message deferred with type %d flags %d, want a private deferral", in.ResponseType, in.ResponseFlags)
	}
	if !got.Ephemeral() || !strings.HasPrefix(got.Content, "Rejected") {
		t.Fatalf("answer = %+v", got)
	}
	acts := rec.Record().Actions
	if len(acts) != 1 || acts[0].ID != chat.ActionReject || acts[0].Reason != "not on main" || acts[0].Thread != th {
		t.Fatalf("actions = %+v", acts)
	}

	// A refusal by the core is the answer instead, once.
	rec.OnAction = func(ctx context.Context, _ chat.Poster, act chat.Action) error {
		return act.Reply(ctx, "This approval is no longer pending.")
	}
	rid = rejectModal(t, f, a, th)
	sid, _ = f.SubmitModalWith(rid, alice, fakediscord.ModalSubmission{NoMessage: true})
	if got := answerOf(t, f, sid); !got.Ephemeral() || got.Content != "This approval is no longer pending." {
		t.Fatalf("refusal = %+v", got)
	}
	if in := interaction(t, f, sid); len(in.FollowUps) != 0 {
		t.Fatalf("refusal answered twice: %+v", in)
	}
}

// A modal submit without the form's input, with or without a message,
// decides nothing and says so privately.
func TestModalSubmitWithoutItsInputDecidesNothing(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)

	for _, noMessage := range []bool{false, true} {
		rid := rejectModal(t, f, a, th)
		sid, err := f.SubmitModalWith(rid, alice, fakediscord.ModalSubmission{Values: map[string]string{"why": "old form"}, Inputs: []string{"why"}, NoMessage: noMessage})
		if err != nil {
			t.Fatal(err)
		}
		got := answerOf(t, f, sid)
		if !got.Ephemeral() || !strings.Contains(got.Content, "without its reason field") || !strings.Contains(got.Content, "nothing was decided") {
			t.Fatalf("no message %v: answer = %+v", noMessage, got)
		}
		if orig, _ := f.Message(interaction(t, f, sid).OriginalID); orig.Loading() {
			t.Fatalf("no message %v: the deferred response still shows thinking", noMessage)
		}
	}
	if acts := rec.Record().Actions; len(acts) != 0 {
		t.Fatalf("a form without its input decided: %+v", acts)
	}
}

// /backend's answer is private or public depending on how it ends, and no
// deferral can change visibility later: it is deferred privately, a
// private answer edits it, and a public one replaces it, so no public
// "thinking…" ever shows for a private answer or vanishes from the
// channel.
func TestBackendDeferralNeverShowsPublicThinking(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	rec.OnCommand = func(_ context.Context, _ chat.Poster, c chattest.CommandCall) (chat.Reply, error) {
		switch {
		case c.Cmd.Name == chat.CmdStatus:
			return chat.Reply{Card: &chat.Card{Title: "📋 Session"}, Ephemeral: true}, nil
		case c.Cmd.Backend == "":
			return chat.Reply{Text: "Backend: **local**.", Ephemeral: true}, nil
		case c.Cmd.Backend == "docker":
			return chat.Reply{Text: "Backend **docker** is not available: no running worker serves it.", Ephemeral: true}, nil
		}
		return chat.Reply{Text: "Switching backend from **docker** to **local**; the workspace moves with it."}, nil
	}
	start(t, config(f), rec)
	th := startSession(t, f, rec)

	private := func(what string, id string, want string) {
		t.Helper()
		got := answerOf(t, f, id)
		in := interaction(t, f, id)
		if in.ResponseFlags&fakediscord.FlagEphemeral == 0 || !got.Ephemeral() || got.ID != in.OriginalID || !strings.Contains(got.Content+got.EmbedText(), want) {
			t.Fatalf("%s: deferral flags %d, answer %+v", what, in.ResponseFlags, got)
		}
	}
	id, _ := f.SlashCommand(th.Thread, alice, "backend")
	private("/backend", id, "Backend: **local**.")
	id, _ = f.SlashCommand(th.Thread, alice, "backend", fakediscord.CommandOption{Name: "name", Value: "docker"})
	private("/backend docker (refused)", id, "is not available")
	// /status is private, as Slack answers it.
	id, _ = f.SlashCommand(th.Thread, alice, "status")
	private("/status", id, "📋 Session")

	id, _ = f.SlashCommand(th.Thread, alice, "backend", fakediscord.CommandOption{Name: "name", Value: "local"})
	got := answerOf(t, f, id)
	in := interaction(t, f, id)
	orig, _ := f.Message(in.OriginalID)
	if in.ResponseFlags&fakediscord.FlagEphemeral == 0 || !orig.Ephemeral() || !orig.Deleted {
		t.Fatalf("/backend local: the private placeholder was not replaced: %+v / %+v", in, orig)
	}
	if got.Ephemeral() || got.Content != "Switching backend from **docker** to **local**; the workspace moves with it." || got.ChannelID != th.Thread {
		t.Fatalf("/backend local: public answer = %+v", got)
	}

	// Nothing public was ever a "thinking…" placeholder, deleted or not.
	for _, r := range f.Requests() {
		if strings.Contains(r.Path, "/callback") && !strings.Contains(string(r.Body), `"flags":64`) && strings.Contains(string(r.Body), `"type":5`) {
			t.Fatalf("a public deferral was sent: %s", r.Body)
		}
	}
}
