package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

var (
	owner    = session.User{ID: "U1", Name: "alice"}
	intruder = session.User{ID: "U9", Name: "mallory"}
	loc      = session.Location{Platform: "console", Channel: "local", Thread: "t1"}
)

// script is a recording fake of the model activity: it answers each call
// with the next step and remembers every request.
type script struct {
	mu    sync.Mutex
	steps []agent.ModelResponse
	reqs  []agent.ModelRequest
	// fail, when set, is returned by every call instead of a step.
	fail error
}

func (s *script) complete(_ context.Context, req agent.ModelRequest) (agent.ModelResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if s.fail != nil {
		return agent.ModelResponse{}, s.fail
	}
	if len(s.steps) == 0 {
		return agent.ModelResponse{Content: "(no more steps)"}, nil
	}
	r := s.steps[0]
	s.steps = s.steps[1:]
	return r, nil
}

func (s *script) requests() []agent.ModelRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]agent.ModelRequest(nil), s.reqs...)
}

func shellCall(id string, cmds ...string) agent.ModelResponse {
	b, _ := json.Marshal(session.ShellArgs{Commands: cmds})
	return agent.ModelResponse{ToolCalls: []session.ToolCall{{ID: id, Name: session.ShellToolName, Arguments: string(b)}}}
}

func final(text string) agent.ModelResponse { return agent.ModelResponse{Content: text} }

// box is a recording fake of the sandbox activities.
type box struct {
	mu    sync.Mutex
	execs [][]string
}

func (b *box) ensure(_ context.Context, req sandbox.EnsureRequest) (sandbox.EnsureResult, error) {
	return sandbox.EnsureResult{Handle: sandbox.Handle{Backend: req.Backend, ID: "sb-1", SessionID: req.SessionID, TaskQueue: "host-q"}, Created: req.Handle == nil}, nil
}

func (b *box) exec(_ context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.execs = append(b.execs, req.Commands)
	var out sandbox.ExecResult
	for _, c := range req.Commands {
		out.Results = append(out.Results, sandbox.CommandResult{Command: c, Result: sandbox.Result{Stdout: "ran " + c + "\n"}})
	}
	return out, nil
}

func (b *box) ran() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]string(nil), b.execs...)
}

type harness struct {
	t         *testing.T
	env       *testsuite.TestWorkflowEnvironment
	model     *script
	box       *box
	snaps     int
	mu        sync.Mutex
	rejects   []string
	destroyed []sandbox.DestroyRequest
	deleted   []string
	restored  []sandbox.RestoreRequest
	// snapErr, when set, fails Snapshot activities with what it returns.
	snapErr func() error
	// policy is what the worker's policy activity answers: the policy of
	// the input the test runs, as a worker configured the same way would.
	policy session.Policy
}

