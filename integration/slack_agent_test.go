package integration

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// Slack's agent surfaces, end to end: the real adapter, core, workflow and
// worker against the fake workspace (internal/fake/slack/assistant.go and
// stream.go serve the methods as Slack documents them).

func (e *slackEnv) threadStatus(th chat.Thread) fakeslack.ThreadStatus {
	st, _ := e.f.ThreadStatus(th.Channel, th.Thread)
	return st
}

func (e *slackEnv) agentSession(th chat.Thread) fakeslack.AgentSession {
	as, _ := e.f.AgentSession(th.Channel, th.Thread)
	return as
}

// While a turn runs the thread says so under it: "is waiting for
// approval…" while a command waits (set again after the approval notice,
// which clears it), "is working…" while the approved command runs, and
// nothing once the turn is done. The agent session is processing (Slack
// shows its stop button) until the turn ends, then active.
func TestSlackThreadStatusWhileTurnRuns(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell(gated+"echo hi > hello.txt")),
		fakeopenai.FinalStep("Wrote hello.txt."),
	)
	th, _ := e.mention(slackAlice, "write hello.txt")
	ref := e.statusRef(th, 1)
	buttons := e.approvalButtons(ref)
	e.wait("the approval status after the notice", func(s fakeslack.Snapshot) bool {
		notice := slices.ContainsFunc(s.BotMessages(th.Channel, th.Thread), func(m fakeslack.Message) bool { return isApprovalNotice(m.Text) })
		return notice && e.threadStatus(th).Status == "is waiting for approval…"
	})
	if as := e.agentSession(th); as.Status != "processing" || as.Initiator != slackAlice {
		t.Fatalf("agent session while waiting = %+v, want processing, initiated by alice", as)
	}
	e.click(ref, slackAlice, buttons[chat.ActionApprove], nil)
	e.wait("the working status while the command runs", func(fakeslack.Snapshot) bool {
		return e.threadStatus(th).Status == "is working…"
	})
	e.release(t)
	end := e.waitDone(th, 1)
	e.wait("the status cleared and the session active", func(fakeslack.Snapshot) bool {
		return e.threadStatus(th).Status == "" && e.agentSession(th).Status == "active"
	})
	if h := e.agentSession(th).History; h[0] != "processing" || h[len(h)-1] != "active" || slices.Contains(h[:len(h)-1], "active") {
		t.Fatalf("agent session history %q: want processing until the end, then active", h)
	}
	if m := e.message(end.FinalRef); m.Text != "Wrote hello.txt." {
		t.Fatalf("answer = %q", m.Text)
	}
	s := e.f.Snapshot()
	for _, m := range []string{"chat.startStream", "chat.appendStream", "chat.stopStream"} {
		if n := len(s.AllCallsTo(m)); n != 0 {
			t.Fatalf("%d %s calls with streaming off", n, m)
		}
	}
	e.idle()
	e.checkClean()
}

// Slack's native stop button, clicked while a command waits for approval,
// stops the turn as the card's Stop button does: the command never runs,
// the card says who stopped it, the clicker is answered privately, nothing
// public repeats it, and the session leaves processing.
func TestSlackNativeStopStopsTheTurn(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch should-not-exist")))
	th, sent := e.mention(slackAlice, "make a file")
	ref := e.statusRef(th, 1)
	e.approvalButtons(ref)
	e.wait("the processing session", func(fakeslack.Snapshot) bool { return e.agentSession(th).Status == "processing" })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := e.f.ClickNativeStop(ctx, slackBob, th.Channel, th.Thread); err != nil {
		t.Fatal(err)
	}
	end := e.waitTurn(th, "the stopped turn", done)
	if !end.Stopped {
		t.Fatalf("after the native stop: %s", dump(end))
	}
	e.waitMessage(ref, "the stopped card", func(m fakeslack.Message) bool {
		return hasLine(messageText(m), "⏹️ Stopped by") && len(approvalShown(m)) == 0 &&
			!slices.ContainsFunc(shownButtons(m), func(b fakeslack.Button) bool { return slack.ActionIDOf(b.ActionID) == chat.ActionStop })
	})
	e.wait("the private answer and the session active", func(s fakeslack.Snapshot) bool {
		answered := slices.ContainsFunc(ephemerals(s, slackBob), func(c fakeslack.Call) bool { return strings.Contains(c.Text(), "Stopped turn 1.") })
		return answered && e.agentSession(th).Status == "active" && e.threadStatus(th).Status == ""
	})
	for _, m := range e.f.Snapshot().BotMessages(th.Channel, th.Thread) {
		if m.TS != ref && strings.Contains(messageText(m), "Stopped") {
			t.Fatalf("a public message repeats the stop: %q", messageText(m))
		}
	}
	if _, ok := workspaceFile(t, e.s, th, "should-not-exist"); ok {
		t.Fatal("the command of the stopped turn ran")
	}
	e.waitMessage(sent.Message.TS, "the stopped reaction", func(m fakeslack.Message) bool {
		return len(m.Reactions) == 1 && m.Reactions[0] == "black_square_for_stop"
	})
	e.idle()
	e.checkClean()
}

