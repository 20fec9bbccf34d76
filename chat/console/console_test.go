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
	"github.com/sandbot/sandbot/session"
)

// sim is a small in-memory session behind chat.Sessions: a message starts a
// turn that asks to approve one command; approving runs it and answers.
// Every change bumps Version, as the workflow does.
type sim struct {
	mu       sync.Mutex
	ts       map[string]*session.TurnState
	sent     []session.MessageRequest
	approved []session.ApproveRequest
	refs     []session.ChatRefRequest
}

var _ chat.Sessions = (*sim)(nil)

func newSim() *sim { return &sim{ts: map[string]*session.TurnState{}} }

func (s *sim) state(id string) *session.TurnState {
	if s.ts[id] == nil {
		s.ts[id] = &session.TurnState{Status: session.StatusIdle, Backend: "local"}
	}
	return s.ts[id]
}

func (s *sim) Send(_ context.Context, in session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, req)
	ts := s.state(in.Location.ID())
	cmd := "make " + req.Text
	*ts = session.TurnState{Turn: ts.Turn + 1, Version: ts.Version + 1, Status: session.StatusAwaitingApproval, Backend: "local",
		ToolCalls: []session.ToolCallState{{CallID: "call_1", Name: "shell", Commands: []string{cmd}, Status: session.CallAwaitingApproval}},
		Pending:   &session.PendingApproval{CallID: "call_1", Command: cmd, Reason: "not read-only"}}
	return session.MessageResponse{Turn: ts.Turn}, nil
}

func (s *sim) TurnState(_ context.Context, id string) (session.TurnState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.state(id)
	// A running call finishes at the next poll.
	if ts.Status == session.StatusThinking {
		out := *ts
		c := ts.ToolCalls[0]
		ts.ToolCalls = []session.ToolCallState{c}
		ts.ToolCalls[0].Status = session.CallCompleted
		ts.ToolCalls[0].ExitCode = new(int)
		ts.ToolCalls[0].Output = "deployed v2"
		ts.Status, ts.FinalText, ts.Version = session.StatusComplete, "Deployed to staging.", ts.Version+1
		return out, nil
	}
	return *ts, nil
}

func (s *sim) Approve(_ context.Context, id string, req session.ApproveRequest) (session.ApproveResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.state(id)
	if ts.Pending == nil || ts.Pending.CallID != req.CallID {
		return session.ApproveResponse{}, &chat.UserError{Msg: "this approval was already decided"}
	}
	s.approved = append(s.approved, req)
	c := &ts.ToolCalls[0]
	c.Decision = &session.DecisionRecord{CallID: req.CallID, Decision: req.Decision, Reason: req.Reason, User: req.User}
	ts.Pending = nil
	ts.Version++
	if req.Decision == session.DecisionReject {
		c.Status = session.CallRejected
		ts.Status, ts.FinalText = session.StatusComplete, "OK, I will not run it."
		return session.ApproveResponse{Command: c.Commands[0]}, nil
	}
	c.Status = session.CallRunning
	ts.Status = session.StatusThinking
	return session.ApproveResponse{Command: c.Commands[0]}, nil
}

func (s *sim) RecordChatRef(_ context.Context, id string, req session.ChatRefRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs = append(s.refs, req)
	ts := s.state(id)
	if req.Kind == "status" {
		ts.StatusRef = req.Ref
	} else {
		ts.FinalRef = req.Ref
	}
	return nil
}

func (s *sim) Info(_ context.Context, id string) (session.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	loc, _ := session.ParseID(id)
	ts := s.state(id)
	return session.Info{WorkflowID: id, Location: loc, Owner: chat.User{ID: "u1", Name: "ann"}, Backend: ts.Backend, Turns: ts.Turn, Status: ts.Status}, nil
}

var errNotInSim = errors.New("sim: not implemented")

func (s *sim) Stop(context.Context, string, session.StopRequest) (session.StopResponse, error) {
	return session.StopResponse{}, errNotInSim
}
func (s *sim) Pause(context.Context, string, session.PauseRequest) (session.PauseResponse, error) {
	return session.PauseResponse{}, errNotInSim
}
func (s *sim) Resume(context.Context, string, session.ResumeRequest) (session.PauseResponse, error) {
	return session.PauseResponse{}, errNotInSim
}
func (s *sim) Destroy(context.Context, string, session.DestroyRequest) (session.DestroyResponse, error) {
	return session.DestroyResponse{}, errNotInSim
}
func (s *sim) SetBackend(context.Context, string, session.SetBackendRequest) (session.SetBackendResponse, error) {
	return session.SetBackendResponse{}, &chat.UserError{Msg: "backend switching is not available yet"}
}
func (s *sim) Fork(context.Context, string, session.ForkRequest) (session.ForkResponse, error) {
	return session.ForkResponse{}, errNotInSim
}
func (s *sim) History(context.Context, string, session.HistoryRequest) ([]session.HistoryEntry, error) {
	return nil, errNotInSim
}
func (s *sim) List(context.Context, chat.ListFilter) ([]chat.SessionSummary, error) {
	return nil, errNotInSim
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
	go func() { done <- Run(context.Background(), core, inR, out, chat.User{ID: "u1", Name: "ann"}) }()
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sent) != 1 || s.sent[0].Text != "deploy" || !strings.HasPrefix(s.sent[0].EventID, "console-") {
		t.Errorf("sent = %+v", s.sent)
	}
	if len(s.approved) != 1 || s.approved[0].Decision != session.DecisionApprove || s.approved[0].User.ID != "u1" {
		t.Errorf("approvals = %+v", s.approved)
	}
	// "a" was an approval, not a message to the agent.
	for _, m := range s.sent {
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

	s.mu.Lock()
	defer s.mu.Unlock()
	want := session.Location{Platform: "console", Channel: "local", Thread: "staging"}.ID()
	if s.ts[want] == nil || s.ts[want].Turn != 1 {
		t.Errorf("the message did not go to the staging session: %v", s.ts)
	}
	if len(s.approved) != 1 || s.approved[0].Decision != session.DecisionReject || s.approved[0].Reason != "not before the freeze ends" {
		t.Errorf("approvals = %+v", s.approved)
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