func newHarness(t *testing.T, steps ...agent.ModelResponse) *harness {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	h := &harness{t: t, env: env, model: &script{steps: steps}, box: &box{}}
	env.RegisterWorkflowWithOptions(Session, workflow.RegisterOptions{Name: session.WorkflowName})
	env.RegisterActivity(modelActs.Complete)
	env.RegisterActivity(modelActs.CompleteStored)
	env.RegisterActivity(sandboxActs.Ensure)
	env.RegisterActivity(sandboxActs.EnsureWorkspace)
	env.RegisterActivity(sandboxActs.Exec)
	env.RegisterActivity(sandboxActs.Snapshot)
	env.RegisterActivity(sandboxActs.SaveWorkspace)
	env.RegisterActivity(sandboxActs.RestoreWorkspace)
	env.RegisterActivity(sandboxActs.Destroy)
	env.RegisterActivity(sandboxActs.CopySnapshot)
	env.RegisterActivity(sandboxActs.DeleteSnapshots)
	env.RegisterActivity(sandboxActs.Suspend)
	env.RegisterActivity(policyActs.SessionPolicy)
	env.OnActivity(policyActs.SessionPolicy, mock.Anything).Return(func(context.Context) (session.Policy, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.policy.WithDefaults(), nil
	})
	env.OnActivity(sandboxActs.DeleteSnapshots, mock.Anything, mock.Anything).Return(func(_ context.Context, r sandbox.DeleteSnapshotsRequest) error {
		h.mu.Lock()
		h.deleted = append(h.deleted, r.Keys...)
		h.mu.Unlock()
		return nil
	})
	env.OnActivity(modelActs.Complete, mock.Anything, mock.Anything).Return(h.model.complete)
	env.OnActivity(modelActs.CompleteStored, mock.Anything, mock.Anything).Return(h.model.complete)
	env.OnActivity(sandboxActs.Ensure, mock.Anything, mock.Anything).Return(h.box.ensure)
	env.OnActivity(sandboxActs.Exec, mock.Anything, mock.Anything).Return(h.box.exec)
	snapshot := func(_ context.Context, req sandbox.SnapshotRequest) (sandbox.SnapshotResult, error) {
		h.mu.Lock()
		h.snaps++
		fail := h.snapErr
		h.mu.Unlock()
		if fail != nil {
			return sandbox.SnapshotResult{}, fail()
		}
		return sandbox.SnapshotResult{Written: true, Key: req.Key, Fingerprint: "fp"}, nil
	}
	// Runs since changeCheckpoints call the incremental activities; the
	// box answers them the same way.
	env.OnActivity(sandboxActs.EnsureWorkspace, mock.Anything, mock.Anything).Return(h.box.ensure)
	env.OnActivity(sandboxActs.Snapshot, mock.Anything, mock.Anything).Return(snapshot)
	env.OnActivity(sandboxActs.SaveWorkspace, mock.Anything, mock.Anything).Return(snapshot)
	env.OnActivity(sandboxActs.RestoreWorkspace, mock.Anything, mock.Anything).Return(func(_ context.Context, r sandbox.RestoreRequest) (sandbox.RestoreResult, error) {
		h.mu.Lock()
		h.restored = append(h.restored, r)
		h.mu.Unlock()
		return sandbox.RestoreResult{Written: 1}, nil
	})
	env.OnActivity(sandboxActs.Destroy, mock.Anything, mock.Anything).Return(func(_ context.Context, r sandbox.DestroyRequest) error {
		h.mu.Lock()
		h.destroyed = append(h.destroyed, r)
		h.mu.Unlock()
		return nil
	})
	return h
}

func (h *harness) input(mode session.ApprovalMode) session.SessionInput {
	return session.SessionInput{Location: loc, Owner: owner, Backend: "local", Settings: session.Settings{Policy: session.Policy{ApprovalMode: mode, ApprovalTimeout: 10 * time.Minute}}}
}

// update sends an update and records a rejection's message.
func (h *harness) update(name string, arg any, done func(any, error)) {
	h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
		OnAccept: func() {},
		OnReject: func(err error) {
			h.mu.Lock()
			h.rejects = append(h.rejects, err.Error())
			h.mu.Unlock()
			if done != nil {
				done(nil, err)
			}
		},
		OnComplete: func(v any, err error) {
			if done != nil {
				done(v, err)
			}
		},
	}, arg)
}

func (h *harness) send(eventID, text string) {
	h.update(session.UpdateSendMessage, session.MessageRequest{EventID: eventID, User: owner, Text: text}, nil)
}

func (h *harness) state() session.TurnState {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(session.QueryTurnState)
	if err != nil {
		h.t.Fatalf("query turn_state: %v", err)
	}
	var ts session.TurnState
	if err := v.Get(&ts); err != nil {
		h.t.Fatal(err)
	}
	return ts
}

func (h *harness) at(d time.Duration, f func()) { h.env.RegisterDelayedCallback(f, d) }

func (h *harness) destroyAt(d time.Duration) {
	h.at(d, func() { h.update(session.UpdateDestroy, session.DestroyRequest{User: owner}, nil) })
}

func (h *harness) run(in session.SessionInput) {
	h.t.Helper()
	h.mu.Lock()
	h.policy = in.Settings.Policy
	h.mu.Unlock()
	h.env.ExecuteWorkflow(session.WorkflowName, in)
	if !h.env.IsWorkflowCompleted() {
		h.t.Fatal("workflow did not complete")
	}
	if err := h.env.GetWorkflowError(); err != nil {
		h.t.Fatalf("workflow error: %v", err)
	}
}

