package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// sim is the session workflow in miniature for the console tests: a
// message starts a turn that asks to approve one command; approving runs it
// (it finishes at the next poll) and answers, rejecting answers at once.
// It is chattest.Sessions with that scenario on top.
type sim struct{ *chattest.Sessions }

var _ chat.Sessions = sim{}

func newSim() sim {
	return sim{&chattest.Sessions{
		SetBackendFn: func(string, session.SetBackendRequest) (session.SetBackendResponse, error) {
			return session.SetBackendResponse{}, &chat.UserError{Msg: "backend switching is not available yet"}
		},
	}}
}

func (s sim) Send(ctx context.Context, in session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
	resp, err := s.Sessions.Send(ctx, in, req)
	if err != nil || resp.Duplicate {
		return resp, err
	}
	cmd := "make " + req.Text
	s.Set(in.Location.ID(), func(ts *session.TurnState) {
		ts.Status = session.StatusAwaitingApproval
		ts.ToolCalls = []session.ToolCallState{{CallID: "call_1", Name: "shell", Commands: []string{cmd}, Status: session.CallAwaitingApproval}}
		ts.Pending = &session.PendingApproval{CallID: "call_1", Command: cmd, Reason: "not read-only"}
	})
	return resp, nil
}

func (s sim) TurnState(ctx context.Context, id string) (session.TurnState, error) {
	ts, err := s.Sessions.TurnState(ctx, id)
	if err != nil || len(ts.ToolCalls) == 0 || ts.ToolCalls[0].Status != session.CallRunning {
		return ts, err
	}
	// The approved call finishes at the next poll.
	s.Set(id, func(ts *session.TurnState) {
		c := &ts.ToolCalls[0]
		c.Status, c.ExitCode, c.Output = session.CallCompleted, new(int), "deployed v2"
		ts.Status, ts.FinalText = session.StatusComplete, "Deployed to staging."
	})
	return ts, nil
}

func (s sim) Approve(ctx context.Context, id string, req session.ApproveRequest) (session.ApproveResponse, error) {
	resp, err := s.Sessions.Approve(ctx, id, req)
	if err != nil || req.Decision != session.DecisionReject {
		return resp, err
	}
	s.Set(id, func(ts *session.TurnState) {
		ts.Status, ts.FinalText = session.StatusComplete, "OK, I will not run it."
	})
	return resp, nil
}

// screen is a goroutine-safe output buffer that tests wait on.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the output contains want (generous deadline; the
// console runs on other goroutines, so this waits for an event, not time).
func (s *screen) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output never showed %q; it is:\n%s", want, s.String())
		}
		time.Sleep(time.Millisecond)
	}
}

func startConsole(t *testing.T, s chat.Sessions) (io.Writer, *screen, func() error) {
	t.Helper()
	core := chat.NewCore(chat.CoreConfig{
		PollMin: time.Millisecond, PollMax: 5 * time.Millisecond,
		Budgets: map[string]chat.Budget{Platform: {MinEditInterval: time.Millisecond}},
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

func TestConsoleApprovalFlow(t *testing.T) {
	s := newSim()
	in, out, finish := startConsole(t, s)
	out.waitFor(t, `session "default"`)

	fmt.Fprintln(in, "deploy")
	out.waitFor(t, "── ✋ Waiting for approval ──")
	out.waitFor(t, "Approve? type a")
	if !strings.Contains(out.String(), "make deploy") {
		t.Fatalf("the command to approve is not shown:\n%s", out)
	}

	fmt.Fprintln(in, "a")
	out.waitFor(t, "Deployed to staging.")
	out.waitFor(t, "── ✅ Done ──")
	if err := finish(); err != nil {
		t.Fatal(err)
	}

	text := out.String()
	for _, want := range []string{"approved by @ann", "│ deployed v2", "exit 0"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "Approve? type a"); n != 1 {
		t.Errorf("approval prompt printed %d times, want once:\n%s", n, text)
	}
	if n := strings.Count(text, "Deployed to staging."); n != 1 {
		t.Errorf("final answer printed %d times:\n%s", n, text)
	}
	sent, approved := s.Sent(), s.Approvals()
	if len(sent) != 1 || sent[0].Text != "deploy" || !strings.HasPrefix(sent[0].EventID, "console-") {
		t.Errorf("sent = %+v", sent)
	}
	if len(approved) != 1 || approved[0].Decision != session.DecisionApprove || approved[0].User.ID != "u1" {
		t.Errorf("approvals = %+v", approved)
	}
	// "a" was an approval, not a message to the agent.
	for _, m := range sent {
		if m.Text == "a" {
			t.Error(`"a" reached the agent`)
		}
	}
}

func TestConsoleRejectWithReasonAndSessions(t *testing.T) {
	s := newSim()
	in, out, finish := startConsole(t, s)

	fmt.Fprintln(in, "/session staging")
	out.waitFor(t, `Switched to session "staging"`)
	fmt.Fprintln(in, "release")
	out.waitFor(t, "Approve? type a")
	fmt.Fprintln(in, "r not before the freeze ends")
	out.waitFor(t, "OK, I will not run it.")
	out.waitFor(t, "rejected by @ann: not before the freeze ends")

	// Commands go through the core: an unavailable feature is relayed.
	fmt.Fprintln(in, "/backend docker")
	out.waitFor(t, "backend switching is not available yet")
	fmt.Fprintln(in, "/status")
	out.waitFor(t, "Owner: @ann")
	if err := finish(); err != nil {
		t.Fatal(err)
	}

	want := session.Location{Platform: "console", Channel: "local", Thread: "staging"}.ID()
	if ts := s.Get(want); ts.Turn != 1 {
		t.Errorf("the message did not go to the staging session: %+v", ts)
	}
	if approved := s.Approvals(); len(approved) != 1 || approved[0].Decision != session.DecisionReject || approved[0].Reason != "not before the freeze ends" {
		t.Errorf("approvals = %+v", approved)
	}
}

func TestCardLinesEditPrintsOnlyChanges(t *testing.T) {
	var buf bytes.Buffer
	c := newConsole(&buf)
	th := c.thread()
	card := chat.Card{Title: "💭 Thinking", Blocks: []chat.Block{
		{Kind: chat.BlockText, Text: "⏳ `go test`"},
		{Kind: chat.BlockContext, Text: "Turn 1 · local · 1 tool call"},
	}}
	ref, _ := c.Post(context.Background(), th, card)
	buf.Reset()
	if err := c.Edit(context.Background(), th, ref, card); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Errorf("an identical edit printed %q", buf.String())
	}
	card.Blocks = append([]chat.Block{{Kind: chat.BlockText, Text: "✅ `go vet` · 1.0s · exit 0"}}, card.Blocks...)
	card.Blocks[2].Text = "Turn 1 · local · 2 tool calls"
	if err := c.Edit(context.Background(), th, ref, card); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "✅ `go vet` · 1.0s · exit 0\n" {
		t.Errorf("edit printed %q, want only the new call line", got)
	}
}
