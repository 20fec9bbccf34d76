package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/botapp"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

// The users of the Slack tests. alice starts the sessions (so she owns
// them), bob may use the bot but not approve, carol is not on the bot's
// list of allowed users, and dave is a configured approver.
const (
	slackAlice = "U0ALICE"
	slackBob   = "U0BOB"
	slackCarol = "U0CAROL"
	slackDave  = "U0DAVE"
)

// slackWorlds numbers the workspace and channel of each Slack test. Every
// fake Slack numbers its messages the same way (1700000000.000100, …) and
// session workflow IDs are platform/workspace/channel/thread, so without a
// workspace and channel of their own two tests on the shared server would
// share workflow IDs.
var slackWorlds atomic.Int64

// slackEnv is a sandbot stack (worker, embedded Temporal, local sandbox,
// fake model) with a Slack bot built by internal/botapp from SANDBOT_SLACK_*
// settings, exactly as cmd/bot builds it, pointed at the wire-level Slack
// fake (Socket Mode and Web API through the real slack-go client).
type slackEnv struct {
	t       testing.TB
	s       *stack
	f       *fakeslack.Server
	team    string
	channel string
	// adapter adjusts the adapter's config after the environment's.
	adapter func(*slack.Config)
	bot     *botapp.Bot
	core    *chat.Core
	stop    func()
}

// slackOptions adjust a slackEnv before its bot starts.
type slackOptions struct {
	// fake configures the fake workspace (TeamID is always the test's own).
	// A zero MinUpdateInterval becomes 100 ms, the adapter's edit interval
	// in tests, so the fake flags any edit the adapter paces too closely.
	fake  fakeslack.Options
	stack []stackOption
	// adapter adjusts the adapter's config after the test defaults.
	adapter func(*slack.Config)
	// notAgent makes the fake workspace's app one that is not declared an
	// agent (by default it is, as deploy/slack-app-manifest.yaml says).
	notAgent bool
}

// slackNoApprovals runs every command without asking (approval mode never).
func slackNoApprovals(c *config.Config) { c.Session.ApprovalMode = "never" }

func newSlackEnv(t testing.TB, o slackOptions) *slackEnv {
	t.Helper()
	n := slackWorlds.Add(1)
	team, channel := fmt.Sprintf("T%07dIT", n), fmt.Sprintf("C%07dIT", n)
	s := newStack(t, o.stack...)
	// Registered after the stack, so it runs while the worker still runs.
	t.Cleanup(func() {
		if t.Failed() {
			endSessions(t, s)
		}
	})
	fo := o.fake
	fo.TeamID = team
	fo.AgentApp = !o.notAgent
	if fo.MinUpdateInterval == 0 {
		fo.MinUpdateInterval = 100 * time.Millisecond
	}
	f := fakeslack.New(fo)
	t.Cleanup(f.Close)
	fo = f.Options()
	// The Slack settings as an operator would write them for this
	// workspace. Approvers reach new sessions through config
	// (SANDBOT_SLACK_APPROVERS goes into the session settings) and the
	// adapter alike, as in production.
	s.cfg.Slack = config.Slack{
		BotToken: fo.BotToken, AppToken: fo.AppToken, SigningSecret: fo.SigningSecret,
		APIBase: f.URL(), ListenAddr: "127.0.0.1:0",
		EditInterval: max(fo.MinUpdateInterval, 100*time.Millisecond), UpdateBudget: fo.UpdatesPerMinute,
		AllowedUsers: []string{slackAlice, slackBob, slackDave}, Approvers: []string{slackDave},
	}
	if err := s.cfg.Validate(config.RoleBot); err != nil {
		t.Fatalf("slack config: %v", err)
	}
	e := &slackEnv{t: t, s: s, f: f, team: team, channel: channel, adapter: o.adapter}
	e.startBot()
	return e
}

// startBot builds the bot with internal/botapp and runs its platforms; it
// returns once the adapter is connected.
func (e *slackEnv) startBot() {
	e.t.Helper()
	s := e.s
	b, err := botapp.New(s.ctx, s.c, s.cfg, botapp.Options{Slack: e.adapter, Settings: settingsHook}, s.log)
	if err != nil {
		e.t.Fatalf("bot: %v", err)
	}
	if b.Slack == nil {
		e.t.Fatal("bot: Slack is not enabled")
	}
	e.bot, e.core = b, b.Core
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.RunPlatforms(ctx) }()
	stopped := false
	// A process exit: the adapter stops first, then the core's watchers.
	e.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("bot: %v", err)
		}
		b.Close()
	}
	e.t.Cleanup(e.stop)
	select {
	case <-b.Slack.Ready():
	case err := <-done:
		stopped = true
		b.Close()
		e.t.Fatalf("slack adapter stopped before it was ready: %v", err)
	case <-time.After(waitTimeout):
		e.t.Fatal("slack adapter not ready")
	}
	if s.cfg.Slack.Mode != "http" {
		// The client may report "connected" before the fake has finished
		// its side (hello); wait until both agree.
		e.wait("the fake sees the connection", func(sn fakeslack.Snapshot) bool { return sn.Open > 0 })
	}
}

