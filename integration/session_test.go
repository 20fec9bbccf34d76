package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

func workspaceFile(t *testing.T, s *stack, th chat.Thread, name string) (string, bool) {
	t.Helper()
	// The local backend keeps one directory per session under LocalRoot;
	// find the file in whichever workspace holds it.
	matches, _ := filepath.Glob(filepath.Join(s.cfg.Sandbox.LocalRoot, "*", name))
	if len(matches) == 0 {
		return "", false
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func (s *stack) info(th chat.Thread) session.Info {
	s.t.Helper()
	v, err := s.c.QueryWorkflow(s.ctx, th.ID(), "", session.QueryInfo)
	if err != nil {
		s.t.Fatalf("query info: %v", err)
	}
	var in session.Info
	if err := v.Get(&in); err != nil {
		s.t.Fatal(err)
	}
	return in
}

// approvalButton finds the button with the given action on the latest
// status card of the thread.
func approvalButton(t *testing.T, p *recPoster, th chat.Thread, action string) (chat.Button, bool) {
	t.Helper()
	posts, _ := p.snapshot()
	for i := len(posts) - 1; i >= 0; i-- {
		if posts[i].Thread != th {
			continue
		}
		c := posts[i].Cards[len(posts[i].Cards)-1]
		for _, b := range c.Blocks {
			for _, btn := range b.Buttons {
				if btn.ID == action {
					return btn, true
				}
			}
		}
		return chat.Button{}, false
	}
	return chat.Button{}, false
}

func click(t *testing.T, s *stack, th chat.Thread, u chat.User, action, reason string) []string {
	t.Helper()
	var btn chat.Button
	s.poster.waitFor(t, "an approval button", func([]posted, []string) bool {
		var ok bool
		btn, ok = approvalButton(t, s.poster, th, action)
		return ok
	})
	var replies []string
	err := s.core.HandleAction(s.ctx, s.poster, chat.Action{
		ID: action, Value: btn.Value, Reason: reason, User: u, Thread: th,
		Reply: func(_ context.Context, text string) error { replies = append(replies, text); return nil },
	})
	if err != nil {
		t.Fatalf("HandleAction: %v", err)
	}
	return replies
}

func TestTurnWithToolCallsAndOneApproval(t *testing.T) {
	s := newStack(t)
	th := s.thread("approval")
	s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("ls -la", "pwd")),
		fakeopenai.ToolCallStep("c2", "shell", shell("echo built > out.txt")),
		fakeopenai.ToolCallStep("c3", "shell", shell("cat out.txt")),
		fakeopenai.FinalStep("Wrote **out.txt**."),
	)
	s.say(th, "ev-1", "build it")
	st := s.waitState(th, "approval request for c2", func(ts session.TurnState) bool {
		return ts.Pending != nil && ts.Pending.CallID == "c2"
	})
	if st.ToolCalls[0].Status != session.CallCompleted {
		t.Fatalf("read-only call c1 should have run without approval: %s", dump(st.ToolCalls[0]))
	}
	// Someone who is neither owner nor approver is turned away privately.
	replies := click(t, s, th, chat.User{ID: "U-bob", Name: "bob"}, chat.ActionApprove, "")
	if len(replies) != 1 || !strings.Contains(replies[0], "may not approve") {
		t.Fatalf("unauthorized click replies: %q", replies)
	}
	if s.state(th).Pending == nil {
		t.Fatal("an unauthorized click must change nothing")
	}
	recordHistory(t, s, th.ID(), "awaiting-approval")
	click(t, s, th, alice, chat.ActionApprove, "")
	end := s.waitState(th, "turn end", done)
	if end.Status != session.StatusComplete || end.FinalText != "Wrote **out.txt**." {
		t.Fatalf("end state: %s", dump(end))
	}
	if got, ok := workspaceFile(t, s, th, "out.txt"); !ok || got != "built\n" {
		t.Fatalf("out.txt = %q, %v", got, ok)
	}
	if d := end.ToolCalls[1].Decision; d == nil || d.User.ID != alice.ID || d.Command != "echo built > out.txt" {
		t.Fatalf("decision not recorded: %s", dump(end.ToolCalls[1]))
	}
	if !strings.Contains(end.ToolCalls[2].Output, "built") {
		t.Fatalf("c3 output: %q", end.ToolCalls[2].Output)
	}
	// One status message for the turn, and the final answer exactly once.
	s.poster.waitFor(t, "the final answer", func(_ []posted, texts []string) bool { return len(texts) == 1 })
	posts, texts := s.poster.snapshot()
	// In the terminal there is no approval notice: its one user sees the
	// approval bar.
	if len(posts) != 1 || !strings.Contains(texts[0], "out.txt") {
		t.Fatalf("posts %d texts %q", len(posts), texts)
	}
	last := cardText(posts[0].Cards[len(posts[0].Cards)-1])
	if !strings.Contains(last, "alice") {
		t.Fatalf("status card should say who approved: %s", last)
	}
	recordHistory(t, s, th.ID(), "approvals")
}

func TestRejectionWithReason(t *testing.T) {
	s := newStack(t)
	th := s.thread("reject")
	s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("rm -rf src")),
		fakeopenai.FinalStep("I will not delete src."),
	)
	s.say(th, "ev-1", "clean up")
	s.waitState(th, "approval", func(ts session.TurnState) bool { return ts.Pending != nil })
	click(t, s, th, alice, chat.ActionReject, "src is precious")
	end := s.waitState(th, "turn end", done)
	if end.ToolCalls[0].Status != session.CallRejected || end.ToolCalls[0].Decision.Reason != "src is precious" {
		t.Fatalf("call: %s", dump(end.ToolCalls[0]))
	}
	last, _ := s.model.LastRequest()
	body := dump(last)
	if !strings.Contains(body, "src is precious") || !strings.Contains(body, "rejected") {
		t.Fatalf("the model was not told the reason: %s", body)
	}
	recordHistory(t, s, th.ID(), "rejection")
}