func TestTurnWithApproval(t *testing.T) {
	h := newHarness(t, shellCall("c1", "ls"), shellCall("c2", "rm -rf build"), final("All done."))
	h.at(0, func() { h.send("e1", "clean the build") })
	var seen session.TurnState
	h.at(time.Second, func() {
		seen = h.state()
		// An outsider cannot approve; nothing changes.
		h.update(session.UpdateApprove, session.ApproveRequest{CallID: "c2", Decision: session.DecisionApprove, User: intruder}, nil)
		h.update(session.UpdateApprove, session.ApproveRequest{CallID: "nope", Decision: session.DecisionApprove, User: owner}, nil)
		h.update(session.UpdateApprove, session.ApproveRequest{CallID: "c2", Decision: session.DecisionApprove, User: owner}, nil)
	})
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveUnlessReadOnly))

	if seen.Status != session.StatusAwaitingApproval || seen.Pending == nil || seen.Pending.CallID != "c2" || seen.Pending.Command != "rm -rf build" {
		t.Fatalf("mid-turn state should await approval of c2, got %+v", seen)
	}
	if len(seen.ToolCalls) != 2 || seen.ToolCalls[0].Status != session.CallCompleted || seen.ToolCalls[1].Status != session.CallAwaitingApproval {
		t.Fatalf("tool calls mid-turn: %+v", seen.ToolCalls)
	}
	if len(h.rejects) != 2 || !strings.Contains(h.rejects[0], "may not approve") || !strings.Contains(h.rejects[1], "unknown or stale") {
		t.Fatalf("validator rejections: %q", h.rejects)
	}
	if end.Status != session.StatusComplete || end.FinalText != "All done." || end.Turn != 1 {
		t.Fatalf("final state: %+v", end)
	}
	d := end.ToolCalls[1].Decision
	if d == nil || d.Decision != session.DecisionApprove || d.User.ID != owner.ID || d.Command != "rm -rf build" {
		t.Fatalf("decision not recorded: %+v", d)
	}
	if ran := h.box.ran(); len(ran) != 2 || ran[1][0] != "rm -rf build" {
		t.Fatalf("executed: %v", ran)
	}
	if h.snaps == 0 {
		t.Fatal("a turn that ran commands must snapshot the workspace")
	}
}

func TestRejectWithReasonTellsTheModel(t *testing.T) {
	h := newHarness(t, shellCall("c1", "git push --force"), final("Understood."))
	h.at(0, func() { h.send("e1", "ship it") })
	h.at(time.Second, func() {
		h.update(session.UpdateApprove, session.ApproveRequest{CallID: "c1", Decision: session.DecisionReject, Reason: "never force-push", User: owner}, nil)
	})
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveUnlessReadOnly))

	if len(h.box.ran()) != 0 {
		t.Fatalf("a rejected command ran: %v", h.box.ran())
	}
	if end.ToolCalls[0].Status != session.CallRejected {
		t.Fatalf("call status %s, want rejected", end.ToolCalls[0].Status)
	}
	reqs := h.model.requests()
	last := reqs[len(reqs)-1].Messages
	tool := last[len(last)-1]
	if tool.Role != session.RoleTool || !strings.Contains(tool.Content, "rejected") || !strings.Contains(tool.Content, "never force-push") {
		t.Fatalf("model was not told the reason: %+v", tool)
	}
}

func TestApprovalExpires(t *testing.T) {
	h := newHarness(t, shellCall("c1", "make deploy"), final("Ok, not deploying."))
	h.at(0, func() { h.send("e1", "deploy") })
	var end session.TurnState
	var lateErr error
	h.at(11*time.Minute, func() {
		end = h.state()
		h.update(session.UpdateApprove, session.ApproveRequest{CallID: "c1", Decision: session.DecisionApprove, User: owner}, func(_ any, err error) { lateErr = err })
	})
	h.destroyAt(12 * time.Minute)
	h.run(h.input(session.ApproveAlways))

	if len(h.box.ran()) != 0 {
		t.Fatal("an expired approval must not run the command")
	}
	c := end.ToolCalls[0]
	if c.Status != session.CallRejected || c.Decision == nil || !c.Decision.Expired {
		t.Fatalf("expiry not visible in turn_state: %+v", c)
	}
	if !strings.Contains(strings.Join(end.Notices, "\n"), "expired") {
		t.Fatalf("no expiry notice: %q", end.Notices)
	}
	if lateErr == nil || !strings.Contains(lateErr.Error(), "expired") {
		t.Fatalf("a late click must be refused as expired, got %v", lateErr)
	}
}