// An app Slack refuses the surfaces to (not declared an agent; a token
// the status is refused to) runs its turns exactly as before: each surface
// is tried once, then left alone, and every answer is posted.
func TestSlackNativeSignalsDegrade(t *testing.T) {
	e := newSlackEnv(t, slackOptions{notAgent: true, stack: []stackOption{slackNoApprovals}})
	e.f.InjectFault("assistant.threads.setStatus", 1000, fakeslack.Fault{Error: "not_allowed"})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo one")),
		fakeopenai.FinalStep("First."),
		fakeopenai.ToolCallStep("c2", "shell", shell("echo two")),
		fakeopenai.FinalStep("Second."),
	)
	th, _ := e.mention(slackAlice, "first")
	if end := e.waitDone(th, 1); e.message(end.FinalRef).Text != "First." {
		t.Fatalf("first answer: %q", e.message(end.FinalRef).Text)
	}
	e.reply(th, slackAlice, "second")
	if end := e.waitDone(th, 2); e.message(end.FinalRef).Text != "Second." {
		t.Fatalf("second answer: %q", e.message(end.FinalRef).Text)
	}
	e.idle()
	s := e.f.Snapshot()
	if n, m := len(s.AllCallsTo("assistant.threads.setStatus")), len(s.AllCallsTo("agents.sessions.setStatus")); n != 1 || m != 1 {
		t.Fatalf("%d setStatus and %d agents.sessions.setStatus calls over two turns, want one each (then off)", n, m)
	}
	for _, want := range []string{"thread status is off for this app", "agent sessions are off for this app"} {
		if n := strings.Count(logText(t), want); n != 1 {
			t.Errorf("the log says %q %d times, want once", want, n)
		}
	}
	e.checkClean("not_allowed")
}

// With SANDBOT_SLACK_STREAMING on, the turn's calls stream as task updates
// into one streamed message and its answer ends that message, while the
// approval stays on the card and works as always. Nothing is posted twice:
// the thread has the card, the approval notice and the stream, and the
// session records the stream as the turn's answer.
func TestSlackStreamingTurn(t *testing.T) {
	e := newSlackEnv(t, slackOptions{adapter: func(c *slack.Config) { c.Streaming = true }})
	const answer = "Wrote **hello.txt**; `ls` saw it."
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("ls -la")),
		fakeopenai.ToolCallStep("c2", "shell", shell(gated+"echo hi > hello.txt")),
		fakeopenai.FinalStep(answer),
	)
	th, _ := e.mention(slackAlice, "write hello.txt")
	ref := e.statusRef(th, 1)
	buttons := e.approvalButtons(ref)
	e.wait("the stream with the waiting task", func(fakeslack.Snapshot) bool {
		ss := e.f.Streams(th.Channel, th.Thread)
		return len(ss) == 1 && len(ss[0].Tasks) == 2 && ss[0].Tasks[0].Status == "complete" && ss[0].Tasks[1].Status == "pending"
	})
	e.click(ref, slackAlice, buttons[chat.ActionApprove], nil)
	e.wait("the approved task running", func(fakeslack.Snapshot) bool {
		return e.f.Streams(th.Channel, th.Thread)[0].Tasks[1].Status == "in_progress"
	})
	e.release(t)
	end := e.waitDone(th, 1)
	ss := e.f.Streams(th.Channel, th.Thread)
	if len(ss) != 1 {
		t.Fatalf("%d streams, want 1", len(ss))
	}
	st := ss[0]
	if end.FinalRef != st.TS || st.State != "stopped" || st.Markdown != answer || st.Recipient != slackAlice {
		t.Fatalf("final ref %s, stream %+v: want the stream to carry the answer %q to alice", end.FinalRef, st, answer)
	}
	if st.Tasks[1].Status != "complete" || st.Tasks[1].ID != "c2" {
		t.Fatalf("tasks = %+v", st.Tasks)
	}
	e.waitMessage(ref, "the final card", func(m fakeslack.Message) bool { return hasLine(messageText(m), "✅ Done") })
	var others []string
	for _, m := range e.botMessages(th) {
		if m.TS != ref && m.TS != st.TS && !isApprovalNotice(m.Text) {
			others = append(others, m.Text)
		}
	}
	if len(others) > 0 {
		t.Fatalf("besides the card, the notice and the stream, the thread got %q", others)
	}
	e.wait("the status cleared", func(fakeslack.Snapshot) bool { return e.threadStatus(th).Status == "" })
	e.idle()
	e.checkClean()
	if ends := e.f.Snapshot().AllCallsTo("chat.stopStream"); len(ends) != 1 {
		t.Fatalf("%d chat.stopStream calls, want 1", len(ends))
	}
}