func TestApprovalExpiry(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Session.ApprovalTimeout = 2 * time.Second })
	th := s.thread("expiry")
	s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("touch deployed")),
		fakeopenai.FinalStep("Not deployed."),
	)
	s.say(th, "ev-1", "deploy")
	end := s.waitState(th, "turn end", done)
	c := end.ToolCalls[0]
	if c.Status != session.CallRejected || c.Decision == nil || !c.Decision.Expired {
		t.Fatalf("expired call: %s", dump(c))
	}
	if !strings.Contains(strings.Join(end.Notices, " "), "expired") {
		t.Fatalf("no visible expiry notice: %q", end.Notices)
	}
	if _, ok := workspaceFile(t, s, th, "deployed"); ok {
		t.Fatal("an expired approval ran its command")
	}
	if err := s.approve(th, "c1", session.DecisionApprove, alice, ""); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("late approval: %v", err)
	}
}

func TestRepeatedEventIDStartsOneTurn(t *testing.T) {
	s := newStack(t)
	th := s.thread("dedupe")
	s.model.Push(fakeopenai.FinalStep("hello once"))
	s.say(th, "ev-dup", "hi")
	s.waitState(th, "turn end", done)
	s.say(th, "ev-dup", "hi")
	s.say(th, "ev-dup", "hi")
	s.poster.waitFor(t, "final", func(_ []posted, texts []string) bool { return len(texts) >= 1 })
	if n := len(s.model.Requests()); n != 1 {
		t.Fatalf("model called %d times for one event", n)
	}
	if ts := s.state(th); ts.Turn != 1 || ts.Queued != 0 {
		t.Fatalf("state after redelivery: %s", dump(ts))
	}
}

func TestMessagesDuringATurnAreBatched(t *testing.T) {
	s := newStack(t)
	th := s.thread("batch")
	s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("touch a")),
		fakeopenai.FinalStep("first done"),
		fakeopenai.FinalStep("second done"),
	)
	s.say(th, "ev-1", "make a")
	s.waitState(th, "approval", func(ts session.TurnState) bool { return ts.Pending != nil })
	s.say(th, "ev-2", "then b")
	s.say(th, "ev-3", "then c")
	if q := s.state(th).Queued; q != 2 {
		t.Fatalf("queued = %d, want 2", q)
	}
	click(t, s, th, alice, chat.ActionApprove, "")
	end := s.waitState(th, "turn 2 end", func(ts session.TurnState) bool { return ts.Turn == 2 && done(ts) })
	if end.FinalText != "second done" {
		t.Fatalf("turn 2: %s", dump(end))
	}
	last, _ := s.model.LastRequest()
	body := dump(last)
	if !strings.Contains(body, "then b") || !strings.Contains(body, "then c") {
		t.Fatalf("turn 2 did not get both messages: %s", body)
	}
	if n := len(s.model.Requests()); n != 3 {
		t.Fatalf("model calls = %d, want 3 (two for turn 1, one for the batch)", n)
	}
	assertReplays(t, s, th)
}

func TestModelDownFailsTheTurnAndTheSessionStaysUsable(t *testing.T) {
	s := newStack(t) // cfg.Model.Attempts = 2
	th := s.thread("model-down")
	s.model.Push(
		fakeopenai.ErrorStep(503, "upstream overloaded"),
		fakeopenai.ErrorStep(503, "upstream overloaded"),
	)
	s.say(th, "ev-1", "hello?")
	end := s.waitState(th, "failed turn", done)
	if end.Status != session.StatusFailed || !strings.Contains(end.Error, "503") && !strings.Contains(strings.ToLower(end.Error), "unavailable") && !strings.Contains(end.Error, "overloaded") {
		t.Fatalf("the turn should fail with the reason: %s", dump(end))
	}
	if n := len(s.model.Requests()); n != 2 {
		t.Fatalf("model tried %d times, want the configured 2 attempts", n)
	}
	s.model.Push(fakeopenai.FinalStep("back online"))
	s.say(th, "ev-2", "and now?")
	end = s.waitState(th, "turn 2", func(ts session.TurnState) bool { return ts.Turn == 2 && done(ts) })
	if end.Status != session.StatusComplete || end.FinalText != "back online" {
		t.Fatalf("the session should be usable after a failed turn: %s", dump(end))
	}
}

func TestBadModelKeyFailsAtOnceWithAClearMessage(t *testing.T) {
	s := newStack(t)
	th := s.thread("bad-key")
	s.model.Push(fakeopenai.ErrorStep(401, "Incorrect API key provided"))
	s.say(th, "ev-1", "hello?")
	end := s.waitState(th, "failed turn", done)
	if end.Status != session.StatusFailed || !strings.Contains(end.Error, "401") {
		t.Fatalf("want a failed turn naming the 401: %s", dump(end))
	}
	if strings.Contains(end.Error, s.cfg.Model.APIKey) {
		t.Fatal("the error shows the API key")
	}
	if n := len(s.model.Requests()); n != 1 {
		t.Fatalf("a 401 must not be retried; model called %d times", n)
	}
}