func TestDuplicateEventStartsOneTurn(t *testing.T) {
	h := newHarness(t, final("hi"), final("again"))
	var first, second session.MessageResponse
	h.at(0, func() {
		h.update(session.UpdateSendMessage, session.MessageRequest{EventID: "ev-1", User: owner, Text: "hello"}, func(v any, _ error) { first = v.(session.MessageResponse) })
	})
	h.at(time.Second, func() {
		h.update(session.UpdateSendMessage, session.MessageRequest{EventID: "ev-1", User: owner, Text: "hello"}, func(v any, _ error) { second = v.(session.MessageResponse) })
	})
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveNever))

	if first.Turn != 1 || first.Duplicate || !second.Duplicate || second.Turn != 1 {
		t.Fatalf("responses: %+v %+v", first, second)
	}
	if end.Turn != 1 || len(h.model.requests()) != 1 {
		t.Fatalf("redelivery started another turn: turn %d, model calls %d", end.Turn, len(h.model.requests()))
	}
}

func TestMessagesDuringATurnAreBatched(t *testing.T) {
	h := newHarness(t, shellCall("c1", "make test"), final("first"), final("second"))
	h.at(0, func() { h.send("e1", "run the tests") })
	h.at(time.Second, func() {
		// The turn waits for approval; two more messages arrive.
		h.send("e2", "also lint")
		h.send("e3", "and format")
		h.update(session.UpdateApprove, session.ApproveRequest{CallID: "c1", Decision: session.DecisionApprove, User: owner}, nil)
	})
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveUnlessReadOnly))

	if end.Turn != 2 || end.FinalText != "second" {
		t.Fatalf("want the two queued messages answered by turn 2, got turn %d %q", end.Turn, end.FinalText)
	}
	reqs := h.model.requests()
	msgs := reqs[len(reqs)-1].Messages
	var users []string
	for _, m := range msgs {
		if m.Role == session.RoleUser {
			users = append(users, m.Content)
		}
	}
	if len(users) != 3 || !strings.Contains(users[1], "also lint") || !strings.Contains(users[2], "and format") {
		t.Fatalf("batched user messages: %q", users)
	}
}

func TestBadInputIsRejectedWithReasons(t *testing.T) {
	h := newHarness(t)
	h.at(0, func() {
		h.send("e1", "   ")
		h.send("e2", strings.Repeat("x", session.MaxMessageBytes+1))
		h.update(session.UpdateApprove, session.ApproveRequest{CallID: "c1", Decision: "maybe", User: owner}, nil)
	})
	h.destroyAt(time.Minute)
	h.run(h.input(session.ApproveNever))
	want := []string{"message is empty", "the limit is 65536 bytes", `decision "maybe" is unknown`}
	if len(h.rejects) != len(want) {
		t.Fatalf("rejections %q", h.rejects)
	}
	for i, w := range want {
		if !strings.Contains(h.rejects[i], w) {
			t.Errorf("rejection %d = %q, want it to contain %q", i, h.rejects[i], w)
		}
	}
	if len(h.model.requests()) != 0 {
		t.Fatal("bad input must not start a turn")
	}
}

func TestInvalidArgumentsAndUnknownToolDoNotEndTheTurn(t *testing.T) {
	bad := agent.ModelResponse{ToolCalls: []session.ToolCall{
		{ID: "c1", Name: session.ShellToolName, Arguments: "{not json"},
		{ID: "c2", Name: "browser", Arguments: "{}"},
	}}
	h := newHarness(t, bad, final("recovered"))
	h.at(0, func() { h.send("e1", "go") })
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveNever))
	if end.Status != session.StatusComplete || end.FinalText != "recovered" {
		t.Fatalf("turn should go on: %+v", end)
	}
	msgs := h.model.requests()[1].Messages
	tail := msgs[len(msgs)-2:]
	if !strings.Contains(tail[0].Content, "invalid arguments") || !strings.Contains(tail[1].Content, `unknown tool "browser"`) {
		t.Fatalf("model was not told: %+v", tail)
	}
}

