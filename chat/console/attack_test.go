package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

// attackSim asks to approve one call with the given commands; approving
// answers with final at once.
type attackSim struct {
	sim
	cmds  []string
	final string
}

func (s attackSim) Send(ctx context.Context, in session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
	resp, err := s.Sessions.Send(ctx, in, req)
	if err != nil || resp.Duplicate {
		return resp, err
	}
	s.Set(in.Location.ID(), func(ts *session.TurnState) {
		ts.Status = session.StatusAwaitingApproval
		ts.ToolCalls = []session.ToolCallState{{CallID: "call_1", Name: "shell", Commands: s.cmds, Status: session.CallAwaitingApproval}}
		ts.Pending = &session.PendingApproval{CallID: "call_1", Command: strings.Join(s.cmds, "\n"), Reason: "not read-only"}
	})
	return resp, nil
}

func (s attackSim) TurnState(ctx context.Context, id string) (session.TurnState, error) {
	return s.Sessions.TurnState(ctx, id)
}

func (s attackSim) Approve(ctx context.Context, id string, req session.ApproveRequest) (session.ApproveResponse, error) {
	resp, err := s.Sessions.Approve(ctx, id, req)
	if err != nil {
		return resp, err
	}
	s.Set(id, func(ts *session.TurnState) {
		ts.Pending = nil
		ts.ToolCalls[0].Status, ts.ToolCalls[0].ExitCode = session.CallCompleted, new(int)
		ts.ToolCalls[0].Output = "\x1b[2Kdone\r\u202e"
		ts.Status, ts.FinalText = session.StatusComplete, s.final
	})
	return resp, nil
}

// startAttackConsole runs the console with its real Budget (a terminal
// shows approvals in full).
func startAttackConsole(t *testing.T, s chat.Sessions) (io.Writer, *screen, func() error) {
	t.Helper()
	b := Budget
	b.MinEditInterval = time.Millisecond
	core := chat.NewCore(chat.CoreConfig{
		PollMin: time.Millisecond, PollMax: 5 * time.Millisecond,
		Budgets: map[string]chat.Budget{Platform: b},
	}, s, nil)
	t.Cleanup(core.Close)
	inR, inW := io.Pipe()
	out := &screen{}
	done := make(chan error, 1)
	a, err := New(Config{In: inR, Out: out, User: chat.User{ID: "u1", Name: "ann"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- a.Run(context.Background(), core) }()
	return inW, out, func() error {
		inW.Close()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			return errors.New("Run did not return after its input closed")
		}
	}
}

// TestConsoleNeutralisesControls is the terminal attack: a command that
// overprints itself with \r and an erase-line sequence used to display as
// "ls -la"; an answer starting with \x1b[2J cleared the screen; a bidi
// override reordered what was shown. Every byte that reaches the terminal
// must be printable, with the attack visible as escapes.
func TestConsoleNeutralisesControls(t *testing.T) {
	s := attackSim{sim: newSim(), cmds: []string{"touch PWNED.txt #\r\x1b[2Kls -la", "echo \u202etxt.exe\u2066 \u009b2J"},
		final: "\x1b[2JAll clear.\x1b]0;owned\x07"}
	in, out, finish := startAttackConsole(t, s)
	out.waitFor(t, `session "default"`)
	fmt.Fprintln(in, "go")
	out.waitFor(t, "Approve? type a")
	fmt.Fprintln(in, "a")
	out.waitFor(t, "All clear.")
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, r := range text {
		if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == '\u202e' || r == '\u2066') {
			t.Fatalf("terminal output holds %U:\n%q", r, text)
		}
	}
	for _, want := range []string{
		`touch PWNED.txt #\r\x1b[2Kls -la`, // the whole command, attack visible
		`echo \u202etxt.exe\u2066 \u009b2J`,
		`\x1b[2JAll clear.\x1b]0;owned\x07`,
		`\x1b[2Kdone\r\u202e`,
		"Command 1 of 2", "Command 2 of 2",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// TestConsoleShowsLongCommandInFull: the terminal has no card limit, so a
// command far longer than any card is printed whole, tail included.
func TestConsoleShowsLongCommandInFull(t *testing.T) {
	long := "echo " + strings.Repeat("a", 5000) + " ; touch LONGTAIL.txt"
	s := attackSim{sim: newSim(), cmds: []string{long}, final: "ok"}
	in, out, finish := startAttackConsole(t, s)
	out.waitFor(t, `session "default"`)
	fmt.Fprintln(in, "go")
	out.waitFor(t, "Approve? type a")
	if !strings.Contains(out.String(), long) {
		t.Fatalf("the long command is not printed whole:\n%.400s…", out.String())
	}
	if strings.Contains(out.String(), "see the attached file") {
		t.Error("the terminal refers to an attachment it cannot show")
	}
	fmt.Fprintln(in, "r no")
	if err := finish(); err != nil {
		t.Fatal(err)
	}
}
