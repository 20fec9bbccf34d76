package integration

import (
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// The Discord scenario tests drive the whole product through Discord's
// wire protocol: a user acts in the fake Discord, the real adapter and
// core relay it to the session workflow on the embedded Temporal server,
// the real worker runs the agent loop against the fake model and the
// local sandbox, and the bot's messages land back in the fake. They do not
// run in parallel: a bot that starts resumes every Discord session with an
// active turn on the shared server, so each test ends its turns.

// TestDiscordMentionRunsTurnWithApproval: a mention opens a thread that is
// the session; one status message is edited in place with the tool calls;
// the Approve button approves and the card says who did; the final answer
// is its own message; the approved command really ran.
func TestDiscordMentionRunsTurnWithApproval(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("ls -la")),
		fakeopenai.ToolCallStep("c2", "shell", shell("echo hello > hello.txt")),
		fakeopenai.FinalStep("Wrote **hello.txt**."),
	)
	th := e.mention(discordAlice, "write hello.txt")

	// The thread opened from the mention is the session.
	e.wait("session thread", func() bool { _, ok := e.f.Channel(th.Thread); return ok })
	thread, _ := e.f.Channel(th.Thread)
	if !thread.IsThread() || thread.ParentID != e.channel || thread.OwnerID != e.f.AppID() || thread.StarterMessageID != th.Thread {
		t.Fatalf("thread = %+v, want a bot-owned thread of %s started from the mention", thread, e.channel)
	}
	ref := e.statusRef(th, 1)
	if info := e.s.info(th); info.Owner.ID != discordAlice.User.ID || info.Location != th {
		t.Fatalf("session info: %s", dump(info))
	}
	if st, _ := e.f.Message(ref); st.ChannelID != th.Thread {
		t.Fatalf("status message in %s, want the session thread %s", st.ChannelID, th.Thread)
	}
	buttons := e.approvalCard(ref)
	card, _ := e.f.Message(ref)
	if !discordHasLine(card.EmbedText(), "✅", "ls -la") || !discordHasLine(card.EmbedText(), "echo hello > hello.txt") {
		t.Fatalf("status card should list the completed read-only call and the pending one:\n%s", card.EmbedText())
	}
	if card.Content != "✋ Waiting for approval" {
		t.Fatalf("status title = %q", card.Content)
	}
	if _, ok := workspaceFile(t, e.s, th, "hello.txt"); ok {
		t.Fatal("the command ran before it was approved")
	}

	click := e.click(ref, discordAlice, buttons[chat.ActionApprove])
	if in := e.waitAcked(click); in.ResponseType != fakediscord.CallbackDeferUpdate {
		t.Fatalf("Approve was answered with callback type %d, want a deferred update (6)", in.ResponseType)
	}
	e.waitCard(ref, "decision shown on the status message", func(m fakediscord.Message) bool {
		return discordHasLine(m.EmbedText(), "approved by "+discordMention(discordAlice)) && len(approvalIDs(m.CustomIDs())) == 0
	})

	end := e.waitDone(th, 1)
	if end.Status != session.StatusComplete || len(end.ToolCalls) != 2 || end.ToolCalls[1].Status != session.CallCompleted {
		t.Fatalf("end state: %s", dump(end))
	}
	if d := end.ToolCalls[1].Decision; d == nil || d.User.ID != discordAlice.User.ID || d.Decision != session.DecisionApprove {
		t.Fatalf("decision: %s", dump(end.ToolCalls[1]))
	}
	if got, ok := workspaceFile(t, e.s, th, "hello.txt"); !ok || got != "hello\n" {
		t.Fatalf("hello.txt = %q, %v", got, ok)
	}
	answer := e.waitAnswer(th, "Wrote **hello.txt**.")
	final := e.waitCard(ref, "final status", func(m fakediscord.Message) bool { return m.Content == "✅ Done" })
	if !discordHasLine(final.EmbedText(), "✅", "echo hello > hello.txt") || !discordHasLine(final.EmbedText(), "approved by "+discordMention(discordAlice)) {
		t.Fatalf("final card:\n%s", final.EmbedText())
	}

	// One status message, edited in place, and one answer.
	if sm := e.statusMessages(th); len(sm) != 1 || sm[0].ID != ref {
		t.Fatalf("status messages in the thread: %d, want only %s", len(sm), ref)
	}
	if as := e.answers(th); len(as) != 1 || as[0].ID != answer.ID || end.FinalRef != answer.ID {
		t.Fatalf("answers = %d, final ref %s, answer %s", len(as), end.FinalRef, answer.ID)
	}
	edits := 0
	for _, ed := range e.f.Edits() {
		if ed.MessageID == ref {
			edits++
			if ed.Via != "channel" {
				t.Fatalf("status edit via %s, want a bot message edit (channel)", ed.Via)
			}
		}
	}
	// At least once: the card was posted asking for approval, and the
	// decision and the end were drawn on it. How many edits that took
	// depends on the pace (intermediate cards are replaced, never queued).
	if edits < 1 {
		t.Fatalf("status message edited %d times; want it edited in place as the turn advanced", edits)
	}
}