func TestStopWhileAwaitingApproval(t *testing.T) {
	h := newHarness(t, shellCall("c1", "rm -rf /tmp/x"), final("next turn"))
	h.at(0, func() { h.send("e1", "go") })
	h.at(30*time.Second, func() { h.send("e2", "what now?") })
	var stop session.StopResponse
	h.at(time.Second, func() {
		h.update(session.UpdateStop, session.StopRequest{User: owner}, func(v any, err error) {
			if err == nil {
				stop = v.(session.StopResponse)
			}
		})
	})
	var end session.TurnState
	h.at(10*time.Second, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveAlways))
	if !stop.Stopped || !end.Stopped || end.Status != session.StatusComplete {
		t.Fatalf("stop: %+v state %+v", stop, end)
	}
	if len(h.box.ran()) != 0 {
		t.Fatal("stopped command ran")
	}
	if c := end.ToolCalls[0]; c.Status != session.CallFailed {
		t.Fatalf("a call stopped while awaiting approval must not stay %s", c.Status)
	}
	// The next turn's request must answer every tool call exactly once, or
	// a real endpoint rejects it.
	reqs := h.model.requests()
	results := 0
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == session.RoleTool && m.ToolCallID == "c1" {
			results++
		}
	}
	if results != 1 {
		t.Fatalf("tool results for c1 in the next request: %d, want 1", results)
	}
}

func TestToolCallCap(t *testing.T) {
	steps := []agent.ModelResponse{}
	for i := 0; i < 3; i++ {
		steps = append(steps, shellCall("c"+string(rune('a'+i)), "ls"))
	}
	steps = append(steps, final("summary"))
	h := newHarness(t, steps...)
	in := h.input(session.ApproveNever)
	in.Settings.MaxToolCalls = 2
	h.at(0, func() { h.send("e1", "loop") })
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.run(in)
	if n := len(h.box.ran()); n != 2 {
		t.Fatalf("ran %d calls, cap is 2", n)
	}
	reqs := h.model.requests()
	if !reqs[len(reqs)-1].DisableTools {
		t.Fatal("after the cap the model must be asked without tools")
	}
	if end.FinalText != "summary" {
		t.Fatalf("turn should end with the wrap-up answer: %+v", end)
	}
}

func TestDestroyRemovesSandboxAndSnapshots(t *testing.T) {
	h := newHarness(t, shellCall("c1", "touch f"), final("ok"))
	h.at(0, func() { h.send("e1", "go") })
	h.at(time.Minute, func() {
		h.update(session.UpdateDestroy, session.DestroyRequest{User: intruder}, nil)
		h.update(session.UpdateDestroy, session.DestroyRequest{User: owner}, nil)
	})
	h.run(h.input(session.ApproveNever))
	var res session.SessionResult
	if err := h.env.GetWorkflowResult(&res); err != nil || !res.Destroyed {
		t.Fatalf("result %+v %v", res, err)
	}
	if len(h.rejects) != 1 || !strings.Contains(h.rejects[0], "may not destroy") {
		t.Fatalf("outsider destroy: %q", h.rejects)
	}
	if len(h.destroyed) != 1 || h.destroyed[0].Handle == nil || !h.destroyed[0].DeleteSnapshots {
		t.Fatalf("destroy activity: %+v", h.destroyed)
	}
}

func TestContinueAsNewCarriesState(t *testing.T) {
	h := newHarness(t, final("one"))
	in := h.input(session.ApproveNever)
	in.Settings.HistoryLimitBytes = 1 << 20
	h.policy = in.Settings.Policy
	h.env.SetCurrentHistorySize(2 << 20)
	h.at(0, func() { h.send("e1", "hello") })
	h.env.ExecuteWorkflow(session.WorkflowName, in)
	err := h.env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	var next Input
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	st := next.State
	if st == nil || st.Turn != 1 || len(st.Transcript) != 2 || st.Last.FinalText != "one" || len(st.Seen) != 1 || st.Owner.ID != owner.ID {
		t.Fatalf("state not carried: %+v", st)
	}
}

func (h *harness) info() session.Info {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(session.QueryInfo)
	if err != nil {
		h.t.Fatal(err)
	}
	var info session.Info
	if err := v.Get(&info); err != nil {
		h.t.Fatal(err)
	}
	return info
}

