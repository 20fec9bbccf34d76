package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

// TestSlackCommandsInThread: slash commands do not work in Slack threads,
// so commands are typed after a mention (or with a "!" prefix). In a
// session thread whose turn waits for an approval, "@sandbot /status"
// answers with the backend, the turn count and a link to the workflow in
// the Temporal UI, "@sandbot /backend docker" is parsed and routed (and
// refused: no worker serves docker), and "!stop" stops the turn.
func TestSlackCommandsInThread(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch should-not-exist")))
	th, _ := e.mention(slackAlice, "make a file")
	ref := e.statusRef(th, 1)
	e.approvalButtons(ref)

	e.reply(th, slackAlice, e.f.Mention()+" /status")
	status := e.waitBotText(th, "the /status answer", []string{ref}, "Backend")
	text := messageText(status)
	ui := chat.UIURL(e.s.cfg.Temporal.WebURL, e.s.cfg.Temporal.Namespace, th.ID())
	for _, want := range []string{"*Backend*\nlocal", "*Turns*\n1", "*Status*\nwaiting for approval", "*Owner*\n" + slackMention(slackAlice),
		"<" + ui + "|Open in the Temporal UI>", "Workflow `" + th.ID() + "`"} {
		if !strings.Contains(text, want) {
			t.Fatalf("/status answer lacks %q:\n%s", want, text)
		}
	}
	if !strings.HasPrefix(ui, e.s.cfg.Temporal.WebURL+"/namespaces/") {
		t.Fatalf("Temporal UI link %q", ui)
	}

	e.reply(th, slackAlice, e.f.Mention()+" /backend docker")
	e.waitBotText(th, "the /backend answer", []string{ref, status.TS}, "Backend *docker* is not available", "Available: local")

	e.reply(th, slackAlice, "!stop")
	end := e.waitTurn(th, "the stopped turn", done)
	if !end.Stopped || end.Pending != nil {
		t.Fatalf("state after !stop: %s", dump(end))
	}
	if c := end.ToolCalls[0]; c.Status != session.CallFailed && c.Status != session.CallRejected {
		t.Errorf("after !stop the call that waited for approval is %q, want failed or rejected (not run): %s", c.Status, dump(c))
	}
	stopped := e.waitBotText(th, "the !stop answer", nil, "Stopped turn 1.")
	if stopped.Text != "Stopped turn 1." {
		t.Fatalf("!stop answer = %q", stopped.Text)
	}
	e.waitMessage(ref, "the stopped status message", func(m fakeslack.Message) bool {
		return hasLine(messageText(m), "⏹️ Stopped") && len(controlsShown(m)) == 0
	})
	if _, ok := workspaceFile(t, e.s, th, "should-not-exist"); ok {
		t.Fatal("the command of the stopped turn ran")
	}
	if n := len(e.s.model.Requests()); n != 1 {
		t.Fatalf("model called %d times; the stopped turn should not have gone on, and commands are not messages to the agent", n)
	}

	// The session goes on (and ends its turn, so no later bot resumes it).
	e.s.model.Push(fakeopenai.FinalStep("Ready when you are."))
	e.reply(th, slackAlice, "never mind")
	end = e.waitDone(th, 2)
	if ans := e.message(end.FinalRef); ans.Text != "Ready when you are." {
		t.Fatalf("turn 2 answer = %q", ans.Text)
	}
	e.idle()
	e.checkClean()
}

