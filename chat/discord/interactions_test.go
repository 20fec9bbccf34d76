package discord_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// session starts a session thread and returns its location.
func startSession(t *testing.T, f *fakediscord.Server, rec *chattest.Core) chat.Thread {
	t.Helper()
	n := len(rec.Record().Messages)
	if _, err := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"work"); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "session start", func(r chattest.Record) bool { return len(r.Messages) > n })
	return rec.Record().Messages[n].Thread
}

func interaction(t *testing.T, f *fakediscord.Server, id string) fakediscord.Interaction {
	t.Helper()
	in, ok := f.Interaction(id)
	if !ok {
		t.Fatalf("no interaction %s", id)
	}
	return in
}

func TestSlashCommandInSessionThread(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	start(t, config(f), rec)
	th := startSession(t, f, rec)

	id, err := f.SlashCommand(th.Thread, alice, "backend", fakediscord.CommandOption{Name: "name", Value: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "command", func(r chattest.Record) bool { return len(r.Commands) == 1 })
	c := rec.Record().Commands[0]
	if c.Thread != th || c.Cmd.Name != chat.CmdBackend || c.Cmd.Backend != "docker" || c.User.ID != alice.User.ID {
		t.Fatalf("command = %+v", c)
	}
	// Deferred privately; the public answer replaces the placeholder.
	wait(t, f, "answer", func() bool { return len(interaction(t, f, id).FollowUps) == 1 })
	in := interaction(t, f, id)
	orig, _ := f.Message(in.OriginalID)
	fu, _ := f.Message(in.FollowUps[0])
	if in.ResponseType != fakediscord.CallbackDeferMessage || in.ResponseFlags&fakediscord.FlagEphemeral == 0 || !orig.Deleted {
		t.Fatalf("want a private deferral replaced by the answer, got type %d flags %d, original deleted=%v", in.ResponseType, in.ResponseFlags, orig.Deleted)
	}
	if fu.Ephemeral() || fu.Content != "ran /backend" || fu.ChannelID != th.Thread {
		t.Fatalf("public answer = %+v", fu)
	}

	// /fork with both options and /destroy confirm map onto the core's command.
	if _, err := f.SlashCommand(th.Thread, alice, "fork", fakediscord.CommandOption{Name: "title", Value: "try b"}, fakediscord.CommandOption{Name: "backend", Value: "local"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.SlashCommand(th.Thread, alice, "destroy", fakediscord.CommandOption{Name: "confirm", Value: true}); err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "fork and destroy", func(r chattest.Record) bool { return len(r.Commands) == 3 })
	got := map[string]chat.Command{}
	for _, c := range rec.Record().Commands[1:] {
		got[c.Cmd.Name] = c.Cmd
	}
	if f := got[chat.CmdFork]; f.Title != "try b" || f.Backend != "local" {
		t.Fatalf("fork = %+v", f)
	}
	if !got[chat.CmdDestroy].Confirm {
		t.Fatalf("destroy = %+v", got[chat.CmdDestroy])
	}
}

func TestCommandAnswersCardsAndPrivacy(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	rec.OnCommand = func(_ context.Context, _ chat.Poster, c chattest.CommandCall) (chat.Reply, error) {
		switch c.Cmd.Name {
		case chat.CmdStatus:
			return chat.Reply{Ephemeral: true, Card: &chat.Card{Title: "📋 Session", Blocks: []chat.Block{{Kind: chat.BlockFields, Fields: []chat.Field{{Label: "Backend", Value: "local"}}}}}}, nil
		case chat.CmdStop:
			// what the core says outside a session
			return chat.Reply{Text: "There is no session in this thread.", Ephemeral: true}, nil
		}
		return chat.Reply{Text: "ok"}, nil
	}
	start(t, config(f), rec)
	th := startSession(t, f, rec)

	// /status: deferred ephemerally, answered with the card.
	sid, _ := f.SlashCommand(th.Thread, alice, "status")
	wait(t, f, "status card", func() bool {
		m, _ := f.Message(interaction(t, f, sid).OriginalID)
		return strings.Contains(m.EmbedText(), "**Backend:** local")
	})
	if in := interaction(t, f, sid); in.ResponseFlags&fakediscord.FlagEphemeral == 0 {
		t.Fatalf("/status was not deferred ephemerally: %+v", in)
	}

	// /stop in the plain channel: known not to be a session thread, so
	// deferred ephemerally from the start.
	cid, _ := f.SlashCommand(fakediscord.DefaultChannelID, alice, "stop")
	wait(t, f, "stop answer", func() bool {
		m, _ := f.Message(interaction(t, f, cid).OriginalID)
		return m.Content == "There is no session in this thread."
	})
	if in := interaction(t, f, cid); in.ResponseFlags&fakediscord.FlagEphemeral == 0 {
		t.Fatalf("/stop outside a thread was not ephemeral: %+v", in)
	}
	cmds := rec.Record().Commands
	if c := cmds[len(cmds)-1]; c.Thread.Thread != "" || c.Thread.Channel != fakediscord.DefaultChannelID {
		t.Fatalf("location outside a thread = %+v", c.Thread)
	}

	// /stop in the thread is deferred privately too, and the private
	// answer edits the placeholder: nothing public appears and vanishes.
	tid, _ := f.SlashCommand(th.Thread, alice, "stop")
	wait(t, f, "private answer", func() bool {
		m, _ := f.Message(interaction(t, f, tid).OriginalID)
		return m.Content == "There is no session in this thread."
	})
	in := interaction(t, f, tid)
	orig, _ := f.Message(in.OriginalID)
	if in.ResponseFlags&fakediscord.FlagEphemeral == 0 || orig.Deleted || !orig.Ephemeral() || len(in.FollowUps) != 0 {
		t.Fatalf("in place: interaction %+v, original %+v", in, orig)
	}
}

func TestAnswerAfterTokenExpiryIsABotMessage(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	release := make(chan struct{})
	rec.OnCommand = func(ctx context.Context, _ chat.Poster, c chattest.CommandCall) (chat.Reply, error) {
		if c.Cmd.Name == chat.CmdFork {
			<-release // the fork takes longer than the token lives
		}
		return chat.Reply{Text: "Forked at turn 3."}, nil
	}
	start(t, config(f), rec)
	th := startSession(t, f, rec)
	id, _ := f.SlashCommand(th.Thread, alice, "fork")
	wait(t, f, "deferred", func() bool { return interaction(t, f, id).Acked })
	f.ExpireInteraction(id)
	close(release)
	want := "<@" + alice.User.ID + "> Forked at turn 3."
	wait(t, f, "late answer in the thread", func() bool {
		for _, m := range botMessages(f, th.Thread) {
			if m.Content == want {
				return true
			}
		}
		return false
	})
	// The adapter tried the webhook first and Discord refused it.
	refused := false
	for _, r := range f.Requests() {
		refused = refused || (strings.Contains(r.Path, "/webhooks/") && r.Status == 401)
	}
	if !refused {
		t.Fatal("no refused webhook call recorded; the handover was not exercised")
	}
}

func TestShortTokenTTLGoesStraightToBotMessages(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	cfg := config(f)
	cfg.InteractionTokenTTL = time.Nanosecond // every answer comes "after" the token
	start(t, cfg, rec)
	th := startSession(t, f, rec)
	if _, err := f.SlashCommand(th.Thread, alice, "stop"); err != nil {
		t.Fatal(err)
	}
	// The answer is a bot message of its own (not an interaction response).
	wait(t, f, "answer", func() bool {
		for _, m := range botMessages(f, th.Thread) {
			if m.Interaction == "" && m.Content == "<@"+alice.User.ID+"> ran /stop" {
				return true
			}
		}
		return false
	})
	if hasRequest(f, "PATCH", "/webhooks/") || hasRequest(f, "POST", "/webhooks/") {
		t.Fatal("the adapter used an interaction token it considered expired")
	}
}

// statusMessage posts a card with approval buttons through the adapter.
func statusMessage(t *testing.T, a *discord.Adapter, th chat.Thread) (string, map[string]string) {
	t.Helper()
	v := "2.call_1"
	ref, err := a.Post(t.Context(), th, chat.Card{Title: "✋ Waiting for approval", Blocks: []chat.Block{
		{Kind: chat.BlockCode, Text: "rm -rf build"},
		{Kind: chat.BlockActions, Buttons: []chat.Button{
			{ID: chat.ActionApprove, Label: "Approve", Style: chat.StylePrimary, Value: v},
			{ID: chat.ActionApproveAlways, Label: "Approve always", Value: v},
			{ID: chat.ActionReject, Label: "Reject", Style: chat.StyleDanger, Value: v},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, b := range []string{chat.ActionApprove, chat.ActionApproveAlways, chat.ActionReject} {
		ids[b], _ = discord.CustomID(b, v)
	}
	return ref, ids
}

func TestApproveButton(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	rec.OnAction = func(ctx context.Context, _ chat.Poster, a chat.Action) error {
		if a.User.ID == bob.User.ID {
			_ = a.Reply(ctx, "You may not approve in this session.")
		}
		return nil
	}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)
	ref, ids := statusMessage(t, a, th)

	id, err := f.ClickButton(ref, alice, ids[chat.ActionApprove])
	if err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "action", func(r chattest.Record) bool { return len(r.Actions) == 1 })
	act := rec.Record().Actions[0]
	if act.ID != chat.ActionApprove || act.Value != "2.call_1" || act.User.ID != alice.User.ID || act.Thread != th || act.Reason != "" {
		t.Fatalf("action = %+v", act)
	}
	wait(t, f, "the click's ack", func() bool { return interaction(t, f, id).ResponseType != 0 })
	if in := interaction(t, f, id); in.ResponseType != fakediscord.CallbackDeferUpdate {
		t.Fatalf("button ack type %d, want deferred update", in.ResponseType)
	}

	// A refusal from the core reaches only the clicking user.
	bid, _ := f.ClickButton(ref, bob, ids[chat.ActionApproveAlways])
	wait(t, f, "ephemeral refusal", func() bool { return len(interaction(t, f, bid).FollowUps) == 1 })
	fu, _ := f.Message(interaction(t, f, bid).FollowUps[0])
	if !fu.Ephemeral() || fu.Content != "You may not approve in this session." {
		t.Fatalf("refusal = %+v", fu)
	}
}

func TestRejectOpensModalWithReason(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)
	ref, ids := statusMessage(t, a, th)

	rid, _ := f.ClickButton(ref, alice, ids[chat.ActionReject])
	wait(t, f, "modal", func() bool { return interaction(t, f, rid).ResponseType == fakediscord.CallbackModal })
	if len(rec.Record().Actions) != 0 {
		t.Fatal("reject decided before the modal was submitted")
	}
	sid, err := f.SubmitModal(rid, alice, map[string]string{"reason": "not on main"})
	if err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "reject action", func(r chattest.Record) bool { return len(r.Actions) == 1 })
	act := rec.Record().Actions[0]
	if act.ID != chat.ActionReject || act.Value != "2.call_1" || act.Reason != "not on main" || act.Thread != th {
		t.Fatalf("action = %+v", act)
	}
	// Acknowledged once decided, with a deferred update of the card.
	wait(t, f, "the submit's ack", func() bool { return interaction(t, f, sid).ResponseType != 0 })
	if in := interaction(t, f, sid); in.ResponseType != fakediscord.CallbackDeferUpdate {
		t.Fatalf("modal submit ack type %d", in.ResponseType)
	}
}

func TestUnauthorizedClickIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	cfg := config(f)
	cfg.AllowedRoles = []string{approverRole}
	a := start(t, cfg, rec)
	th := startSession(t, f, rec)
	ref, ids := statusMessage(t, a, th)
	for _, b := range []string{chat.ActionApprove, chat.ActionReject} {
		id, _ := f.ClickButton(ref, bob, ids[b])
		wait(t, f, "refusal", func() bool { return interaction(t, f, id).Acked })
		in := interaction(t, f, id)
		m, _ := f.Message(in.OriginalID)
		if in.ResponseType != fakediscord.CallbackMessage || !m.Ephemeral() || m.Content != "You may not use this bot here." {
			t.Fatalf("%s by bob: %+v / %+v", b, in, m)
		}
	}
	// alice (sentinel) gets through; bob's clicks never reached the core.
	_, _ = f.ClickButton(ref, alice, ids[chat.ActionApprove])
	rec.WaitFor(t, "alice's action", func(r chattest.Record) bool { return len(r.Actions) == 1 })
	if a := rec.Record().Actions[0]; a.User.ID != alice.User.ID {
		t.Fatalf("action by %s", a.User.ID)
	}
}

// TestClickAckWaitsForTheDecision: a click is acknowledged only once its
// decision reached the session, so a bot that dies before then leaves it
// unacknowledged and Discord tells the user the application did not
// respond. The deferred update used to go out first: the click looked
// accepted and decided nothing.
func TestClickAckWaitsForTheDecision(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	release := make(chan struct{})
	rec.OnAction = func(ctx context.Context, _ chat.Poster, _ chat.Action) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cfg := config(f)
	cfg.AckWithin = time.Hour
	a := start(t, cfg, rec)
	th := startSession(t, f, rec)
	ref, ids := statusMessage(t, a, th)

	id, err := f.ClickButton(ref, alice, ids[chat.ActionApprove])
	if err != nil {
		t.Fatal(err)
	}
	rec.WaitFor(t, "the click", func(r chattest.Record) bool { return len(r.Actions) == 1 })
	if in := interaction(t, f, id); in.ResponseType != 0 {
		t.Fatalf("the click was acknowledged (type %d) before its decision reached the session", in.ResponseType)
	}
	close(release)
	wait(t, f, "the ack after the decision", func() bool { return interaction(t, f, id).ResponseType == fakediscord.CallbackDeferUpdate })
}

// TestSlowDecisionIsAcknowledgedInTime: a decision that takes longer than
// AckWithin is acknowledged at AckWithin, inside Discord's 3 s, and its
// refusal still reaches the user as a follow-up.
func TestSlowDecisionIsAcknowledgedInTime(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	release := make(chan struct{})
	rec.OnAction = func(ctx context.Context, _ chat.Poster, a chat.Action) error {
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return a.Reply(ctx, "You may not approve in this session.")
	}
	cfg := config(f)
	cfg.AckWithin = 10 * time.Millisecond
	a := start(t, cfg, rec)
	th := startSession(t, f, rec)
	ref, ids := statusMessage(t, a, th)

	id, err := f.ClickButton(ref, bob, ids[chat.ActionApprove])
	if err != nil {
		t.Fatal(err)
	}
	wait(t, f, "the ack while the decision waits", func() bool { return interaction(t, f, id).ResponseType == fakediscord.CallbackDeferUpdate })
	close(release)
	wait(t, f, "the refusal", func() bool { return len(interaction(t, f, id).FollowUps) == 1 })
}