func (h *harness) history() []session.HistoryEntry {
	h.t.Helper()
	v, err := h.env.QueryWorkflow(session.QueryHistory, session.HistoryRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []session.HistoryEntry
	if err := v.Get(&out); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// Every completed turn keeps its snapshot as a checkpoint; the retention
// (here two) drops the oldest, whose snapshot is then deleted.
func TestCheckpointsKeepSnapshotsWithinRetention(t *testing.T) {
	h := newHarness(t, shellCall("c1", "touch a"), final("one"), shellCall("c2", "touch b"), final("two"), shellCall("c3", "touch c"), final("three"))
	h.at(0, func() { h.send("e1", "first") })
	h.at(time.Minute, func() { h.send("e2", "second") })
	h.at(2*time.Minute, func() { h.send("e3", "third") })
	var info session.Info
	h.at(3*time.Minute, func() { info = h.info() })
	h.destroyAt(4 * time.Minute)
	in := h.input(session.ApproveNever)
	in.Settings.Checkpoints = 2
	h.run(in)
	key := func(n int) string { return sandbox.SnapshotKey(info.WorkflowID, n) }
	if info.Snapshot != key(3) {
		t.Fatalf("current snapshot %q, want %q", info.Snapshot, key(3))
	}
	if len(info.Checkpoints) != 2 || info.Checkpoints[0].Turn != 2 || info.Checkpoints[1].Turn != 3 {
		t.Fatalf("checkpoints %+v, want turns 2 and 3", info.Checkpoints)
	}
	if len(h.deleted) != 1 || h.deleted[0] != key(1) {
		t.Fatalf("deleted %q, want only turn 1's %q, which no checkpoint keeps", h.deleted, key(1))
	}
}

// /rewind restores the checkpoint's workspace onto the live sandbox and
// cuts the conversation back, with a note; people who may not decide, a
// turn that does not exist, and a rewind while a turn runs are refused.
func TestRewind(t *testing.T) {
	h := newHarness(t, shellCall("c1", "touch a"), final("one"), shellCall("c2", "touch b"), final("two"),
		shellCall("c3", "sleep 1"), final("three"))
	h.at(0, func() { h.send("e1", "first") })
	h.at(time.Minute, func() { h.send("e2", "second") })
	var res session.RewindResponse
	var rewindErr error
	h.at(2*time.Minute, func() {
		h.update(session.UpdateRewind, session.RewindRequest{Turn: 1, User: intruder}, nil)
		h.update(session.UpdateRewind, session.RewindRequest{Turn: 5, User: owner}, nil)
		h.update(session.UpdateRewind, session.RewindRequest{Turn: 1, User: owner}, func(v any, err error) {
			rewindErr = err
			if err == nil {
				res = v.(session.RewindResponse)
			}
		})
	})
	var info session.Info
	var hist []session.HistoryEntry
	h.at(3*time.Minute, func() { info, hist = h.info(), h.history() })
	h.destroyAt(4 * time.Minute)
	h.run(h.input(session.ApproveNever))
	if rewindErr != nil || res.Turn != 1 || res.Undone != 1 {
		t.Fatalf("rewind = %+v, %v; want turn 1 with one turn undone", res, rewindErr)
	}
	key := func(n int) string { return sandbox.SnapshotKey(info.WorkflowID, n) }
	if len(h.restored) != 1 || h.restored[0].Key != key(1) || h.restored[0].Current != key(2) {
		t.Fatalf("restores %+v, want turn 1's snapshot over turn 2's", h.restored)
	}
	if len(h.rejects) != 2 || !strings.Contains(h.rejects[0], "may not rewind") || !strings.Contains(h.rejects[1], "latest") && !strings.Contains(h.rejects[1], "no checkpoint") {
		t.Fatalf("rejections %q, want the intruder's and turn 5's", h.rejects)
	}
	if info.Snapshot != key(1) || len(info.Checkpoints) != 1 || info.Checkpoints[0].Turn != 1 {
		t.Fatalf("after the rewind: snapshot %q, checkpoints %+v", info.Snapshot, info.Checkpoints)
	}
	for _, e := range hist {
		if strings.Contains(e.Msg.Content, "second") || strings.Contains(e.Msg.Content, "two") {
			t.Fatalf("turn 2's conversation survived the rewind: %+v", e)
		}
	}
	if last := hist[len(hist)-1].Msg.Content; !strings.Contains(last, "rewound the workspace and this conversation to the end of turn 1") {
		t.Fatalf("the transcript does not record the rewind: %q", last)
	}
	if !slices.Contains(h.deleted, key(2)) {
		t.Errorf("turn 2's snapshot was not deleted after the rewind: %q", h.deleted)
	}
}

func TestModelFailureFailsTheTurnNotStopsIt(t *testing.T) {
	h := newHarness(t)
	h.model.fail = temporal.NewNonRetryableApplicationError("model endpoint rejected the API key (401)", agent.ErrTypeModelAuth, nil)
	h.at(0, func() { h.send("e1", "hello") })
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveNever))
	if end.Status != session.StatusFailed || end.Stopped || !strings.Contains(end.Error, "401") {
		t.Fatalf("a failed model call must fail the turn with its reason: %+v", end)
	}
}