// restart stops the bot (adapter, then core) as a process exit would and
// starts a new one against the same fake workspace; turns keep running in
// Temporal.
func (e *slackEnv) restart() {
	e.t.Helper()
	before := e.f.Snapshot().Connections
	e.stop()
	e.startBot()
	// The old websocket is gone and the new one is the only one, so no
	// envelope can go to the stopped bot.
	e.wait("the new bot's connection is the only one", func(s fakeslack.Snapshot) bool {
		return s.Connections > before && s.Open == 1
	})
}

// endSessions terminates the running sessions of s's task queue. A failed
// test can leave a turn waiting for an approval; every later Slack bot on
// the shared server would resume watching it (Resume lists all Slack
// sessions with an active turn) and keep polling it after its worker is
// gone, slowing later tests down.
func endSessions(t testing.TB, s *stack) {
	query := fmt.Sprintf("TaskQueue = '%s' AND ExecutionStatus = 'Running'", s.cfg.Temporal.TaskQueue)
	resp, err := s.c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
	if err != nil {
		t.Logf("cleanup: list %q: %v", query, err)
		return
	}
	for _, x := range resp.GetExecutions() {
		id := x.GetExecution().GetWorkflowId()
		if err := s.c.TerminateWorkflow(context.Background(), id, "", "test failed: end its session"); err != nil {
			t.Logf("cleanup: terminate %s: %v", id, err)
		}
	}
}

// waitWatcher waits until the core no longer watches th's session (its
// turn is finalized), so what the bot posted can be counted.
func (e *slackEnv) waitWatcher(th chat.Thread) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := e.core.WaitThread(ctx, th); err != nil {
		e.t.Fatalf("the watcher of %s did not end: %v", th.ID(), err)
	}
}

// thread is the session location of a thread rooted at ts.
func (e *slackEnv) thread(ts string) chat.Thread {
	return chat.Thread{Platform: slack.Platform, Workspace: e.team, Channel: e.channel, Thread: ts}
}

// send delivers a message over Socket Mode (all its events) and fails the
// test if it cannot.
func (e *slackEnv) send(m fakeslack.UserMessage) fakeslack.Sent {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sent, err := e.f.SendMessage(ctx, m)
	if err != nil {
		e.t.Fatal(err)
	}
	return sent
}

// mention posts "@sandbot text" at channel level as user and returns the
// session thread it starts (rooted at the mention) and what was sent.
func (e *slackEnv) mention(user, text string) (chat.Thread, fakeslack.Sent) {
	e.t.Helper()
	sent := e.send(fakeslack.UserMessage{User: user, Channel: e.channel, Text: e.f.Mention() + " " + text})
	return e.thread(sent.Message.TS), sent
}

// reply posts text in a session thread as user.
func (e *slackEnv) reply(th chat.Thread, user, text string) fakeslack.Sent {
	e.t.Helper()
	return e.send(fakeslack.UserMessage{User: user, Channel: th.Channel, ThreadTS: th.Thread, Text: text})
}

// wait blocks until cond holds on the fake's state and returns that state.
func (e *slackEnv) wait(what string, cond func(fakeslack.Snapshot) bool) fakeslack.Snapshot {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	snap, err := e.f.WaitFor(ctx, cond)
	if err != nil {
		e.t.Fatalf("waiting for %s: %v\nchannel %s now shows:\n%s", what, err, e.channel, e.describe(snap))
	}
	return snap
}

// describe lists the channel's messages for failure reports.
func (e *slackEnv) describe(s fakeslack.Snapshot) string {
	var b strings.Builder
	for _, m := range s.Messages[e.channel] {
		fmt.Fprintf(&b, "- ts %s thread %q user %s bot %q updates %d buttons %d files %v:\n%s\n", m.TS, m.ThreadTS, m.User, m.BotID, m.Updates, len(shownButtons(m)), m.Files, messageText(m))
	}
	return b.String()
}

