package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
)

// The Discord attack scenarios of issue 9 ("approvals that are what they
// look like"); see slack_attack_test.go for the Slack side.

// threadAttachments are the files the bot attached to messages in th.
func (e *discordEnv) threadAttachments(th chat.Thread) []fakediscord.Attachment {
	var out []fakediscord.Attachment
	for _, m := range e.botMessages(th.Thread) {
		out = append(out, m.Attachments...)
	}
	return out
}

// TestDiscordAttackLongCommand: a 3,000-character command with a trailing
// touch does not fit the card: the card names its length and the file,
// and the file, attached before the buttons appear, holds all of it.
func TestDiscordAttackLongCommand(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell(longTailCommand)),
		fakeopenai.FinalStep("Done."),
	)
	th := e.mention(discordAlice, "print many a")
	ref := e.statusRef(th, 1)
	buttons := e.approvalCard(ref)
	files := e.threadAttachments(th)
	if len(files) != 1 || !strings.Contains(string(files[0].Data), longTailCommand) {
		t.Fatalf("attachments when the buttons showed: %+v", files)
	}
	card, _ := e.f.Message(ref)
	text := card.EmbedText()
	if !strings.Contains(text, "Long command (3026 characters): see the attached file") || !strings.Contains(text, files[0].Filename) {
		t.Fatalf("the card does not announce the attached command:\n%s", text)
	}
	if strings.Contains(text, strings.Repeat("a", 1200)) {
		t.Fatalf("the card shows a cut command beside the notice:\n%.600s", text)
	}
	e.click(ref, discordAlice, buttons[chat.ActionApprove])
	e.waitDone(th, 1)
	if _, ok := workspaceFile(t, e.s, th, "LONGTAIL.txt"); !ok {
		t.Fatal("the approved command did not run whole")
	}
}

// TestDiscordAttackControlsAndSeveralCommands: several commands, each in
// its own code block and numbered; controls and bidi overrides escaped in
// the card and the answer; backticks cannot close the block; nothing the
// bot sends may ping (@everyone stays text).
func TestDiscordAttackControlsAndSeveralCommands(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	overprint := "touch PWNED.txt #\r\x1b[2Kls -la"
	tricky := "echo \u202etxt.exe\u2066 @everyone ```x``` done"
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("ls", overprint, tricky, "touch HIDDEN_LATER.txt")),
		fakeopenai.FinalStep("\x1b[2JAll clear \u202eevil @everyone"),
	)
	th := e.mention(discordAlice, "tidy up")
	ref := e.statusRef(th, 1)
	buttons := e.approvalCard(ref)
	card, _ := e.f.Message(ref)
	text := card.EmbedText()
	for _, want := range []string{"Command 1 of 4", "Command 4 of 4", "touch HIDDEN_LATER.txt",
		`touch PWNED.txt #\r\x1b[2Kls -la`, `echo \u202etxt.exe\u2066`} {
		if !strings.Contains(text, want) {
			t.Errorf("the card lacks %q:\n%s", want, text)
		}
	}
	for _, shown := range []string{text, card.Content, string(card.Embeds)} {
		if r, bad := controlRune(shown); bad {
			t.Fatalf("the card holds a raw %U:\n%q", r, shown)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "txt.exe") && strings.Contains(line, "```") {
			t.Fatalf("a backtick run in the command is live: %q", line)
		}
	}

	e.click(ref, discordAlice, buttons[chat.ActionApprove])
	e.waitDone(th, 1)
	var answer fakediscord.Message
	e.wait("the answer", func() bool {
		for _, m := range e.answers(th) {
			if strings.Contains(m.Content, "All clear") {
				answer = m
				return true
			}
		}
		return false
	})
	if r, bad := controlRune(answer.Content); bad {
		t.Fatalf("the answer holds a raw %U: %q", r, answer.Content)
	}
	if !strings.Contains(answer.Content, `\x1b[2JAll clear \u202eevil`) {
		t.Fatalf("answer = %q", answer.Content)
	}
	// Every message the bot sent that mentions everyone parses no mention.
	for _, r := range e.f.Requests() {
		if (r.Method != http.MethodPost && r.Method != http.MethodPatch) || !strings.Contains(string(r.Body), "@everyone") {
			continue
		}
		var body struct {
			AllowedMentions *struct {
				Parse []string `json:"parse"`
			} `json:"allowed_mentions"`
		}
		if err := json.Unmarshal(r.Body, &body); err == nil && (body.AllowedMentions == nil || len(body.AllowedMentions.Parse) != 0) {
			t.Fatalf("%s %s may ping: %s", r.Method, r.Path, r.Body)
		}
	}
	if _, ok := workspaceFile(t, e.s, th, "HIDDEN_LATER.txt"); !ok {
		t.Fatal("the fourth command did not run")
	}
}

// TestDiscordAttackRejectByOutsider: bob may use the bot but not decide.
// His Reject click is answered with the refusal, worded for rejecting, and
// no modal; the owner's click still opens it.
func TestDiscordAttackRejectByOutsider(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("touch outsider-ran")),
		fakeopenai.FinalStep("Not run."),
	)
	th := e.mention(discordAlice, "make a file")
	ref := e.statusRef(th, 1)
	buttons := e.approvalCard(ref)

	bid := e.click(ref, discordBob, buttons[chat.ActionReject])
	in := e.waitAcked(bid)
	if in.ResponseType == fakediscord.CallbackModal || len(in.Modal) != 0 {
		t.Fatalf("a modal opened for a user who may not reject: %s", in.Modal)
	}
	refusal, _ := e.f.Message(in.OriginalID)
	if in.ResponseType != fakediscord.CallbackMessage || !refusal.Ephemeral() ||
		refusal.Content != "You may not reject commands in this session: only its owner (alice) and approvers may." {
		t.Fatalf("bob's answer: callback %d, %+v", in.ResponseType, refusal)
	}
	if ts := e.s.state(th); ts.Pending == nil || ts.ToolCalls[0].Decision != nil {
		t.Fatalf("bob's click changed the approval: %s", dump(ts))
	}

	rid := e.click(ref, discordAlice, buttons[chat.ActionReject])
	if in := e.waitAcked(rid); in.ResponseType != fakediscord.CallbackModal {
		t.Fatalf("the owner's Reject answered with callback %d, want the modal", in.ResponseType)
	}
	if _, err := e.f.SubmitModal(rid, discordAlice, map[string]string{"reason": "no"}); err != nil {
		t.Fatal(err)
	}
	e.waitDone(th, 1)
	if _, ok := workspaceFile(t, e.s, th, "outsider-ran"); ok {
		t.Fatal("the rejected command ran")
	}
}
