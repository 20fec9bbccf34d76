package integration

import (
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// TestSlackNamesPeople: wherever the session names a person, it uses the
// name Slack shows for them (users.info: the display name, else the real
// name), not their user ID: the owner recorded at the session's start, the
// refusal a non-owner's click gets, who stopped a turn (the turn's answer
// and the note the model reads), and who wrote a message in someone else's
// session (the model's transcript). The adapter asks users.info once per
// user, however many messages and clicks follow.
func TestSlackNamesPeople(t *testing.T) {
	const aliceName, bobName = "Alice L.", "Bob Paulsen"
	e := newSlackEnv(t, slackOptions{fake: fakeslack.Options{Users: []fakeslack.User{
		{ID: slackAlice, Name: "alice", RealName: "Alice Liddell", DisplayName: aliceName},
		{ID: slackBob, Name: "bob", RealName: bobName}, // no display name
	}}})
	e.s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch should-not-exist")))
	th, _ := e.mention(slackAlice, "make a file")
	ref := e.statusRef(th, 1)
	buttons := e.approvalButtons(ref)
	if owner := e.s.info(th).Owner; owner.ID != slackAlice || owner.Name != aliceName {
		t.Fatalf("session owner = %+v, want %s named %q", owner, slackAlice, aliceName)
	}

	// bob may not approve alice's commands; the refusal names her.
	e.click(ref, slackBob, buttons[chat.ActionApprove], nil)
	snap := e.wait("bob's refusal", func(s fakeslack.Snapshot) bool { return len(ephemerals(s, slackBob)) == 1 })
	if text := ephemerals(snap, slackBob)[0].Text(); !strings.Contains(text, "may not approve") ||
		!strings.Contains(text, aliceName) || strings.Contains(text, slackAlice) {
		t.Fatalf("bob's refusal should name the owner %q, not %s: %q", aliceName, slackAlice, text)
	}

	e.reply(th, slackAlice, "!stop")
	stopped := e.waitTurn(th, "the stopped turn", done)
	if !stopped.Stopped || stopped.FinalText != "Stopped by "+aliceName+"." {
		t.Fatalf("stopped turn: stopped %v, final text %q, want \"Stopped by %s.\"", stopped.Stopped, stopped.FinalText, aliceName)
	}

	// bob writes in alice's session: the model reads who wrote what, and
	// who stopped the turn before, by name.
	e.s.model.Push(fakeopenai.FinalStep("Hello Bob."))
	e.reply(th, slackBob, "bob here, what happened?")
	e.waitDone(th, 2)
	req, ok := e.s.model.LastRequest()
	if !ok {
		t.Fatal("the model was not asked")
	}
	var transcript []string
	for _, m := range req.Body.Messages {
		transcript = append(transcript, m.Role+": "+m.Content)
	}
	all := strings.Join(transcript, "\n")
	for _, want := range []string{"[" + aliceName + " interrupted this turn", bobName + ": bob here, what happened?"} {
		if !strings.Contains(all, want) {
			t.Errorf("the model's transcript lacks %q:\n%s", want, all)
		}
	}
	for _, id := range []string{slackAlice, slackBob} {
		if strings.Contains(all, id) {
			t.Errorf("the model's transcript names a user by ID %s:\n%s", id, all)
		}
	}

	for i, text := range []string{"thanks", "one more thing"} {
		e.s.model.Push(fakeopenai.FinalStep("Sure."))
		e.reply(th, slackAlice, text)
		e.waitDone(th, 3+i)
	}
	if owner := e.s.info(th).Owner; owner.Name != aliceName {
		t.Fatalf("session owner after more turns = %+v", owner)
	}
	calls := map[string]int{}
	for _, c := range e.f.Snapshot().AllCallsTo("users.info") {
		calls[c.Form.Get("user")]++
	}
	if calls[slackAlice] != 1 || calls[slackBob] != 1 || len(calls) != 2 {
		t.Fatalf("users.info calls by user = %v; alice wrote 4 messages and bob clicked and wrote, want one lookup each", calls)
	}
	e.idle()
	e.checkClean()
}
