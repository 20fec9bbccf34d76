package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/app"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/workflows"
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
// fake model) with a Slack front end wired as internal/app wires it: the
// adapter is built first, the chat.Core over Temporal takes its Budget, and
// the adapter runs with the core, against the wire-level Slack fake
// (Socket Mode and Web API through the real slack-go client).
type slackEnv struct {
	t       testing.TB
	s       *stack
	env     *slacktest.Env
	f       *fakeslack.Server
	team    string
	channel string
	core    *chat.Core
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
}

// slackNoApprovals runs every command without asking (approval mode never).
func slackNoApprovals(c *config.Config) { c.Session.ApprovalMode = "never" }

func newSlackEnv(t testing.TB, o slackOptions) *slackEnv {
	t.Helper()
	n := slackWorlds.Add(1)
	team, channel := fmt.Sprintf("T%07dIT", n), fmt.Sprintf("C%07dIT", n)
	// Approvers reach new sessions through config (SANDBOT_SLACK_APPROVERS
	// goes into SessionSettings) and the adapter alike, as in production.
	opts := append([]stackOption{func(c *config.Config) { c.Slack.Approvers = []string{slackDave} }}, o.stack...)
	s := newStack(t, opts...)
	fo := o.fake
	fo.TeamID = team
	if fo.MinUpdateInterval == 0 {
		fo.MinUpdateInterval = 100 * time.Millisecond
	}
	env := slacktest.New(t, slacktest.Options{Fake: fo, Log: s.log, Config: func(c *slack.Config) {
		c.AllowedUsers = []string{slackAlice, slackBob, slackDave}
		c.Approvers = s.cfg.Slack.Approvers
		if o.adapter != nil {
			o.adapter(c)
		}
	}})
	e := &slackEnv{t: t, s: s, env: env, f: env.Fake, team: team, channel: channel}
	e.startBot()
	return e
}

// startBot builds a core over env.Adapter's budget (as app.NewBot does) and
// runs the adapter with it; it returns once the adapter is connected.
func (e *slackEnv) startBot() {
	e.t.Helper()
	s := e.s
	settings := s.cfg.SessionSettings()
	settings.Indexed = true
	settings.Backends = s.cfg.Sandbox.Backends
	sessions := chat.NewTemporalSessions(s.c, chat.TemporalOptions{TaskQueue: s.cfg.Temporal.TaskQueue, Indexed: true})
	core := chat.NewCore(chat.CoreConfig{
		Start:          chat.StartDefaults{Settings: settings, Backend: s.cfg.Sandbox.Default},
		TemporalUIBase: s.cfg.Temporal.WebURL,
		Namespace:      s.cfg.Temporal.Namespace,
		Backends:       s.cfg.Sandbox.Backends,
		Budgets:        map[string]chat.Budget{slack.Platform: e.env.Adapter.Budget()},
		ServedBackends: func(ctx context.Context) ([]string, error) {
			return app.ServedBackends(ctx, s.c, s.cfg.Temporal.TaskQueue, config.KnownBackends)
		},
	}, sessions, s.log)
	e.core = core
	// Registered before Run registers the adapter's Stop, so on cleanup
	// the adapter stops first and then the core's watchers.
	e.t.Cleanup(core.Close)
	e.env.Run(core)
}

// restart stops the bot (adapter, then core) as a process exit would and
// starts a new adapter and core against the same fake workspace; turns keep
// running in Temporal. slacktest.Env.Restart builds the new adapter and
// runs it in one step, but the new core must be built from the new
// adapter's Budget, so the steps are spelled out here.
func (e *slackEnv) restart() {
	e.t.Helper()
	before := e.f.Snapshot().Connections
	e.env.Stop()
	e.core.Close()
	a, err := slack.New(e.env.Config, e.s.log)
	if err != nil {
		e.t.Fatalf("slack.New: %v", err)
	}
	e.env.Adapter = a
	e.startBot()
	// The old websocket is gone and the new one is the only one, so no
	// envelope can go to the stopped bot.
	e.wait("the new bot's connection is the only one", func(s fakeslack.Snapshot) bool {
		return s.Connections > before && s.Open == 1
	})
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
		fmt.Fprintf(&b, "- ts %s thread %q user %s bot %q updates %d buttons %d files %v:\n%s\n", m.TS, m.ThreadTS, m.User, m.BotID, m.Updates, len(m.Buttons()), m.Files, messageText(m))
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
	if err := e.env.Adapter.WaitIdle(ctx); err != nil {
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
		out = append(out, m.TS)
	}
	return out
}

// waitTurn polls the session's turn state until cond holds, decoding every
// answer into a fresh value so fields an earlier poll saw (a pending
// approval) cannot linger in the result.
func (e *slackEnv) waitTurn(th chat.Thread, what string, cond func(workflows.TurnState) bool) workflows.TurnState {
	e.t.Helper()
	return e.waitTurnEvery(th, 25*time.Millisecond, what, cond)
}

