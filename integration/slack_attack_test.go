package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// The Slack attack scenarios of issue 9 ("approvals that are what they
// look like"), each through the whole product: the fake model asks for the
// command, the real worker holds it for approval, and what the approver
// sees is read back from the fake Slack.

// longTailCommand hides a touch behind 3,000 characters: main used to cut
// the card's command at 1,000, so the touch was never shown.
var longTailCommand = "echo " + strings.Repeat("a", 3000) + " ; touch LONGTAIL.txt"

// threadFiles are the files the bot shared in th.
func threadFiles(s fakeslack.Snapshot, th chat.Thread) []fakeslack.File {
	var out []fakeslack.File
	for _, f := range s.Files {
		if f.Shared && f.Channel == th.Channel && f.ThreadTS == th.Thread {
			out = append(out, f)
		}
	}
	return out
}

// TestSlackAttackLongCommand: the card says the command is long, names its
// length and the attached file; the file, shared in the thread before the
// buttons appear, holds the whole command, tail included.
func TestSlackAttackLongCommand(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell(longTailCommand)),
		fakeopenai.FinalStep("Done."),
	)
	th, _ := e.mention(slackAlice, "print many a")
	ref := e.statusRef(th, 1)
	buttons := e.approvalButtons(ref)
	// The buttons are on screen: the file must already be there.
	files := threadFiles(e.f.Snapshot(), th)
	if len(files) != 1 || !strings.Contains(string(files[0].Content), longTailCommand) {
		t.Fatalf("files in the thread when the buttons showed: %+v", files)
	}
	text := messageText(e.message(ref))
	if !strings.Contains(text, "Long command (3026 characters): see the attached file") || !strings.Contains(text, files[0].Name) {
		t.Fatalf("the card does not announce the attached command:\n%s", text)
	}
	if strings.Contains(text, strings.Repeat("a", 1200)) {
		t.Fatalf("the card shows a cut command beside the notice:\n%.600s", text)
	}

	e.click(ref, slackAlice, buttons[chat.ActionApprove], nil)
	e.waitDone(th, 1)
	if _, ok := workspaceFile(t, e.s, th, "LONGTAIL.txt"); !ok {
		t.Fatal("the approved command did not run whole")
	}
	e.idle()
	e.checkClean()
}

// controlRunes reports the first character that would be interpreted
// rather than shown: C0 (but newline and tab), DEL, C1, bidi overrides
// and isolates.
func controlRune(s string) (rune, bool) {
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069', r == '\u200e', r == '\u200f', r == '\u061c':
			return r, true
		}
	}
	return 0, false
}

// TestSlackAttackControlsAndSeveralCommands: one call with several
// commands shows each in its own code block, numbered; carriage returns,
// ANSI sequences and bidi overrides in the commands and in the answer are
// shown escaped; backticks cannot close the code block and <!channel>
// cannot become a broadcast.
func TestSlackAttackControlsAndSeveralCommands(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	overprint := "touch PWNED.txt #\r\x1b[2Kls -la"
	tricky := "echo \u202etxt.exe\u2066 <!channel> @everyone ```x``` done"
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("ls", overprint, tricky, "touch HIDDEN_LATER.txt")),
		fakeopenai.FinalStep("\x1b[2JAll clear \u202eevil <!channel>"),
	)
	th, _ := e.mention(slackAlice, "tidy up")
	ref := e.statusRef(th, 1)
	buttons := e.approvalButtons(ref)
	m := e.message(ref)
	text := messageText(m)
	for _, want := range []string{"Command 1 of 4", "Command 4 of 4", "touch HIDDEN_LATER.txt",
		`touch PWNED.txt #\r\x1b[2Kls -la`, `echo \u202etxt.exe\u2066`} {
		if !strings.Contains(text, want) {
			t.Errorf("the card lacks %q:\n%s", want, text)
		}
	}
	for _, shown := range []string{text, m.Text, m.RawBlocks} {
		if r, bad := controlRune(shown); bad {
			t.Fatalf("the card holds a raw %U:\n%q", r, shown)
		}
		if strings.Contains(shown, "<!channel>") {
			t.Fatalf("the card holds a live <!channel>:\n%s", shown)
		}
	}
	// The tricky command's section: its own fences only, the inner
	// backticks broken, so the block ends where the command ends.
	for _, sec := range strings.Split(text, "\n") {
		if strings.Contains(sec, "txt.exe") && strings.Count(sec, "```") > 0 {
			t.Fatalf("a backtick run in the command is live: %q", sec)
		}
	}

	e.click(ref, slackAlice, buttons[chat.ActionApprove], nil)
	end := e.waitDone(th, 1)
	ans := e.message(end.FinalRef)
	for _, shown := range []string{ans.Text, ans.RawBlocks} {
		if r, bad := controlRune(shown); bad {
			t.Fatalf("the answer holds a raw %U: %q", r, shown)
		}
		if strings.Contains(shown, "<!channel>") {
			t.Fatalf("the answer holds a live <!channel>: %q", shown)
		}
	}
	if !strings.Contains(ans.Text, `\x1b[2JAll clear \u202eevil`) {
		t.Fatalf("answer = %q", ans.Text)
	}
	if _, ok := workspaceFile(t, e.s, th, "HIDDEN_LATER.txt"); !ok {
		t.Fatal("the fourth command did not run")
	}
	e.idle()
	e.checkClean()
}

// TestSlackAttackRejectByOutsider: bob may use the bot but not decide. His
// Reject click gets the refusal at once, worded for rejecting, and no
// modal opens; the owner's Reject still opens it.
func TestSlackAttackRejectByOutsider(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("touch outsider-ran")),
		fakeopenai.FinalStep("Not run."),
	)
	th, _ := e.mention(slackAlice, "make a file")
	ref := e.statusRef(th, 1)
	buttons := e.approvalButtons(ref)

	e.click(ref, slackBob, buttons[chat.ActionReject], nil)
	snap := e.wait("an ephemeral answer for bob", func(s fakeslack.Snapshot) bool { return len(ephemerals(s, slackBob)) == 1 })
	e.idle()
	if got := ephemerals(snap, slackBob)[0].Text(); !strings.HasPrefix(got, "You may not reject commands in this session: only its owner (") ||
		!strings.HasSuffix(got, ") and approvers may.") {
		t.Fatalf("bob's answer = %q", got)
	}
	if n := len(e.f.Snapshot().AllCallsTo("views.open")); n != 0 {
		t.Fatalf("views.open was called %d times for a user who may not reject", n)
	}
	if ts := e.state(th); ts.Pending == nil || ts.ToolCalls[0].Decision != nil {
		t.Fatalf("bob's click changed the approval: %s", dump(ts))
	}

	e.click(ref, slackAlice, buttons[chat.ActionReject], nil)
	e.wait("the owner's reject modal", func(s fakeslack.Snapshot) bool { return len(s.CallsTo("views.open")) == 1 })
	e.idle()
	views := e.f.Views()
	input := reasonInput(t, views[0].Raw)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := e.f.SubmitView(ctx, views[0].ID, slackAlice, map[string]string{input: "no"}); err != nil {
		t.Fatal(err)
	}
	e.waitDone(th, 1)
	if _, ok := workspaceFile(t, e.s, th, "outsider-ran"); ok {
		t.Fatal("the rejected command ran")
	}
	e.idle()
	e.checkClean()
}
