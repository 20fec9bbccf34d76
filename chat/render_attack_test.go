package chat_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// awaiting is a turn whose one call, with cmds, waits for approval.
func awaiting(cmds ...string) session.TurnState {
	return session.TurnState{Turn: 1, Version: 2, Status: session.StatusAwaitingApproval, StartedAt: t0,
		ToolCalls: []session.ToolCallState{{CallID: "call_x", Name: "shell", Commands: cmds, Status: session.CallAwaitingApproval}},
		Pending: &session.PendingApproval{CallID: "call_x", Command: strings.Join(cmds, "\n"), Reason: "not read-only",
			AskedAt: t0, ExpiresAt: t0.Add(30 * 60e9)}}
}

func allText(c chat.Card) string {
	var b strings.Builder
	b.WriteString(c.Title + "\n")
	for _, bl := range c.Blocks {
		b.WriteString(bl.Text + "\n")
		for _, f := range bl.Fields {
			b.WriteString(f.Label + " " + f.Value + "\n")
		}
	}
	return b.String()
}

func hasApproveButton(c chat.Card) bool {
	for _, b := range c.Blocks {
		for _, btn := range b.Buttons {
			if btn.ID == chat.ActionApprove {
				return true
			}
		}
	}
	return false
}

// TestLongCommandIsAttachedNotCut is the LONGTAIL attack: a command longer
// than a card used to be cut at 1,000 characters, hiding its tail.
func TestLongCommandIsAttachedNotCut(t *testing.T) {
	cmd := "echo " + strings.Repeat("a", 3000) + " ; touch LONGTAIL.txt"
	for _, max := range []int{0, 2900, 1800} {
		c := chat.RenderTurn(awaiting(cmd), chat.RenderOptions{WorkflowID: "w", MaxApprovalChars: max})
		text := allText(c)
		if !hasApproveButton(c) {
			t.Fatalf("max %d: no approve button", max)
		}
		if !strings.Contains(text, "Long command (3026 characters): see the attached file") {
			t.Fatalf("max %d: card has no long-command notice:\n%s", max, text)
		}
		if len(c.Attachments) != 1 || !strings.Contains(c.Attachments[0].Content, cmd) {
			t.Fatalf("max %d: attachments %+v do not carry the whole command", max, c.Attachments)
		}
		if !strings.Contains(text, c.Attachments[0].Name) {
			t.Errorf("max %d: the notice does not name the file %q", max, c.Attachments[0].Name)
		}
	}
}

// TestCommandThatFitsIsShownWhole: within the bound nothing is attached
// and the card shows the command in full, even past the old 1,000 cut.
func TestCommandThatFitsIsShownWhole(t *testing.T) {
	cmd := "echo " + strings.Repeat("b", 1500) + " ; touch LONGTAIL.txt"
	c := chat.RenderTurn(awaiting(cmd), chat.RenderOptions{WorkflowID: "w"})
	if len(c.Attachments) != 0 || !strings.Contains(allText(c), cmd) {
		t.Fatalf("command not shown whole (attachments %d):\n%s", len(c.Attachments), allText(c))
	}
}

// TestCardClampNeverCutsTheCommand: a card squeezed below its content
// sheds outputs and old calls, and finally attaches the command, but a
// shown command is never shortened.
func TestCardClampNeverCutsTheCommand(t *testing.T) {
	ts := awaiting("rm -rf ./build ; touch TAIL_MARK")
	for i := range 12 {
		ts.ToolCalls = append([]session.ToolCallState{{CallID: "old" + string(rune('a'+i)), Name: "shell",
			Commands: []string{strings.Repeat("x", 70)}, Status: session.CallCompleted, ExitCode: exit(0), Output: strings.Repeat("o", 300)}}, ts.ToolCalls...)
	}
	for _, limit := range []int{3500, 600, 300, 100} {
		c := chat.RenderTurn(ts, chat.RenderOptions{WorkflowID: "w", MaxChars: limit})
		shown := strings.Contains(allText(c), "rm -rf ./build ; touch TAIL_MARK")
		attached := len(c.Attachments) == 1 && strings.Contains(c.Attachments[0].Content, "TAIL_MARK")
		if !shown && !attached {
			t.Fatalf("limit %d: the command is neither shown whole nor attached:\n%s", limit, allText(c))
		}
	}
}

