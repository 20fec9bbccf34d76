package slack_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

func streamingOn(c *slack.Config) { c.Streaming = true }

// withCall is a turn state with one shell call in status st.
func withCall(turn int, version int64, st session.CallStatus, exit *int) session.TurnState {
	ts := session.TurnState{Turn: turn, Version: version, Status: session.StatusThinking,
		ToolCalls: []session.ToolCallState{{CallID: "call-1", Name: "shell", Commands: []string{"go test ./...", "go vet ./..."},
			Status: st, ExitCode: exit, Output: "ok  \tpkg\t0.1s"}}}
	if st == session.CallAwaitingApproval {
		ts.Status = session.StatusAwaitingApproval
	}
	return ts
}

func streams(env interface {
	Streams(string, string) []fakeslack.Stream
}, th chat.Thread) []fakeslack.Stream {
	return env.Streams(th.Channel, th.Thread)
}

// With streaming on, a turn's calls stream into one message as task
// updates as they change, and the answer ends that message: EndTurn takes
// it, so the core posts nothing else. Text from the model cannot ping the
// channel from the stream.
func TestStreamCarriesTasksAndAnswer(t *testing.T) {
	env, _, th, _ := nativeEnv(t, fakeslack.Options{}, streamingOn)
	ctx := testCtx(t)
	a := env.Adapter
	a.ObserveTurn(th, withCall(1, 1, session.CallAwaitingApproval, nil))
	waitFake(t, ctx, env, "the stream with the waiting task", func(fakeslack.Snapshot) bool {
		ss := streams(env.Fake, th)
		return len(ss) == 1 && len(ss[0].Tasks) == 1 && ss[0].Tasks[0].Status == "pending"
	})
	st := streams(env.Fake, th)[0]
	if st.Recipient != "U0001" || st.Team != th.Workspace || !st.Streaming {
		t.Fatalf("stream = %+v, want one to U0001 in %s, streaming", st, th.Workspace)
	}
	if task := st.Tasks[0]; task.ID != "call-1" || task.Title != "go test ./... (+1 more)" || !strings.Contains(task.Details, "card") {
		t.Fatalf("task = %+v", task)
	}
	a.ObserveTurn(th, withCall(1, 2, session.CallRunning, nil))
	waitFake(t, ctx, env, "the running task", func(fakeslack.Snapshot) bool {
		return streams(env.Fake, th)[0].Tasks[0].Status == "in_progress"
	})
	zero := 0
	final := withCall(1, 3, session.CallCompleted, &zero)
	final.Status, final.FinalText = session.StatusComplete, "All **done** <!channel>"
	ref, took := a.EndTurn(ctx, th, final, final.FinalText)
	if !took || ref != st.TS {
		t.Fatalf("EndTurn = %q, %v; want the stream %q to take the answer", ref, took, st.TS)
	}
	st = streams(env.Fake, th)[0]
	if st.State != "stopped" || st.Tasks[0].Status != "complete" || !strings.Contains(st.Tasks[0].Output, "ok") {
		t.Fatalf("ended stream = %+v", st)
	}
	if !strings.HasPrefix(st.Markdown, "All **done**") || strings.Contains(st.Markdown, "<!channel>") {
		t.Fatalf("stream answer = %q: want the answer, with <!channel> broken", st.Markdown)
	}
	s := env.Fake.Snapshot()
	if n := len(s.AllCallsTo("chat.startStream")); n != 1 {
		t.Fatalf("%d chat.startStream calls, want 1", n)
	}
	if n := len(s.AllCallsTo("chat.postMessage")); n != 0 {
		t.Fatalf("%d messages posted besides the stream", n)
	}
	if v := s.Violations; len(v) > 0 {
		t.Fatalf("rate violations: %+v", v)
	}
	// A late state of the ended turn starts no second stream.
	a.ObserveTurn(th, final)
	if err := slack.WaitSignals(ctx, a); err != nil {
		t.Fatal(err)
	}
	if n := len(streams(env.Fake, th)); n != 1 {
		t.Fatalf("%d streams after a late state, want 1", n)
	}
}

// A turn that calls no tool streams nothing, and neither does a thread
// nobody wrote to through this process (a stream needs its recipient):
// the answer is posted as usual.
func TestStreamOnlyWhereItCan(t *testing.T) {
	env, _, th, _ := nativeEnv(t, fakeslack.Options{}, streamingOn)
	ctx := testCtx(t)
	a := env.Adapter
	a.ObserveTurn(th, running(1))
	if _, took := a.EndTurn(ctx, th, ended(1), "Done."); took {
		t.Fatal("a turn without tool calls was streamed")
	}
	stranger := th
	stranger.Thread = env.Fake.Say(fakeslack.UserMessage{Text: "no mention"}).Message.TS
	a.ObserveTurn(stranger, withCall(1, 1, session.CallRunning, nil))
	ref, took := a.EndTurn(ctx, stranger, ended(1), "Done.")
	if took || ref != "" {
		t.Fatalf("EndTurn = %q, %v for a thread without a recipient", ref, took)
	}
	if n := len(env.Fake.Snapshot().AllCallsTo("chat.startStream")); n != 0 {
		t.Fatalf("%d chat.startStream calls, want none", n)
	}
}

