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
	"github.com/sandbot/sandbot/session"
)

// newCore is the real chat core over fake sessions, with the adapter's
// budget but fast pacing so tests do not wait for Discord's real pace.
func newCore(t testing.TB, cfg discord.Config, fs *chattest.Sessions) *chat.Core {
	b := cfg.Budget()
	b.MinEditInterval = 5 * time.Millisecond
	core := chat.NewCore(chat.CoreConfig{
		Budgets: map[string]chat.Budget{discord.Platform: b},
		PollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond,
		Backends: cfg.Backends,
	}, fs, testLog(t))
	t.Cleanup(core.Close)
	return core
}

// edited waits for an edit of message ref that satisfies ok.
func edited(t *testing.T, f *fakediscord.Server, ref, what string, ok func(fakediscord.Edit) bool) fakediscord.Edit {
	t.Helper()
	var got fakediscord.Edit
	wait(t, f, what, func() bool {
		for _, e := range f.Edits() {
			if e.MessageID == ref && ok(e) {
				got = e
				return true
			}
		}
		return false
	})
	return got
}

func exit(n int) *int { return &n }

func TestCoreTurnWithApprovalsAndAnswer(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	cfg := config(f)
	fs := &chattest.Sessions{ApproverRoles: []string{approverRole}}
	start(t, cfg, newCore(t, cfg, fs))

	um, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"run the tests")
	th := chat.Thread{Platform: "discord", Workspace: fakediscord.DefaultGuildID, Channel: fakediscord.DefaultChannelID, Thread: um.ID}
	id := th.ID()
	ref := statusRef(t, f, fs, id)
	status, _ := f.Message(ref)
	if status.ChannelID != um.ID {
		t.Fatalf("status message in %s, want the session thread %s", status.ChannelID, um.ID)
	}

	fs.Set(id, func(ts *session.TurnState) {
		ts.ToolCalls = []session.ToolCallState{{CallID: "call_1", Name: "shell", Commands: []string{"go test ./..."}, Status: session.CallRunning}}
	})
	edited(t, f, ref, "running call shown", func(e fakediscord.Edit) bool { return strings.Contains(e.EmbedText(), "go test ./...") })

	fs.Set(id, func(ts *session.TurnState) {
		ts.ToolCalls[0].Status, ts.ToolCalls[0].ExitCode, ts.ToolCalls[0].Output = session.CallCompleted, exit(0), "ok  pkg 0.1s"
		ts.ToolCalls = append(ts.ToolCalls, session.ToolCallState{CallID: "call_2", Name: "shell", Commands: []string{"rm -rf build"}, Status: session.CallAwaitingApproval})
		ts.Status = session.StatusAwaitingApproval
		ts.Pending = &session.PendingApproval{CallID: "call_2", Command: "rm -rf build", AskedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	})
	withButtons := edited(t, f, ref, "approval buttons", hasApprovalButtons)
	approveID := customIDOf(t, withButtons, "approve:")

	// bob may not approve: the bot refuses before asking the workflow, only to him.
	bid, err := f.ClickButton(ref, bob, approveID)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, f, "refusal for bob", func() bool { return len(interaction(t, f, bid).FollowUps) == 1 })
	fu, _ := f.Message(interaction(t, f, bid).FollowUps[0])
	if !fu.Ephemeral() || fu.Content != "You may not approve commands in this session: only its owner (alice) and approvers may." {
		t.Fatalf("bob's answer = %+v", fu)
	}

	// alice approves: the card is updated in place, naming her, without buttons.
	if _, err := f.ClickButton(ref, alice, approveID); err != nil {
		t.Fatal(err)
	}
	edited(t, f, ref, "decision shown", func(e fakediscord.Edit) bool {
		return strings.Contains(e.EmbedText(), "approved by <@"+alice.User.ID+">") && !hasApprovalButtons(e)
	})
	if a := fs.Approvals(); len(a) != 1 || a[0].CallID != "call_2" || a[0].Decision != session.DecisionApprove || a[0].User.ID != alice.User.ID {
		t.Fatalf("approvals = %+v", a)
	}

	answer := "All green.\n\n```text\n" + strings.Repeat("PASS pkg/some/long/package/path 0.01s\n", 80) + "```"
	fs.Set(id, func(ts *session.TurnState) {
		ts.ToolCalls[1].Status, ts.ToolCalls[1].ExitCode = session.CallCompleted, exit(0)
		ts.Status, ts.FinalText, ts.EndedAt = session.StatusComplete, answer, time.Now()
	})
	waitBoth(t, f, fs, "final answer recorded", func() bool { return fs.Get(id).FinalRef != "" })
	edited(t, f, ref, "final status", func(e fakediscord.Edit) bool { return e.Content == "✅ Done" })
	// Between the card and the answer, the approvers were told once (a
	// new message mentions them; the card's edit notifies nobody).
	var parts, before []fakediscord.Message
	final := fs.Get(id).FinalRef
	for _, m := range botMessages(f, th.Thread) {
		switch {
		case m.ID == ref:
		case m.ID == final || len(parts) > 0:
			parts = append(parts, m)
		default:
			before = append(before, m)
		}
	}
	if len(before) != 1 || !strings.Contains(before[0].Content, "<@"+alice.User.ID+">") {
		t.Fatalf("messages before the answer = %+v, want one telling the approvers", before)
	}
	if len(parts) != 2 || !strings.HasPrefix(parts[0].Content, "All green.") {
		t.Fatalf("answer parts = %d (final ref %s)", len(parts), final)
	}
	for _, p := range parts {
		if strings.Count(p.Content, "```")%2 != 0 {
			t.Fatalf("part with an open code block: %q", p.Content)
		}
	}
}