// TestSeveralCommandsEachOnTheirOwn: a call's commands used to be joined
// and then cut, hiding the later ones.
func TestSeveralCommandsEachOnTheirOwn(t *testing.T) {
	cmds := []string{"ls", "echo " + strings.Repeat("c", 900), "touch HIDDEN_LATER.txt"}
	c := chat.RenderTurn(awaiting(cmds...), chat.RenderOptions{WorkflowID: "w"})
	var code []string
	for _, b := range c.Blocks {
		if b.Kind == chat.BlockCode && b.Keep {
			code = append(code, b.Text)
		}
	}
	if len(code) != 3 || code[0] != cmds[0] || code[1] != cmds[1] || code[2] != cmds[2] {
		t.Fatalf("commands not one block each: %q", code)
	}
	text := allText(c)
	for i := 1; i <= 3; i++ {
		if want := "Command " + string(rune('0'+i)) + " of 3"; !strings.Contains(text, want) {
			t.Errorf("card lacks %q:\n%s", want, text)
		}
	}

	// A command with a newline in it must not pass for two: each stays in
	// its own block, so "2." inside the first is not the second command.
	c = chat.RenderTurn(awaiting("echo a\n2. ls", "rm -rf x"), chat.RenderOptions{WorkflowID: "w"})
	code = nil
	for _, b := range c.Blocks {
		if b.Kind == chat.BlockCode && b.Keep {
			code = append(code, b.Text)
		}
	}
	if len(code) != 2 || code[1] != "rm -rf x" {
		t.Fatalf("blocks = %q", code)
	}

	// Too many commands for the card: all go to the file, numbered.
	many := make([]string, 14)
	for i := range many {
		many[i] = "echo step" + string(rune('a'+i))
	}
	c = chat.RenderTurn(awaiting(many...), chat.RenderOptions{WorkflowID: "w"})
	if len(c.Attachments) != 1 || !strings.Contains(c.Attachments[0].Content, "# command 14 of 14") || !strings.Contains(c.Attachments[0].Content, "echo stepn") {
		t.Fatalf("attachment = %+v", c.Attachments)
	}
	if !strings.Contains(allText(c), "14 commands") {
		t.Fatalf("notice does not count the commands:\n%s", allText(c))
	}
}

// TestNoLimitShowsEverything: the terminal's bound (negative) never attaches.
func TestNoLimitShowsEverything(t *testing.T) {
	cmd := "echo " + strings.Repeat("d", 6000) + " ; touch LONGTAIL.txt"
	c := chat.RenderTurn(awaiting(cmd), chat.RenderOptions{WorkflowID: "w", MaxApprovalChars: -1})
	if len(c.Attachments) != 0 || !strings.Contains(allText(c), cmd) {
		t.Fatal("terminal card does not show the command in full")
	}
}

// TestControlsNeutralisedOnCard: the carriage-return overprint, ANSI and
// bidi attacks in commands, outputs, errors and notices.
func TestControlsNeutralisedOnCard(t *testing.T) {
	evil := "touch PWNED.txt #\r\x1b[2Kls -la \u202eexe.txt\u2066"
	ts := awaiting(evil)
	ts.ToolCalls = append([]session.ToolCallState{{CallID: "done1", Name: "shell", Commands: []string{evil}, Status: session.CallFailed,
		Output: "\x1b[2Jcleared\x1b]0;title\x07", Error: "bad \x1b[31m", ExitCode: exit(1)}}, ts.ToolCalls...)
	ts.Notices = []string{"note \u202e\r"}
	c := chat.RenderTurn(ts, chat.RenderOptions{WorkflowID: "w"})
	text := allText(c)
	for _, bad := range []string{"\r", "\x1b", "\x07", "\u202e", "\u2066"} {
		if strings.Contains(text, bad) {
			t.Errorf("card holds raw %q:\n%q", bad, text)
		}
	}
	for _, want := range []string{`touch PWNED.txt #\r\x1b[2Kls -la \u202eexe.txt\u2066`, `\x1b[2Jcleared`} {
		if !strings.Contains(text, want) {
			t.Errorf("card lacks the escaped %q:\n%s", want, text)
		}
	}
}

// TestControlsNeutralisedInFailureAnswers: a failed turn's error (which
// can carry text the sandbox or the model wrote) reaches the thread
// without its terminal controls or bidi overrides, both in a watched
// turn's answer and in one posted late with its turn's label.
func TestControlsNeutralisedInFailureAnswers(t *testing.T) {
	const evil = "boom \x1b[2J\x1b]0;owned\x07 \u202eexe.txt"
	failed := session.TurnState{Turn: 5, Version: 2, Status: session.StatusFailed, Backend: "local", Error: evil}
	f := &chattest.Sessions{SendFn: sendTurn(5, false), TurnStateFn: (&script{states: []session.TurnState{running(5, 1, "ls"), failed}}).next}
	var histories atomic.Int32
	late := unseenSessions(session.TurnEnd{Turn: 5, Status: session.StatusFailed, Error: evil, StatusRef: "m0"}, &histories)
	for name, p := range map[string]*recPoster{"watched": answerOne(t, f, "e5", "do it"), "late": answerOne(t, late, "e6", "more")} {
		got := texts(p)
		if len(got) == 0 || !strings.HasPrefix(got[0], "⚠️ Turn 5 failed: boom") {
			t.Fatalf("%s: posted %q, want turn 5's failure first", name, got)
		}
		if strings.ContainsAny(got[0], "\x1b\x07\u202e") {
			t.Errorf("%s: the failure answer carries controls: %q", name, got[0])
		}
	}
}
