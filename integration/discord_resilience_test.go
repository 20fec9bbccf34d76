package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// TestDiscordTokenExpiryHandover: interaction tokens live one second here
// (in the fake and in the adapter's config). A slash command (/pause) whose
// answer can only come when the turn ends, and an Approve click whose turn
// goes on, both outlive their tokens: the turn keeps updating through
// normal bot messages, the late command answer arrives as a bot message
// mentioning the user, and nothing is lost.
func TestDiscordTokenExpiryHandover(t *testing.T) {
	const ttl = time.Second
	e := newDiscordEnv(t, discordOptions{
		fake:    fakediscord.Options{TokenLifetime: ttl},
		adapter: func(c *discord.Config) { c.InteractionTokenTTL = ttl },
	})
	// The command waits for a file the test creates once the tokens are
	// dead, so the turn provably outlives them.
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("touch started; while [ ! -f release ]; do sleep 0.05; done; echo late > late.txt")),
		fakeopenai.FinalStep("Finished after the tokens expired."),
	)
	th := e.mention(discordAlice, "a long job")
	ref := e.statusRef(th, 1)
	buttons := e.approvalCard(ref)

	// /pause answers when the running turn has ended.
	pause := e.slash(th, discordAlice, "pause")
	if in := e.waitAcked(pause); in.ResponseType != fakediscord.CallbackDeferMessage {
		t.Fatalf("/pause answered with callback %d, want deferred (5)", in.ResponseType)
	}
	approve := e.click(ref, discordAlice, buttons[chat.ActionApprove])
	e.waitAcked(approve)
	e.waitCard(ref, "approval shown", func(m fakediscord.Message) bool {
		return discordHasLine(m.EmbedText(), "approved by "+discordMention(discordAlice))
	})
	started := findWorkspaceFile(t, e.s, "started")

	e.waitTokenExpired(pause)
	e.waitTokenExpired(approve)
	expired := time.Now()
	if err := os.WriteFile(filepath.Join(filepath.Dir(started), "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	end := e.waitDone(th, 1)
	if end.Status != session.StatusComplete || end.ToolCalls[0].Status != session.CallCompleted {
		t.Fatalf("end state: %s", dump(end))
	}
	if got, ok := workspaceFile(t, e.s, th, "late.txt"); !ok || got != "late\n" {
		t.Fatalf("late.txt = %q, %v", got, ok)
	}
	answer := e.waitAnswer(th, "Finished after the tokens expired.")
	late := e.waitAnswer(th, discordMention(discordAlice)+" Paused after turn 1. Send a message or /resume to continue.")
	final := e.waitCard(ref, "final card", func(m fakediscord.Message) bool { return m.Content == "✅ Done" })
	for _, m := range []fakediscord.Message{answer, late} {
		if m.Created.Before(expired) || m.Interaction != "" || m.Webhook != "" {
			t.Fatalf("message %q should be a normal bot message sent after the tokens expired: %+v", m.Content, m)
		}
	}
	if !final.Edited.After(expired) || !discordHasLine(final.EmbedText(), "✅", "late.txt") {
		t.Fatalf("the status card was not finished after expiry:\n%s", final.EmbedText())
	}
	// The late answer pings alice, so she is notified of it.
	if users := e.pinged(late.Content); len(users) != 1 || users[0] != discordAlice.User.ID {
		t.Fatalf("late answer pings %v, want only alice", users)
	}
	// The adapter never used a token it knew to be dead: no webhook call
	// after the expiry (the test's own probes are GETs).
	for _, r := range e.f.Requests() {
		if strings.Contains(r.Path, "/webhooks/") && r.Method != "GET" && r.At.After(expired) {
			t.Fatalf("webhook call after the tokens expired: %s %s → %d", r.Method, r.Path, r.Status)
		}
	}
	if ts := e.s.state(th); !ts.Paused {
		t.Fatalf("session should be paused: %s", dump(ts))
	}
}

// TestDiscordGatewayReconnect: the gateway connection drops mid-turn and
// later the gateway asks for a reconnect (op 7) and replays events the bot
// already handled. The bot resumes each time, the turn goes on, later
// messages run turns, and the replayed message never runs a second turn.
func TestDiscordGatewayReconnect(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo one > one.txt")),
		fakeopenai.FinalStep("turn one"),
	)
	th := e.mention(discordAlice, "first")
	ref := e.statusRef(th, 1)
	buttons := e.approvalCard(ref)

	// A network failure mid-turn (after the connection's first heartbeat,
	// see the adapter tests on a discordgo race before it).
	e.wait("first heartbeat", func() bool { return e.f.GatewayStats().HeartbeatsAcked >= 1 })
	e.f.DropConnections()
	e.wait("resumed after the drop", func() bool { return e.f.GatewayStats().Resumes == 1 && e.f.Connected() == 1 })
	e.click(ref, discordAlice, buttons[chat.ActionApprove])
	e.waitDone(th, 1)
	e.waitAnswer(th, "turn one")

	// A later message still reaches the session.
	e.s.model.Push(fakeopenai.FinalStep("turn two"))
	seqBefore := e.f.LastSeq()
	second := e.say(th, discordAlice, "second")
	e.waitDone(th, 2)
	e.waitAnswer(th, "turn two")

	// op 7, and the resume replays everything from before "second".
	e.wait("heartbeat on the resumed connection", func() bool { return e.f.GatewayStats().HeartbeatsAcked >= 2 })
	stats := e.f.GatewayStats()
	replayed := e.f.LastSeq() - seqBefore
	e.f.ReplayOnResumeFrom(seqBefore)
	e.f.SendReconnect()
	e.wait("resumed after op 7", func() bool { return e.f.GatewayStats().Resumes == 2 && e.f.Connected() == 1 })
	if got := e.f.GatewayStats().Dispatched - stats.Dispatched; got < int(replayed) {
		t.Fatalf("resume dispatched %d events, want the %d replayed ones", got, replayed)
	}

	// Messages in a thread are handled in order, so once a later message
	// has run its turn the replayed one has been dealt with.
	e.s.model.Push(fakeopenai.FinalStep("turn three"))
	e.say(th, discordAlice, "third")
	end := e.waitDone(th, 3)
	e.waitAnswer(th, "turn three")
	if n := len(e.s.model.Requests()); n != 4 {
		t.Fatalf("model requests = %d, want 4 (two for turn 1, one each for turns 2 and 3): the replayed %s ran again?", n, second.ID)
	}
	if end.Turn != 3 || end.Queued != 0 {
		t.Fatalf("state: %s", dump(end))
	}
	if as := e.answers(th); len(as) != 3 {
		t.Fatalf("answers = %d, want 3", len(as))
	}
	if got, ok := workspaceFile(t, e.s, th, "one.txt"); !ok || got != "one\n" {
		t.Fatalf("one.txt = %q, %v", got, ok)
	}
}