func (e *slackEnv) waitTurnEvery(th chat.Thread, every time.Duration, what string, cond func(workflows.TurnState) bool) workflows.TurnState {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last workflows.TurnState
	for time.Now().Before(deadline) {
		v, err := e.s.c.QueryWorkflow(e.s.ctx, th.ID(), "", workflows.QueryTurnState)
		if err == nil {
			var ts workflows.TurnState
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
func (e *slackEnv) state(th chat.Thread) workflows.TurnState {
	e.t.Helper()
	return e.waitTurn(th, "turn state", func(workflows.TurnState) bool { return true })
}

// statusRef waits until turn's status message is posted and recorded in
// the workflow, and returns its ts.
func (e *slackEnv) statusRef(th chat.Thread, turn int) string {
	e.t.Helper()
	ts := e.waitTurn(th, fmt.Sprintf("status message of turn %d recorded", turn), func(ts workflows.TurnState) bool {
		return ts.Turn == turn && ts.StatusRef != ""
	})
	return ts.StatusRef
}

// waitDone waits until turn n has ended and its answer is posted and
// recorded (the watcher has made its last edit).
func (e *slackEnv) waitDone(th chat.Thread, n int) workflows.TurnState {
	e.t.Helper()
	return e.waitTurn(th, fmt.Sprintf("turn %d finalized", n), func(ts workflows.TurnState) bool {
		return ts.Turn == n && done(ts) && ts.FinalRef != ""
	})
}

// approvalButtons waits until status message ref shows the three approval
// buttons and returns them by chat action ID.
func (e *slackEnv) approvalButtons(ref string) map[string]fakeslack.Button {
	e.t.Helper()
	m := e.waitMessage(ref, "approval buttons on "+ref, func(m fakeslack.Message) bool { return len(m.Buttons()) == 3 })
	out := map[string]fakeslack.Button{}
	for _, b := range m.Buttons() {
		out[slack.ActionIDOf(b.ActionID)] = b
	}
	for _, a := range []string{chat.ActionApprove, chat.ActionApproveAlways, chat.ActionReject} {
		if _, ok := out[a]; !ok {
			e.t.Fatalf("status message has no %s button: %+v", a, m.Buttons())
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
		e.t.Fatal(err)
	}
	return id
}

// ephemerals are the chat.postEphemeral calls the bot made to user.
func ephemerals(s fakeslack.Snapshot, user string) []fakeslack.Call {
	var out []fakeslack.Call
	for _, c := range s.CallsTo("chat.postEphemeral") {
		if c.Form.Get("user") == user {
			out = append(out, c)
		}
	}
	return out
}

// updatesOf are the accepted chat.update calls of message ts, in order.
func updatesOf(s fakeslack.Snapshot, ts string) []fakeslack.Call {
	var out []fakeslack.Call
	for _, c := range s.CallsTo("chat.update") {
		if c.Form.Get("ts") == ts {
			out = append(out, c)
		}
	}
	return out
}

// postedTS is the ts of the message a chat.postMessage call created.
func postedTS(c fakeslack.Call) string {
	var r struct {
		TS string `json:"ts"`
	}
	_ = json.Unmarshal(c.Response, &r)
	return r.TS
}

// shown is one version of a message as Slack received it.
type shown struct {
	at   time.Time
	text string // every text of its blocks, in order
	raw  string
}

// versions are every version of message ts: the chat.postMessage that made
// it, then its accepted chat.update calls.
func versions(s fakeslack.Snapshot, ts string) []shown {
	var out []shown
	for _, c := range s.CallsTo("chat.postMessage") {
		if postedTS(c) == ts {
			out = append(out, shown{at: c.At, text: blocksText(c.RawBlocks), raw: c.RawBlocks})
		}
	}
	for _, c := range updatesOf(s, ts) {
		out = append(out, shown{at: c.At, text: blocksText(c.RawBlocks), raw: c.RawBlocks})
	}
	return out
}

// blocksText is every text of a Block Kit JSON array, one per line, in
// order: section texts and fields, context elements, button labels.
func blocksText(raw string) string {
	var blocks []map[string]any
	if json.Unmarshal([]byte(raw), &blocks) != nil {
		return ""
	}
	var out []string
	var walk func(o map[string]any)
	walk = func(o map[string]any) {
		switch t := o["text"].(type) {
		case string:
			out = append(out, t)
		case map[string]any:
			walk(t)
		}
		for _, k := range []string{"fields", "elements"} {
			if list, ok := o[k].([]any); ok {
				for _, x := range list {
					if m, ok := x.(map[string]any); ok {
						walk(m)
					}
				}
			}
		}
	}
	for _, b := range blocks {
		walk(b)
	}
	return strings.Join(out, "\n")
}

// messageText is what a message shows: its blocks' text, or its text.
func messageText(m fakeslack.Message) string {
	if m.RawBlocks != "" {
		return blocksText(m.RawBlocks)
	}
	return m.Text
}

// hasLine reports whether text has a line containing every part.
func hasLine(text string, parts ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// slackMention is how mrkdwn mentions a user.
func slackMention(user string) string { return "<@" + user + ">" }

// checkClean fails the test if the fake recorded a chat.update budget
// violation, or if Slack refused any Web API call the bot made in the
// test's channel other than the faults the test injected (allowed lists
// their Slack error codes, or "http 429" for a refusal without one).
func (e *slackEnv) checkClean(allowed ...string) {
	e.t.Helper()
	s := e.f.Snapshot()
	for _, v := range s.Violations {
		e.t.Errorf("chat.update budget violation (%s) on %s/%s: %s", v.Kind, v.Channel, v.TS, v.Detail)
	}
	for _, c := range s.Calls {
		if c.OK() || (c.Form.Get("channel") != e.channel && c.Form.Get("channel_id") != e.channel) {
			continue
		}
		code := c.Error
		if code == "" {
			code = fmt.Sprintf("http %d", c.Status)
		}
		ok := false
		for _, a := range allowed {
			ok = ok || code == a
		}
		if !ok {
			e.t.Errorf("Slack refused %s: HTTP %d %q: %s", c.Method, c.Status, c.Error, c.Response)
		}
	}
}
