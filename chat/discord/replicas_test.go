package discord_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	"github.com/sandbot/sandbot/session"
)

// TestTakeoverWaitsOutTheOtherReplicasWindow: two replicas on one bot
// token share Discord's edit bucket of a channel, but each one's discordgo
// paces by its own requests only. A replica that takes a card over
// (chat.TakeoverPacer) must not edit while the old holder's edits still
// fill the window: the fake keeps Discord's budget and records a 429 as a
// violation. Without TookOver's wait, the new replica's first edit is the
// sixth within the window (the chaos suite's load mode found it).
func TestTakeoverWaitsOutTheOtherReplicasWindow(t *testing.T) {
	window := 2 * time.Second
	f := fakediscord.Start(t, fakediscord.Options{Budgets: &fakediscord.Budgets{PerChannelWindow: window}})
	cfg := config(f)
	cfg.TakeoverWait = window
	rec := &chattest.Core{}
	old := start(t, cfg, rec)
	taker := start(t, cfg, &chattest.Core{})
	th := startSession(t, f, rec)
	card := func(i int) chat.Card {
		return chat.Card{Title: "⚙️ Running", Blocks: []chat.Block{{Kind: chat.BlockText, Text: fmt.Sprintf("⏳ `step %d`", i)}}}
	}
	ref, err := old.Post(t.Context(), th, card(0))
	if err != nil {
		t.Fatal(err)
	}
	// The old holder spends the channel's window: 5 edits.
	for i := 1; i <= 5; i++ {
		if err := old.Edit(t.Context(), th, ref, card(i)); err != nil {
			t.Fatal(err)
		}
	}
	taker.TookOver(th, ref)
	if err := taker.Edit(t.Context(), th, ref, card(6)); err != nil {
		t.Fatal(err)
	}
	if v := f.Violations(); len(v) != 0 {
		t.Fatalf("violations %+v; want none: the taker's first edit waits out the window", v)
	}
	if m, _ := f.Message(ref); !strings.Contains(m.Content+m.EmbedText(), "step 6") {
		t.Fatalf("the taker's edit did not land: %q", m.EmbedText())
	}
}

// TestClickAnsweredByAnotherReplicaGetsNoSecondReply: Discord delivers a
// click to every replica on the bot's token. The one whose decision
// reached the session acknowledges it; the other's decision is refused
// ("already decided"), and that refusal must not reach the user, who
// would otherwise read "already decided" after every click they made (the
// chaos suite's load mode: a reply after each of 282 clicks). The second
// replica replies only once the first has acknowledged, so the order is
// the test's, not the machine's.
func TestClickAnsweredByAnotherReplicaGetsNoSecondReply(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	clicked := make(chan string, 1)
	replied := make(chan struct{})
	deciding := &chattest.Core{} // its decision reaches the session
	refused := &chattest.Core{OnAction: func(ctx context.Context, _ chat.Poster, a chat.Action) error {
		id := <-clicked
		if err := f.Wait(ctx, "the other replica's ack", func() bool { in, _ := f.Interaction(id); return in.Acked }); err != nil {
			return err
		}
		_ = a.Reply(ctx, "already decided: approved by alice")
		close(replied)
		return nil
	}}
	a := start(t, config(f), deciding)
	// The refusing replica must not acknowledge at its bound while it
	// waits for the other's ack.
	slow := config(f)
	slow.AckWithin = time.Hour
	start(t, slow, refused)
	th := startSession(t, f, deciding)
	ref, ids := statusMessage(t, a, th)
	id, err := f.ClickButton(ref, alice, ids[chat.ActionApprove])
	if err != nil {
		t.Fatal(err)
	}
	clicked <- id
	select {
	case <-replied:
	case <-time.After(waitTimeout):
		t.Fatal("the second replica never handled the click")
	}
	for _, m := range f.Messages(th.Thread) {
		if strings.Contains(m.Content, "already decided") {
			t.Fatalf("the user got the second replica's refusal (%q, ephemeral %v) for a click the first one answered", m.Content, m.Ephemeral())
		}
	}
	if in := interaction(t, f, id); in.ResponseType != fakediscord.CallbackDeferUpdate || len(in.FollowUps) != 0 {
		t.Fatalf("interaction answered with type %d and %d follow-ups; want one deferred update", in.ResponseType, len(in.FollowUps))
	}
}

// TestMentionsInAChannelDoNotWaitForEachOther: each mention in a plain
// channel starts a session of its own, so one whose handoff is slow (its
// workflow starting on a loaded server) must not hold the next one back.
// The first session's handoff here lasts until the second mention has been
// handed on; with one queue per channel it would wait forever.
func TestMentionsInAChannelDoNotWaitForEachOther(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	second := make(chan struct{})
	firstDone := make(chan error, 1)
	rec := &chattest.Core{OnMessage: func(ctx context.Context, _ chat.Poster, m chat.Message) error {
		switch m.Text {
		case "first":
			select {
			case <-second:
				firstDone <- nil
			case <-time.After(waitTimeout):
				firstDone <- errors.New("the second mention was not handed on while the first one's handoff went on")
			}
		case "second":
			close(second)
		}
		return nil
	}}
	start(t, config(f), rec)
	for _, text := range []string{"first", "second"} {
		if _, err := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+text); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
}