// hasApprovalButtons reports whether an edit shows Approve, Approve
// always and Reject (a card may carry other buttons, such as Stop).
func hasApprovalButtons(e fakediscord.Edit) bool {
	n := 0
	for _, id := range e.CustomIDs() {
		for _, a := range []string{chat.ActionApprove, chat.ActionApproveAlways, chat.ActionReject} {
			if strings.HasPrefix(id, a+":") {
				n++
			}
		}
	}
	return n == 3
}

func customIDOf(t *testing.T, e fakediscord.Edit, prefix string) string {
	t.Helper()
	for _, id := range e.CustomIDs() {
		if strings.HasPrefix(id, prefix) {
			return id
		}
	}
	t.Fatalf("no %s button in %v", prefix, e.CustomIDs())
	return ""
}

func TestCoreRejectWithReason(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	cfg := config(f)
	fs := &chattest.Sessions{}
	start(t, cfg, newCore(t, cfg, fs))
	um, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"clean up")
	id := chat.Thread{Platform: "discord", Workspace: fakediscord.DefaultGuildID, Channel: fakediscord.DefaultChannelID, Thread: um.ID}.ID()
	statusRef(t, f, fs, id)
	fs.Set(id, func(ts *session.TurnState) {
		ts.ToolCalls = []session.ToolCallState{{CallID: "call_9", Name: "shell", Commands: []string{"git push -f"}, Status: session.CallAwaitingApproval}}
		ts.Status = session.StatusAwaitingApproval
		ts.Pending = &session.PendingApproval{CallID: "call_9", Command: "git push -f"}
	})
	ref := fs.Get(id).StatusRef
	e := edited(t, f, ref, "buttons", hasApprovalButtons)
	rid, _ := f.ClickButton(ref, alice, customIDOf(t, e, "reject:"))
	wait(t, f, "modal", func() bool { return interaction(t, f, rid).ResponseType == fakediscord.CallbackModal })
	if _, err := f.SubmitModal(rid, alice, map[string]string{"reason": "never force-push"}); err != nil {
		t.Fatal(err)
	}
	edited(t, f, ref, "rejection shown", func(e fakediscord.Edit) bool {
		return strings.Contains(e.EmbedText(), "rejected by <@"+alice.User.ID+">: never force-push")
	})
	if a := fs.Approvals(); len(a) != 1 || a[0].Decision != session.DecisionReject || a[0].Reason != "never force-push" {
		t.Fatalf("approvals = %+v", a)
	}
}

// TestRestartKeepsEditingTheStatusMessage stops the bot mid-turn while
// an approval is pending, changes the turn while it is away, and starts a
// new bot: it resumes watching and edits the status message it posted
// before instead of posting another, and the buttons posted before the
// restart still work.
func TestRestartKeepsEditingTheStatusMessage(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	cfg := config(f)
	fs := &chattest.Sessions{}

	core1 := newCore(t, cfg, fs)
	a1, err := discord.New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx1, stop1 := context.WithCancel(context.Background())
	done1 := make(chan error, 1)
	go func() { done1 <- a1.Run(ctx1, core1) }()
	stopped := false
	stopBot1 := func() {
		if !stopped {
			stopped = true
			stop1()
			if err := <-done1; err != nil {
				t.Error(err)
			}
			core1.Close()
		}
	}
	t.Cleanup(stopBot1)
	<-a1.Ready()

	um, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"long job")
	th := chat.Thread{Platform: "discord", Workspace: fakediscord.DefaultGuildID, Channel: fakediscord.DefaultChannelID, Thread: um.ID}
	id := th.ID()
	ref := statusRef(t, f, fs, id)
	fs.Set(id, func(ts *session.TurnState) {
		ts.ToolCalls = []session.ToolCallState{
			{CallID: "c1", Name: "shell", Commands: []string{"make build"}, Status: session.CallCompleted, ExitCode: exit(0)},
			{CallID: "c2", Name: "shell", Commands: []string{"make deploy"}, Status: session.CallAwaitingApproval},
		}
		ts.Status = session.StatusAwaitingApproval
		ts.Pending = &session.PendingApproval{CallID: "c2", Command: "make deploy"}
	})
	before := edited(t, f, ref, "approval buttons", hasApprovalButtons)

	stopBot1()
	fs.Set(id, func(ts *session.TurnState) { ts.Notices = []string{"sandbox restored from snapshot"} })

	start(t, cfg, newCore(t, cfg, fs))
	edited(t, f, ref, "change made while the bot was away", func(e fakediscord.Edit) bool {
		return strings.Contains(e.EmbedText(), "sandbox restored from snapshot")
	})
	if _, err := f.ClickButton(ref, alice, customIDOf(t, before, "approve:")); err != nil {
		t.Fatal(err)
	}
	edited(t, f, ref, "decision on the same message", func(e fakediscord.Edit) bool {
		return strings.Contains(e.EmbedText(), "approved by <@"+alice.User.ID+">") && !hasApprovalButtons(e)
	})
	if a := fs.Approvals(); len(a) != 1 || a[0].CallID != "c2" {
		t.Fatalf("approvals = %+v", a)
	}
	// One status message, and the approvers told once: the restart
	// repeats neither.
	var cards, others []string
	for _, m := range botMessages(f, th.Thread) {
		if m.EmbedText() != "" {
			cards = append(cards, m.ID)
		} else {
			others = append(others, m.Content)
		}
	}
	if len(cards) != 1 || len(others) > 1 {
		t.Fatalf("thread has cards %v and messages %q, want the one status message and at most one notice", cards, others)
	}
}