// TestDiscordSlashCommandsInThread: /status inside the session thread
// answers privately with backend, turn count and a Temporal UI link, and
// /stop while the turn waits for an approval stops the turn.
func TestDiscordSlashCommandsInThread(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch should-not-exist")))
	th := e.mention(discordAlice, "make a file")
	ref := e.statusRef(th, 1)
	e.approvalCard(ref)

	sid := e.slash(th, discordAlice, "status")
	var status fakediscord.Message
	e.wait("/status answer", func() bool {
		in, _ := e.f.Interaction(sid)
		m, ok := e.f.Message(in.OriginalID)
		status = m
		return ok && strings.Contains(m.EmbedText(), "Backend")
	})
	in := e.interaction(sid)
	if in.ResponseType != fakediscord.CallbackDeferMessage || !status.Ephemeral() {
		t.Fatalf("/status: callback %d, ephemeral %v; want a private deferred answer", in.ResponseType, status.Ephemeral())
	}
	text := status.EmbedText()
	for _, want := range []string{"**Backend:** local", "**Turns:** 1", "**Status:** waiting for approval", e.s.cfg.Temporal.WebURL + "/namespaces/", discordMention(discordAlice)} {
		if !strings.Contains(text, want) {
			t.Fatalf("/status answer lacks %q:\n%s", want, text)
		}
	}

	stop := e.slash(th, discordAlice, "stop")
	end := e.waitTurn(th, "stopped turn", done)
	if !end.Stopped || end.Pending != nil {
		t.Fatalf("state after /stop: %s", dump(end))
	}
	// The call that waited for approval did not run, and the finished
	// turn must say so rather than show it still waiting.
	if c := end.ToolCalls[0]; c.Status != session.CallFailed && c.Status != session.CallRejected {
		t.Errorf("after /stop the call that waited for approval is %q, want failed (not run): %s", c.Status, dump(c))
	}
	answer := e.discordAnswer(stop)
	if answer.Content != "Stopped turn 1." || answer.Ephemeral() {
		t.Fatalf("/stop answer = %q (ephemeral %v)", answer.Content, answer.Ephemeral())
	}
	e.waitCard(ref, "stopped card", func(m fakediscord.Message) bool {
		return strings.HasPrefix(m.Content, "⏹️ Stopped by ") && len(controlIDs(m.CustomIDs())) == 0
	})
	if _, ok := workspaceFile(t, e.s, th, "should-not-exist"); ok {
		t.Fatal("the command of the stopped turn ran")
	}
	if n := len(e.s.model.Requests()); n != 1 {
		t.Fatalf("model called %d times; the stopped turn should not have gone on", n)
	}

	// The session goes on, and the model's next request is one an
	// OpenAI-compatible API accepts: every tool call it made has a result.
	e.s.model.Push(fakeopenai.FinalStep("Ready when you are."))
	e.say(th, discordAlice, "never mind")
	e.waitDone(th, 2)
	e.waitAnswer(th, "Ready when you are.")
	last, _ := e.s.model.LastRequest()
	if missing := discordUnansweredCalls(last); len(missing) > 0 {
		t.Errorf("turn 2's model request has tool calls without a tool result (OpenAI answers 400): %v", missing)
	}
}

// discordUnansweredCalls lists the tool call IDs of assistant messages in a
// model request that no tool message answers.
func discordUnansweredCalls(req fakeopenai.RecordedRequest) []string {
	answered := map[string]bool{}
	for _, m := range req.Body.Messages {
		if m.Role == "tool" {
			answered[m.ToolCallID] = true
		}
	}
	var missing []string
	for _, m := range req.Body.Messages {
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				missing = append(missing, c.ID)
			}
		}
	}
	return missing
}