// clickGate runs one replica's decisions through shared fake sessions in
// an order the test sets: before runs ahead of the decision, after once
// the session answered it.
type clickGate struct {
	*chattest.Sessions
	before func()
	after  func(res session.ApproveResponse, err error)
}

func (g clickGate) Approve(ctx context.Context, id string, req session.ApproveRequest) (session.ApproveResponse, error) {
	if g.before != nil {
		g.before()
	}
	res, err := g.Sessions.Approve(ctx, id, req)
	if g.after != nil {
		g.after(res, err)
	}
	return res, err
}

// startStoppable is start with a stop that returns once the adapter's
// handlers in flight have ended.
func startStoppable(t *testing.T, cfg discord.Config, core chat.Handler) (stop func()) {
	t.Helper()
	a, err := discord.New(cfg, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, core) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-a.Ready():
	case err := <-done:
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("adapter not ready")
	}
	return stop
}

// TestACopyOfAClickAnswersLikeTheClick: both replicas receive one click
// and hand it to the session with the interaction's ID (chat.Action.Click).
// The session takes the first replica's decision and answers the second
// replica's copy as the same click, so the second replica, although it
// acknowledges the interaction first here, tells the user nothing: what
// the card shows is the answer. Without the click's ID the copy is
// refused ("no longer pending" in the fake, "already decided" in the
// workflow) and the user reads that after a click that took (the chaos
// suite's load mode: 973 of 2,916 clicks).
func TestACopyOfAClickAnswersLikeTheClick(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	fs := &chattest.Sessions{ApproverRoles: []string{approverRole}}
	core := func(s chat.Sessions) *chat.Core {
		b := config(f).Budget()
		b.MinEditInterval = 5 * time.Millisecond
		c := chat.NewCore(chat.CoreConfig{Budgets: map[string]chat.Budget{discord.Platform: b},
			PollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond}, s, testLog(t))
		t.Cleanup(c.Close)
		return c
	}
	var id string
	clicked := make(chan struct{})
	decided := make(chan struct{})
	// The first replica's decision is taken; it acknowledges the click
	// only once the second replica has.
	first := config(f)
	first.AckWithin = time.Hour
	stopFirst := startStoppable(t, first, core(clickGate{Sessions: fs, after: func(session.ApproveResponse, error) {
		close(decided)
		<-clicked
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_ = f.Wait(ctx, "the second replica's acknowledgement", func() bool { in, _ := f.Interaction(id); return in.Acked })
	}}))
	um, err := f.UserMessage(fakediscord.DefaultChannelID, alice, bot()+"clean the build")
	if err != nil {
		t.Fatal(err)
	}
	th := chat.Thread{Platform: "discord", Workspace: fakediscord.DefaultGuildID, Channel: fakediscord.DefaultChannelID, Thread: um.ID}
	ref := statusRef(t, f, fs, th.ID())
	fs.Set(th.ID(), func(ts *session.TurnState) {
		ts.ToolCalls = []session.ToolCallState{{CallID: "call_1", Name: "shell", Commands: []string{"rm -rf build"}, Status: session.CallAwaitingApproval}}
		ts.Status = session.StatusAwaitingApproval
		ts.Pending = &session.PendingApproval{CallID: "call_1", Command: "rm -rf build", AskedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	})
	approve := customIDOf(t, edited(t, f, ref, "approval buttons", hasApprovalButtons), "approve:")

	// The second replica connects now (it took no part in the mention) and
	// decides only once the first replica's decision was taken.
	var copyRes session.ApproveResponse
	var copyErr error
	copied := make(chan struct{})
	stopSecond := startStoppable(t, config(f), core(clickGate{Sessions: fs,
		before: func() { <-decided },
		after: func(res session.ApproveResponse, err error) {
			copyRes, copyErr = res, err
			close(copied)
		},
	}))
	wait(t, f, "both replicas on the gateway", func() bool { return f.Connected() >= 2 })
	id, err = f.ClickButton(ref, alice, approve)
	if err != nil {
		t.Fatal(err)
	}
	close(clicked)
	select {
	case <-copied:
	case <-time.After(waitTimeout):
		t.Fatal("the second replica never handed the click on")
	}
	// Each replica's answer to the click is complete once it has stopped.
	stopSecond()
	stopFirst()

	if copyErr != nil || !copyRes.Repeat {
		t.Fatalf("the second replica's copy of the click: %+v, %v; want a repeat of the first one's decision", copyRes, copyErr)
	}
	if in := interaction(t, f, id); in.ResponseType != fakediscord.CallbackDeferUpdate || len(in.FollowUps) != 0 {
		t.Fatalf("interaction answered with type %d and %d follow-ups; want one deferred update and nothing else", in.ResponseType, len(in.FollowUps))
	}
	for _, m := range f.Messages(th.Thread) {
		if m.Interaction == id {
			t.Fatalf("the user got a reply to a click that took: %q", m.Content)
		}
	}
}