// A switch whose old sandbox cannot be reached to save the workspace (its
// provider is down, it is gone) goes ahead from the last snapshot and says
// so; any other snapshot failure keeps the session where its workspace is.
func TestSwitchFromAnUnreachableSandbox(t *testing.T) {
	for _, tc := range []struct {
		errType, backend, notice string
	}{
		{sandbox.ErrTypeUnavailable, "docker", "Could not reach the local sandbox to save the workspace: provider down. The docker sandbox starts from the last snapshot"},
		{sandbox.ErrTypeNotFound, "docker", "Could not reach the local sandbox"},
		{sandbox.ErrTypeWorkspaceOverQuota, "local", "Could not save the workspace before switching to docker: provider down. Staying on local."},
	} {
		t.Run(tc.errType, func(t *testing.T) {
			h := newHarness(t, shellCall("c1", "touch f"), final("ok"), final("again"))
			h.at(0, func() { h.send("e1", "go") })
			h.at(time.Minute, func() {
				h.mu.Lock()
				h.snapErr = func() error { return temporal.NewNonRetryableApplicationError("provider down", tc.errType, nil) }
				h.mu.Unlock()
				h.update(session.UpdateSetBackend, session.SetBackendRequest{Backend: "docker", User: owner}, nil)
			})
			var ts, next session.TurnState
			h.at(2*time.Minute, func() { ts = h.state() })
			h.at(3*time.Minute, func() { h.send("e2", "and now") })
			h.at(4*time.Minute, func() { next = h.state() })
			h.destroyAt(5 * time.Minute)
			h.run(h.input(session.ApproveNever))
			if ts.Backend != tc.backend {
				t.Fatalf("backend %q after the failed snapshot, want %q", ts.Backend, tc.backend)
			}
			shows := func(ts session.TurnState) (n int) {
				for _, s := range ts.Notices {
					if strings.Contains(s, tc.notice) {
						n++
					}
				}
				return n
			}
			if shows(ts) != 1 {
				t.Fatalf("no notice %q: %q", tc.notice, ts.Notices)
			}
			// The switch was made (or not) after turn 1's card had its last
			// edit: turn 2's card says what became of it, once.
			if next.Turn != 2 || shows(next) != 1 {
				t.Fatalf("turn %d's card does not say what became of the switch once (%q): %q", next.Turn, tc.notice, next.Notices)
			}
		})
	}
}