// TestDiscordUnauthorizedButton: someone the bot does not serve is turned
// away at once, someone who may use the bot but not approve is told so
// privately, and neither changes the pending approval; an approver-role
// holder then decides it.
func TestDiscordUnauthorizedButton(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo deployed > deploy.txt")),
		fakeopenai.FinalStep("Deployed."),
	)
	th := e.mention(discordAlice, "deploy")
	ref := e.statusRef(th, 1)
	buttons := e.approvalCard(ref)
	before, _ := e.f.Message(ref)

	// carol has none of the allowed roles: refused before anything else.
	cid := e.click(ref, discordCarol, buttons[chat.ActionApprove])
	carol := e.waitAcked(cid)
	refusal, _ := e.f.Message(carol.OriginalID)
	if carol.ResponseType != fakediscord.CallbackMessage || !refusal.Ephemeral() || refusal.Content != "You may not use this bot here." {
		t.Fatalf("carol's answer: callback %d, %+v", carol.ResponseType, refusal)
	}

	// bob may use the bot but is neither owner nor approver: the
	// workflow refuses, and only bob hears about it.
	bid := e.click(ref, discordBob, buttons[chat.ActionApprove])
	e.wait("refusal for bob", func() bool { in, _ := e.f.Interaction(bid); return len(in.FollowUps) == 1 })
	fu, _ := e.f.Message(e.interaction(bid).FollowUps[0])
	if !fu.Ephemeral() || !strings.Contains(fu.Content, "may not approve") {
		t.Fatalf("bob's answer = %+v", fu)
	}
	ts := e.s.state(th)
	if ts.Pending == nil || ts.Pending.CallID != "c1" || ts.ToolCalls[0].Decision != nil {
		t.Fatalf("an unauthorized click changed the approval: %s", dump(ts))
	}
	if now, _ := e.f.Message(ref); len(approvalIDs(now.CustomIDs())) != 3 || now.EmbedText() != before.EmbedText() {
		t.Fatalf("the status card changed after refused clicks:\n%s", now.EmbedText())
	}
	if _, ok := workspaceFile(t, e.s, th, "deploy.txt"); ok {
		t.Fatal("the command ran after refused clicks")
	}

	// dave holds the approver role: his click counts.
	e.click(ref, discordDave, buttons[chat.ActionApprove])
	e.waitCard(ref, "approved by dave", func(m fakediscord.Message) bool {
		return discordHasLine(m.EmbedText(), "approved by "+discordMention(discordDave))
	})
	e.waitDone(th, 1)
	e.waitAnswer(th, "Deployed.")
	if got, ok := workspaceFile(t, e.s, th, "deploy.txt"); !ok || got != "deployed\n" {
		t.Fatalf("deploy.txt = %q, %v", got, ok)
	}
}

// TestDiscordModalReject: Reject opens a modal; its reason reaches the
// model, and the card says who rejected and why.
func TestDiscordModalReject(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("rm -rf src; touch rejected-ran")),
		fakeopenai.FinalStep("I left src alone."),
	)
	th := e.mention(discordAlice, "clean up")
	ref := e.statusRef(th, 1)
	buttons := e.approvalCard(ref)

	rid := e.click(ref, discordAlice, buttons[chat.ActionReject])
	in := e.waitAcked(rid)
	if in.ResponseType != fakediscord.CallbackModal || !strings.Contains(string(in.Modal), `"custom_id":"reason"`) {
		t.Fatalf("Reject answered with callback %d, modal %s; want a modal asking for a reason", in.ResponseType, in.Modal)
	}
	if ts := e.s.state(th); ts.Pending == nil {
		t.Fatal("opening the modal decided the approval")
	}
	const reason = "src is precious, keep it"
	mid, err := e.f.SubmitModal(rid, discordAlice, map[string]string{"reason": reason})
	if err != nil {
		t.Fatal(err)
	}
	if sub := e.waitAcked(mid); sub.ResponseType != fakediscord.CallbackDeferUpdate {
		t.Fatalf("modal submit answered with callback %d, want a deferred update", sub.ResponseType)
	}
	e.waitCard(ref, "rejection shown", func(m fakediscord.Message) bool {
		return discordHasLine(m.EmbedText(), "🚫", "rm -rf src; touch rejected-ran") &&
			discordHasLine(m.EmbedText(), "rejected by "+discordMention(discordAlice)+": "+reason) && len(approvalIDs(m.CustomIDs())) == 0
	})
	end := e.waitDone(th, 1)
	c := end.ToolCalls[0]
	if c.Status != session.CallRejected || c.Decision == nil || c.Decision.Reason != reason || c.Decision.User.ID != discordAlice.User.ID {
		t.Fatalf("rejected call: %s", dump(c))
	}
	reqs := e.s.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	if body := dump(reqs[1]); !strings.Contains(body, reason) || !strings.Contains(body, "rejected") {
		t.Fatalf("the model was not told the rejection and its reason: %s", body)
	}
	e.waitAnswer(th, "I left src alone.")
	if _, ok := workspaceFile(t, e.s, th, "rejected-ran"); ok {
		t.Fatal("the rejected command ran")
	}
}