// TestSlackSessionsSlashCommand: "/sandbot sessions" at channel level
// answers (privately, through the response_url) with the user's sessions
// in that channel, each with a link to its thread, and nothing from other
// channels or other users.
func TestSlackSessionsSlashCommand(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	start := func(user, channel, text, answer string) chat.Thread {
		t.Helper()
		e.s.model.Push(fakeopenai.FinalStep(answer))
		sent := e.send(fakeslack.UserMessage{User: user, Channel: channel, Text: e.f.Mention() + " " + text})
		th := chat.Thread{Platform: slack.Platform, Workspace: e.team, Channel: channel, Thread: sent.Message.TS}
		e.waitDone(th, 1)
		return th
	}
	a1 := start(slackAlice, e.channel, "first task", "one")
	a2 := start(slackAlice, e.channel, "second task", "two")
	b1 := start(slackBob, e.channel, "bob's task", "three")
	elsewhere := start(slackAlice, e.channel+"B", "task elsewhere", "four")
	e.waitVisible(e.channel, a1.ID(), a2.ID(), b1.ID())
	posts := len(e.f.Snapshot().AllCallsTo("chat.postMessage"))

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	env, err := e.f.SendSlashCommand(ctx, fakeslack.SlashCommand{User: slackAlice, Channel: e.channel, Command: "/sandbot", Text: "sessions"})
	if err != nil {
		t.Fatal(err)
	}
	snap := e.wait("the /sandbot sessions answer", func(s fakeslack.Snapshot) bool { return s.Acked(env) && len(s.Hooks) == 1 })
	var body struct {
		Text         string `json:"text"`
		ResponseType string `json:"response_type"`
	}
	if err := json.Unmarshal(snap.Hooks[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.ResponseType != "ephemeral" {
		t.Fatalf("/sandbot sessions answered with response_type %q, want ephemeral: %s", body.ResponseType, snap.Hooks[0].Body)
	}
	for _, s := range []struct {
		th    chat.Thread
		title string
	}{{a1, "first task"}, {a2, "second task"}} {
		if !hasLine(body.Text, "<"+e.threadURL(s.th)+"|", "*"+s.title+"*", slackMention(slackAlice)) {
			t.Fatalf("/sandbot sessions lacks a linked line for %q (%s):\n%s", s.title, e.threadURL(s.th), body.Text)
		}
	}
	if strings.Contains(body.Text, elsewhere.Channel) || strings.Contains(body.Text, "task elsewhere") {
		t.Fatalf("/sandbot sessions lists a session of another channel:\n%s", body.Text)
	}
	if strings.Contains(body.Text, "bob's task") || strings.Contains(body.Text, e.threadURL(b1)) {
		t.Errorf("/sandbot sessions should list the user's own sessions (issue 3: \"your sessions in this channel\"); alice's list shows bob's:\n%s", body.Text)
	}
	e.idle()
	if n := len(e.f.Snapshot().AllCallsTo("chat.postMessage")); n != posts {
		t.Fatalf("the command posted %d messages; its answer is private (response_url only)", n-posts)
	}
	e.checkClean()
}

// waitVisible waits until Temporal's visibility (eventually consistent)
// lists exactly these running Slack sessions in channel.
func (e *slackEnv) waitVisible(channel string, ids ...string) {
	e.t.Helper()
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running' AND %s = 'slack' AND %s = '%s'",
		session.WorkflowName, session.SAPlatform.GetName(), session.SAChannel.GetName(), channel)
	slices.Sort(ids)
	deadline := time.Now().Add(waitTimeout)
	var got []string
	for time.Now().Before(deadline) {
		resp, err := e.s.c.ListWorkflow(e.s.ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		if err != nil {
			e.t.Fatalf("list %q: %v", query, err)
		}
		got = got[:0]
		for _, x := range resp.GetExecutions() {
			got = append(got, x.GetExecution().GetWorkflowId())
		}
		slices.Sort(got)
		if slices.Equal(got, ids) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("visibility lists %q in %s, want %q", got, channel, ids)
}

// TestSlackForkShortcut: the "Fork this session" message shortcut, used on
// a message in a session thread, opens a new channel-level message whose
// thread is a new session: it links back to the source, the workflow
// records the lineage, the workspace is copied, and a reply in the new
// thread runs a turn there. The source thread is told where the fork went.
func TestSlackForkShortcut(t *testing.T) {
	e := newSlackEnv(t, slackOptions{stack: []stackOption{slackNoApprovals}})
	e.s.model.Push(
		fakeopenai.ToolCallStep("s1", "shell", shell("echo base > base.txt")),
		fakeopenai.FinalStep("base made"),
	)
	src, _ := e.mention(slackAlice, "make the base file")
	end := e.waitDone(src, 1)
	before := e.botTS(src)

	// The shortcut is used on the answer, a reply in the thread.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := e.f.UseShortcut(ctx, slack.ForkShortcut, slackAlice, e.channel, end.FinalRef); err != nil {
		t.Fatal(err)
	}
	var top fakeslack.Message
	e.wait("a new channel-level message for the fork", func(s fakeslack.Snapshot) bool {
		for _, m := range s.Messages[e.channel] {
			if m.BotID != "" && (m.ThreadTS == "" || m.ThreadTS == m.TS) {
				top = m
				return true
			}
		}
		return false
	})
	if want := "🍴 *Fork of make the base file*"; top.Text != want {
		t.Fatalf("fork message text = %q, want %q", top.Text, want)
	}
	fork := e.thread(top.TS)
	intro := e.waitBotText(fork, "the fork's first message", nil, "Forked from")
	if want := fmt.Sprintf("Forked from <%s|thread> at turn 1 on backend *local*.", e.threadURL(src)); !strings.HasPrefix(intro.Text, want) {
		t.Fatalf("the fork's first message = %q, want it to start %q", intro.Text, want)
	}
	note := e.waitBotText(src, "the note in the source thread", before, "Forked at turn 1 into")
	if want := fmt.Sprintf("Forked at turn 1 into <%s|thread> (backend *local*).", e.threadURL(fork)); !strings.HasPrefix(note.Text, want) {
		t.Fatalf("the source thread's note = %q, want it to start %q", note.Text, want)
	}
	fi := e.s.info(fork)
	if fi.Parent != src.ID() || fi.ForkedAtTurn != 1 || fi.Location != fork || fi.Owner.ID != slackAlice {
		t.Fatalf("fork info: %s", dump(fi))
	}

	// A reply in the new thread (no mention needed) runs the fork's first
	// turn on its copy of the workspace.
	e.s.model.Push(
		fakeopenai.ToolCallStep("f1", "shell", shell("cat base.txt")),
		fakeopenai.FinalStep("the fork sees the base file"),
	)
	e.reply(fork, slackAlice, "show me base.txt")
	fend := e.waitDone(fork, 1)
	if got := cmdOut(t, onlyCall(t, fend), "cat base.txt"); got != "base" {
		t.Fatalf("cat base.txt in the fork: %q", got)
	}
	if ans := e.message(fend.FinalRef); ans.ThreadTS != fork.Thread || ans.Text != "the fork sees the base file" {
		t.Fatalf("fork answer: %+v", ans)
	}
	if ts := e.state(src); ts.Turn != 1 {
		t.Fatalf("the source session ran turn %d; a fork must not touch it", ts.Turn)
	}
	e.idle()
	e.checkClean()
}
