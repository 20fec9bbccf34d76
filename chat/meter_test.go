package chat_test

import (
	"context"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/internal/metrics/metricstest"
	"github.com/sandbot/sandbot/session"
)

var alice = chat.User{ID: "U-alice", Name: "alice"}

// meterDelta reads the change of the sandbot metrics since it was made.
type meterDelta struct {
	t      *testing.T
	before metricstest.Families
	g      func() metricstest.Families
}

func newMeterDelta(t *testing.T) *meterDelta {
	reg := metrics.NewRegistry()
	g := func() metricstest.Families { return metricstest.Gather(t, reg) }
	return &meterDelta{t: t, before: g(), g: g}
}

func (d *meterDelta) of(name string, labels ...string) float64 {
	return d.g().Value(name, labels...) - d.before.Value(name, labels...)
}

func (d *meterDelta) want(what string, want float64, name string, labels ...string) {
	d.t.Helper()
	if got := d.of(name, labels...); got != want {
		d.t.Errorf("%s: %s%v moved by %v, want %v", what, name, labels, got, want)
	}
}

func meterThread(name string) chat.Thread {
	return chat.Thread{Platform: "console", Channel: "meter", Thread: name}
}

// A turn this replica watches, from the message to its end: the approval
// is counted with its wait, every final call and the turn's outcome once,
// however often the state is read.
func TestMeterCountsAWatchedTurnOnce(t *testing.T) {
	ctx := context.Background()
	fake := &chattest.Sessions{}
	s := chat.MeterSessions(fake)
	d := newMeterDelta(t)
	th := meterThread("watched")
	id := th.ID()
	if _, err := s.Send(ctx, session.SessionInput{Location: th, Owner: alice}, session.MessageRequest{EventID: "e1", User: alice, Text: "go"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimWatch(ctx, id, session.ClaimWatchRequest{Claimer: "r1", For: time.Minute}); err != nil {
		t.Fatal(err)
	}
	asked := time.Now().Add(-3 * time.Second)
	fake.Set(id, func(ts *session.TurnState) {
		ts.Status = session.StatusAwaitingApproval
		ts.ToolCalls = []session.ToolCallState{
			{CallID: "c1", Status: session.CallCompleted},
			{CallID: "c2", Status: session.CallAwaitingApproval},
			{CallID: "c3", Status: session.CallRejected, Decision: &session.DecisionRecord{CallID: "c3", Decision: session.DecisionReject, Expired: true}},
		}
		ts.Pending = &session.PendingApproval{CallID: "c2", Command: "rm -rf build", AskedAt: asked}
	})
	for range 3 {
		if _, err := s.TurnState(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Approve(ctx, id, session.ApproveRequest{CallID: "c2", Decision: session.DecisionApprove, User: alice}); err != nil {
		t.Fatal(err)
	}
	fake.Set(id, func(ts *session.TurnState) {
		ts.Status = session.StatusComplete
		ts.ToolCalls[1].Status = session.CallFailed
	})
	for range 3 {
		if _, err := s.TurnState(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	d.want("turns", 1, "sandbot_turns_total", "outcome", metrics.TurnComplete)
	d.want("completed calls", 1, "sandbot_tool_calls_total", "status", "completed")
	d.want("rejected calls", 1, "sandbot_tool_calls_total", "status", "rejected")
	d.want("failed calls", 1, "sandbot_tool_calls_total", "status", "failed")
	d.want("approvals", 1, "sandbot_approvals_total", "decision", "approve")
	d.want("expired approvals", 1, "sandbot_approvals_total", "decision", "expired")
	d.want("timed approvals", 1, "sandbot_approval_wait_seconds", "decision", "approve")
	if w := d.g().Sum("sandbot_approval_wait_seconds", "decision", "approve") - d.before.Sum("sandbot_approval_wait_seconds", "decision", "approve"); w < 3 {
		t.Errorf("approval waited %vs, asked 3 s before the decision", w)
	}
}

// A replica standing by (another holds the watch lease) counts nothing of
// what it reads; once it takes the lease over, it counts what it sees from
// then on, starting with the state read just before the claim.
func TestMeterCountsOnlyUnderTheLease(t *testing.T) {
	ctx := context.Background()
	granted := false
	fake := &chattest.Sessions{WatchFn: func(string, session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
		return session.ClaimWatchResponse{Granted: granted, Holder: "other"}, nil
	}}
	s := chat.MeterSessions(fake)
	d := newMeterDelta(t)
	th := meterThread("standby")
	id := th.ID()
	if _, err := s.Send(ctx, session.SessionInput{Location: th, Owner: alice}, session.MessageRequest{EventID: "e1", User: alice, Text: "go"}); err != nil {
		t.Fatal(err)
	}
	_, _ = s.ClaimWatch(ctx, id, session.ClaimWatchRequest{Claimer: "r2"})
	fake.Set(id, func(ts *session.TurnState) {
		ts.ToolCalls = []session.ToolCallState{{CallID: "c1", Status: session.CallCompleted}}
	})
	_, _ = s.TurnState(ctx, id)
	d.want("calls seen standing by", 0, "sandbot_tool_calls_total")
	fake.Set(id, func(ts *session.TurnState) { ts.Status = session.StatusFailed })
	_, _ = s.TurnState(ctx, id)
	d.want("turns seen standing by", 0, "sandbot_turns_total")
	granted = true
	_, _ = s.ClaimWatch(ctx, id, session.ClaimWatchRequest{Claimer: "r2"})
	d.want("turns after the takeover", 1, "sandbot_turns_total", "outcome", metrics.TurnFailed)
	d.want("calls after the takeover", 1, "sandbot_tool_calls_total", "status", "completed")
}

// A turn that had ended before this replica looked (a restart, /status of
// an old turn) is not counted again; a stopped turn counts as stopped.
func TestMeterSkipsTurnsItDidNotSee(t *testing.T) {
	ctx := context.Background()
	fake := &chattest.Sessions{}
	old := meterThread("old")
	if _, err := fake.Send(ctx, session.SessionInput{Location: old, Owner: alice}, session.MessageRequest{EventID: "e1", User: alice, Text: "go"}); err != nil {
		t.Fatal(err)
	}
	fake.Set(old.ID(), func(ts *session.TurnState) { ts.Status = session.StatusComplete })
	s := chat.MeterSessions(fake)
	d := newMeterDelta(t)
	_, _ = s.ClaimWatch(ctx, old.ID(), session.ClaimWatchRequest{Claimer: "r1"})
	_, _ = s.TurnState(ctx, old.ID())
	d.want("an old turn", 0, "sandbot_turns_total")

	// Seen running, then stopped.
	fake.Set(old.ID(), func(ts *session.TurnState) { ts.Turn, ts.Status = 2, session.StatusThinking })
	_, _ = s.TurnState(ctx, old.ID())
	fake.Set(old.ID(), func(ts *session.TurnState) { ts.Status, ts.Stopped = session.StatusComplete, true })
	_, _ = s.TurnState(ctx, old.ID())
	d.want("a stopped turn", 1, "sandbot_turns_total", "outcome", metrics.TurnStopped)
	d.want("a stopped turn", 0, "sandbot_turns_total", "outcome", metrics.TurnComplete)
}

// The watch lease granted with the message counts as held: the watcher
// does not claim it again, and its turn is counted all the same (the
// metrics end-to-end test caught none counted).
func TestMeterCountsUnderTheLeaseFromTheMessage(t *testing.T) {
	ctx := context.Background()
	fake := &chattest.Sessions{SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
		return session.MessageResponse{Turn: 1, Watch: &session.ClaimWatchResponse{Granted: true, Holder: req.Watch.Claimer}}, nil
	}}
	s := chat.MeterSessions(fake)
	d := newMeterDelta(t)
	th := meterThread("leased")
	id := th.ID()
	if _, err := s.Send(ctx, session.SessionInput{Location: th, Owner: alice},
		session.MessageRequest{EventID: "e1", User: alice, Text: "go", Watch: &session.WatchClaim{Claimer: "r1", For: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	fake.TurnStateFn = func(string) (session.TurnState, error) {
		return session.TurnState{Turn: 1, Status: session.StatusComplete, ToolCalls: []session.ToolCallState{{CallID: "c1", Status: session.CallCompleted}}}, nil
	}
	if _, err := s.TurnState(ctx, id); err != nil {
		t.Fatal(err)
	}
	d.want("turns", 1, "sandbot_turns_total", "outcome", metrics.TurnComplete)
	d.want("calls", 1, "sandbot_tool_calls_total", "status", "completed")
}