// With streaming off (the default) nothing is streamed, tool calls or not.
func TestStreamingOffStreamsNothing(t *testing.T) {
	env, _, th, _ := nativeEnv(t, fakeslack.Options{}, nil)
	ctx := testCtx(t)
	a := env.Adapter
	a.ObserveTurn(th, withCall(1, 1, session.CallRunning, nil))
	if _, took := a.EndTurn(ctx, th, ended(1), "Done."); took {
		t.Fatal("EndTurn took the answer with streaming off")
	}
	s := env.Fake.Snapshot()
	for _, m := range []string{"chat.startStream", "chat.appendStream", "chat.stopStream"} {
		if n := len(s.AllCallsTo(m)); n != 0 {
			t.Fatalf("%d %s calls with streaming off", n, m)
		}
	}
}

// A user's native stop halts the turn's stream (Slack stops it): nothing
// more is appended to it and the answer, if any, is posted as usual.
func TestNativeStopHaltsTheStream(t *testing.T) {
	env, _, th, _ := nativeEnv(t, fakeslack.Options{AgentApp: true}, streamingOn)
	ctx := testCtx(t)
	a := env.Adapter
	streamThenStop(t, ctx, env, th)
	// From here the adapter knows of the stop. (An append already on its
	// way when the user pressed stop may still meet the halted stream.)
	known := 0
	if calls := env.Fake.Snapshot().Calls; len(calls) > 0 {
		known = calls[len(calls)-1].Seq
	}
	stopped := withCall(1, 2, session.CallFailed, nil)
	stopped.Status, stopped.Stopped = session.StatusComplete, true
	if _, took := a.EndTurn(ctx, th, stopped, ""); took {
		t.Fatal("a halted stream took the answer")
	}
	s := env.Fake.Snapshot()
	for _, c := range s.AllCallsTo("chat.appendStream") {
		if c.Seq > known && !c.OK() {
			t.Fatalf("appended to the halted stream: %s", c.Error)
		}
	}
	if st := streams(env.Fake, th)[0]; st.State != "halted" {
		t.Fatalf("stream state %q, want halted", st.State)
	}
}

// A native stop that arrives while the turn's chat.startStream is still
// waiting for its answer (Slack made the stream; the adapter does not know
// its ts yet) halts it too: once the start answers, nothing is appended
// to the stopped stream. (CI found this: the adapter matched the stop's
// timestamps against a ts it did not have yet, and appended the turn's
// last tasks to the halted stream.)
func TestNativeStopDuringStreamStart(t *testing.T) {
	env, _, th, _ := nativeEnv(t, fakeslack.Options{AgentApp: true}, streamingOn)
	ctx := testCtx(t)
	a := env.Adapter
	release := env.Fake.HoldNext("chat.startStream")
	defer release()
	streamThenStop(t, ctx, env, th)
	release()
	stopped := withCall(1, 2, session.CallFailed, nil)
	stopped.Status, stopped.Stopped = session.StatusComplete, true
	if _, took := a.EndTurn(ctx, th, stopped, ""); took {
		t.Fatal("a halted stream took the answer")
	}
	s := env.Fake.Snapshot()
	for _, m := range []string{"chat.appendStream", "chat.stopStream"} {
		for _, c := range s.AllCallsTo(m) {
			t.Fatalf("%s on the halted stream (ok=%v %s)", m, c.OK(), c.Error)
		}
	}
	if st := streams(env.Fake, th)[0]; st.State != "halted" {
		t.Fatalf("stream state %q, want halted", st.State)
	}
}

// streamThenStop starts turn 1's stream with a running call, waits for
// the stream and the agent session, then clicks Slack's native stop and
// waits until the adapter has handled the click.
func streamThenStop(t *testing.T, ctx context.Context, env *slacktest.Env, th chat.Thread) {
	t.Helper()
	env.Adapter.ObserveTurn(th, withCall(1, 1, session.CallRunning, nil))
	waitFake(t, ctx, env, "the stream and the session", func(fakeslack.Snapshot) bool {
		return len(streams(env.Fake, th)) == 1 && agentSession(env, th).Status == "processing"
	})
	id, err := env.Fake.ClickNativeStop(ctx, "U0001", th.Channel, th.Thread)
	if err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, "the ack", func(s fakeslack.Snapshot) bool { return s.Acked(id) })
	idle(t, ctx, env)
}

// With the Tier 2 budget spent (a busy workspace), a turn is not streamed:
// its answer is posted as usual, nothing waits, and Slack sees no call
// over its rate.
func TestStreamYieldsToTheBudget(t *testing.T) {
	env, _, th, _ := nativeEnv(t, fakeslack.Options{}, streamingOn)
	ctx := testCtx(t)
	a := env.Adapter
	if err := slack.SpendStreamStarts(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.ObserveTurn(th, withCall(1, 1, session.CallRunning, nil))
	// EndTurn waits for the turn's stream sender, which gave up at once.
	if _, took := a.EndTurn(ctx, th, ended(1), "Done."); took {
		t.Fatal("a stream took the answer with the budget spent")
	}
	if n := len(env.Fake.Snapshot().AllCallsTo("chat.startStream")); n != 0 {
		t.Fatalf("%d chat.startStream calls with the budget spent", n)
	}
}