// TestDiscordRestartMidTurn: the bot (adapter and core) stops while a turn
// waits for approval. A new bot resumes watching the turn and edits the
// same status message; the Approve button posted by the old bot still
// works; no second status message or answer is posted.
func TestDiscordRestartMidTurn(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo survived > restart.txt")),
		fakeopenai.FinalStep("Done across a restart."),
	)
	th := e.mention(discordAlice, "survive a restart")
	ref := e.statusRef(th, 1)
	buttons := e.approvalCard(ref)

	e.stopBot(e.bot)
	restarted := time.Now()
	e.startBot()

	// Resume (in the adapter's Run) watches the turn again: the new bot
	// renders it onto the message the old one posted.
	e.wait("the new bot edits the old status message", func() bool {
		for _, ed := range e.f.Edits() {
			if ed.MessageID == ref && ed.At.After(restarted) && len(approvalIDs(ed.CustomIDs())) == 3 {
				return true
			}
		}
		return false
	})
	e.click(ref, discordAlice, buttons[chat.ActionApprove])
	e.waitCard(ref, "decision on the same message", func(m fakediscord.Message) bool {
		return discordHasLine(m.EmbedText(), "approved by "+discordMention(discordAlice)) && len(approvalIDs(m.CustomIDs())) == 0
	})
	end := e.waitDone(th, 1)
	answer := e.waitAnswer(th, "Done across a restart.")
	e.waitCard(ref, "final card", func(m fakediscord.Message) bool { return m.Content == "✅ Done" })
	if end.StatusRef != ref || end.FinalRef != answer.ID {
		t.Fatalf("refs: status %s (want %s), final %s (want %s)", end.StatusRef, ref, end.FinalRef, answer.ID)
	}
	if got, ok := workspaceFile(t, e.s, th, "restart.txt"); !ok || got != "survived\n" {
		t.Fatalf("restart.txt = %q, %v", got, ok)
	}
	// Wait for the new bot's watcher to finish, then count.
	e.bot.core.Wait()
	if sm := e.statusMessages(th); len(sm) != 1 || sm[0].ID != ref {
		t.Fatalf("status messages = %d, want only the original %s", len(sm), ref)
	}
	if as := e.answers(th); len(as) != 1 {
		t.Fatalf("answers = %d, want 1", len(as))
	}
	notices := 0
	for _, m := range e.botMessages(th.Thread) {
		if isApprovalNotice(m.Content) {
			notices++ // by whichever bot showed the buttons first
			continue
		}
		if m.Created.After(restarted) && m.ID != answer.ID {
			t.Fatalf("the new bot posted another message: %+v", m)
		}
	}
	if notices != 1 {
		t.Fatalf("the approvers were told %d times, want once", notices)
	}
}