// TestACopyOfTheDecidingClickIsTheSameDecision: Discord delivers every
// click to every bot replica, and each sends the decision with the click's
// ID. The copy that comes second, while the decision waits for the turn or
// once it is recorded, is refused with ErrTypeClickDecided (the bot takes
// it for the success it is), not as "already decided" (which the chaos
// suite's load mode showed users after 973 of 2,916 clicks). A new click
// on a decided call, and a copy naming another decision, are still
// refused as before.
func TestACopyOfTheDecidingClickIsTheSameDecision(t *testing.T) {
	h := newHarness(t, shellCall("c1", "rm -rf build"), final("Done."))
	h.at(0, func() { h.send("e1", "clean") })
	approve := session.ApproveRequest{CallID: "c1", Decision: session.DecisionApprove, User: owner, Click: "1400000000000000001"}
	errs := make([]error, 6)
	answered := 0
	send := func(i int, req session.ApproveRequest) {
		h.update(session.UpdateApprove, req, func(_ any, err error) { errs[i] = err; answered++ })
	}
	h.at(time.Second, func() {
		send(0, approve)
		send(1, approve) // the other replica's copy, before the turn takes the decision
	})
	h.at(30*time.Second, func() {
		send(2, approve) // a copy once the decision is recorded
		again := approve
		again.Click = "1400000000000000002" // a second click
		send(3, again)
		other := approve
		other.Decision = session.DecisionReject // not what the click decided
		send(4, other)
		unmarked := approve
		unmarked.Click = "" // a bot of the build before clicks were named
		send(5, unmarked)
	})
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveUnlessReadOnly))

	if answered != len(errs) {
		t.Fatalf("%d answers, want %d: %v", answered, len(errs), errs)
	}
	if errs[0] != nil {
		t.Fatalf("the first copy of the click: %v", errs[0])
	}
	for i, err := range errs[1:3] {
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != session.ErrTypeClickDecided {
			t.Errorf("copy %d of the deciding click: %v; want a refusal of type %s", i+2, err, session.ErrTypeClickDecided)
		}
	}
	for i, err := range errs[3:] {
		var appErr *temporal.ApplicationError
		if err == nil || !strings.Contains(err.Error(), "already decided") || errors.As(err, &appErr) && appErr.Type() == session.ErrTypeClickDecided {
			t.Errorf("request %d (not a copy of the deciding click): %v; want an \"already decided\" refusal", i+4, err)
		}
	}
	if ran := h.box.ran(); len(ran) != 1 {
		t.Fatalf("executed %v; want the command once", ran)
	}
	if d := end.ToolCalls[0].Decision; d == nil || d.Click != approve.Click || d.User.ID != owner.ID {
		t.Fatalf("decision recorded: %+v; want the owner's, with the click", d)
	}
}

// TestTheNextTurnCarriesTheRecordedStatusCard: once a turn has ended, a
// replica whose card for it was never recorded learns from the next
// turn's Previous which card was, and deletes its own.
func TestTheNextTurnCarriesTheRecordedStatusCard(t *testing.T) {
	h := newHarness(t, final("one"), final("two"))
	h.at(0, func() { h.send("e1", "first") })
	h.at(time.Second, func() {
		h.update(session.UpdateChatRef, session.ChatRefRequest{Turn: 1, Kind: session.ChatRefStatus, Ref: "m1"}, nil)
	})
	h.at(10*time.Second, func() { h.send("e2", "second") })
	var two session.TurnState
	h.at(20*time.Second, func() { two = h.state() })
	h.destroyAt(time.Minute)
	h.run(h.input(session.ApproveUnlessReadOnly))
	if two.Turn != 2 || two.Previous == nil || two.Previous.Turn != 1 || two.Previous.StatusRef != "m1" {
		t.Fatalf("turn 2's Previous: %+v; want turn 1 with its status card m1", two.Previous)
	}
}

// The worker's transcript limit (SANDBOT_SESSION_TRANSCRIPT_LIMIT) caps
// what a session keeps: the oldest entries go, the newest stay.
func TestTranscriptLimitDropsTheOldest(t *testing.T) {
	h := newHarness(t, final("one"), final("two"), final("three"), final("four"))
	big := func(c string) string { return strings.Repeat(c, 30<<10) }
	for i, c := range []string{"a", "b", "c", "d"} {
		h.at(time.Duration(i)*time.Minute, func() { h.send("e"+c, big(c)) })
	}
	var kept []session.HistoryEntry
	h.at(5*time.Minute, func() { kept = h.history() })
	h.destroyAt(6 * time.Minute)
	in := h.input(session.ApproveNever)
	in.Settings.TranscriptLimitBytes = 64 << 10
	h.run(in)
	size := 0
	for _, e := range kept {
		size += entrySize(e)
	}
	if size > 64<<10 {
		t.Fatalf("kept %d bytes of transcript, over the 64 KiB limit", size)
	}
	if len(kept) == 0 || kept[len(kept)-1].Msg.Content != "four" {
		t.Fatalf("the newest entry is not kept: %d entries", len(kept))
	}
	for _, e := range kept {
		if strings.Contains(e.Msg.Content, "aaaa") {
			t.Fatalf("the oldest message is still kept (%d entries, %d bytes)", len(kept), size)
		}
	}
}