// idle waits until every envelope sent so far is acked and the adapter has
// finished the work those envelopes started, so a test can assert that an
// event caused nothing without sleeping.
func (e *slackEnv) idle() {
	e.t.Helper()
	e.wait("every envelope acked", func(s fakeslack.Snapshot) bool {
		for _, env := range s.Sent {
			if _, ok := s.Ack(env.ID); !ok {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := e.bot.Slack.WaitIdle(ctx); err != nil {
		e.t.Fatalf("adapter idle: %v", err)
	}
}

// message returns the message with ts in the test's channel.
func (e *slackEnv) message(ts string) fakeslack.Message {
	e.t.Helper()
	m, ok := e.f.Snapshot().Message(e.channel, ts)
	if !ok {
		e.t.Fatalf("no message %s in %s", ts, e.channel)
	}
	return m
}

// waitMessage waits until message ts, as the channel shows it, satisfies
// cond, and returns it.
func (e *slackEnv) waitMessage(ts, what string, cond func(fakeslack.Message) bool) fakeslack.Message {
	e.t.Helper()
	var got fakeslack.Message
	e.wait(what, func(s fakeslack.Snapshot) bool {
		m, ok := s.Message(e.channel, ts)
		got = m
		return ok && cond(m)
	})
	return got
}

// botMessages are sandbot's messages in a thread (not other bots').
func (e *slackEnv) botMessages(th chat.Thread) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range e.f.Snapshot().BotMessages(th.Channel, th.Thread) {
		if m.BotID == e.f.Options().BotID {
			out = append(out, m)
		}
	}
	return out
}

// botTS lists the ts of the bot's messages in a thread, in order.
func (e *slackEnv) botTS(th chat.Thread) []string {
	var out []string
	for _, m := range e.botMessages(th) {
		if !isApprovalNotice(m.Text) {
			out = append(out, m.TS)
		}
	}
	return out
}

// isApprovalNotice reports whether a bot text is the message that tells
// approvers a command waits for them (tests that count a turn's status
// message and answer leave it out; TestDiscordApprovalNoticePingsApprovers
// checks it).
func isApprovalNotice(text string) bool { return strings.HasPrefix(text, "✋ A command of turn ") }

// waitTurn polls the session's turn state until cond holds, decoding every
// answer into a fresh value so fields an earlier poll saw (a pending
// approval) cannot linger in the result.
func (e *slackEnv) waitTurn(th chat.Thread, what string, cond func(session.TurnState) bool) session.TurnState {
	e.t.Helper()
	return e.waitTurnEvery(th, 25*time.Millisecond, what, cond)
}

func (e *slackEnv) waitTurnEvery(th chat.Thread, every time.Duration, what string, cond func(session.TurnState) bool) session.TurnState {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last session.TurnState
	for time.Now().Before(deadline) {
		v, err := e.s.c.QueryWorkflow(e.s.ctx, th.ID(), "", session.QueryTurnState)
		if err == nil {
			var ts session.TurnState
			if err := v.Get(&ts); err == nil {
				if last = ts; cond(ts) {
					return ts
				}
			}
		}
		time.Sleep(every)
	}
	e.t.Fatalf("timed out waiting for %s; last state: %s", what, dump(last))
	return last
}

// state is the session's turn state now, freshly decoded.
func (e *slackEnv) state(th chat.Thread) session.TurnState {
	e.t.Helper()
	return e.waitTurn(th, "turn state", func(session.TurnState) bool { return true })
}

// statusRef waits until turn's status message is posted and recorded in
// the workflow, and returns its ts.
func (e *slackEnv) statusRef(th chat.Thread, turn int) string {
	e.t.Helper()
	ts := e.waitTurn(th, fmt.Sprintf("status message of turn %d recorded", turn), func(ts session.TurnState) bool {
		return ts.Turn == turn && ts.StatusRef != ""
	})
	return ts.StatusRef
}

// waitDone waits until turn n has ended and its answer is posted and
// recorded (the watcher has made its last edit).
func (e *slackEnv) waitDone(th chat.Thread, n int) session.TurnState {
	e.t.Helper()
	return e.waitTurn(th, fmt.Sprintf("turn %d finalized", n), func(ts session.TurnState) bool {
		return ts.Turn == n && done(ts) && ts.FinalRef != ""
	})
}

// approvalButtons waits until status message ref shows the three approval
// buttons and returns them by chat action ID.
func (e *slackEnv) approvalButtons(ref string) map[string]fakeslack.Button {
	e.t.Helper()
	m := e.waitMessage(ref, "approval buttons on "+ref, func(m fakeslack.Message) bool {
		n := 0
		for _, b := range shownButtons(m) {
			if id := slack.ActionIDOf(b.ActionID); id == chat.ActionApprove || id == chat.ActionApproveAlways || id == chat.ActionReject {
				n++
			}
		}
		return n == 3
	})
	out := map[string]fakeslack.Button{}
	for _, b := range shownButtons(m) {
		out[slack.ActionIDOf(b.ActionID)] = b
	}
	for _, a := range []string{chat.ActionApprove, chat.ActionApproveAlways, chat.ActionReject} {
		if _, ok := out[a]; !ok {
			e.t.Fatalf("status message has no %s button: %+v", a, shownButtons(m))
		}
	}
	return out
}

// click clicks a button of message ref as user and returns the envelope ID.
// A non-nil value replaces the button's value (an old button's data).
func (e *slackEnv) click(ref, user string, b fakeslack.Button, value *string) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	id, err := e.f.ClickButton(ctx, fakeslack.Click{User: user, Channel: e.channel, MessageTS: ref, ActionID: b.ActionID, Value: value})
	if err != nil {
		if m := e.message(ref); len(m.Buttons()) == 0 && len(shownButtons(m)) > 0 {
			e.t.Fatalf("%v\nThe message shows %d buttons, but fakeslack's Message.Buttons (internal/fake/slack/types.go) finds none: "+
				"it decodes every block element's \"text\" as an object, and the string text of a context block's mrkdwn element makes "+
				"json.Unmarshal fail, so ClickButton cannot click a button on any message with a context block.", err, len(shownButtons(m)))
		}
		e.t.Fatal(err)
	}
	return id
}
