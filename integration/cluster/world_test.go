package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/internal/pgtemporal"
	"github.com/sandbot/sandbot/session"
)

// world is one sandbot deployment on a cluster: a namespace of its own (so
// its bots' scans never see another test's sessions), a task queue, a
// decision key, a snapshot bucket, a model fake, a Slack workspace fake,
// worker hosts and bot replicas. Tests run their worlds in parallel on the
// shared cluster.
type world struct {
	t       *testing.T
	ctx     context.Context
	c       *pgtemporal.Cluster
	ns      string
	queue   string
	key     string
	cl      client.Client
	model   *fakeopenai.Server
	s3      *s3store
	bucket  string
	slack   *fakeslack.Server
	team    string
	channel string
	dir     string
	bots    []*proc
}

// The Slack users: alice starts sessions (so she may approve them).
const alice = "U0ALICE"

// worlds numbers the worlds of this test binary, so that a second run
// (-count) gets new namespaces, buckets and session IDs on the same cluster.
var worlds atomic.Int32

func newWorld(t *testing.T, c *pgtemporal.Cluster, base string) *world {
	t.Helper()
	ctx := testContext(t)
	n := worlds.Add(1)
	name := fmt.Sprintf("%s-%d", base, n)
	if err := c.CreateNamespace(ctx, name, session.SearchAttributeTypes()); err != nil {
		t.Fatal(err)
	}
	cl, err := c.Dial(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	w := &world{t: t, ctx: ctx, c: c, ns: name, queue: "sandbot", key: rand.Text() + rand.Text(), cl: cl,
		model: fakeopenai.New(), s3: sharedS3(), bucket: "snapshots-" + name, dir: t.TempDir(),
		team: fmt.Sprintf("T%s%d", strings.ToUpper(base), n), channel: fmt.Sprintf("C%s%d", strings.ToUpper(base), n)}
	t.Cleanup(w.model.Close)
	w.s3.CreateBucket(t, w.bucket)
	w.slack = fakeslack.New(fakeslack.Options{TeamID: w.team})
	t.Cleanup(w.slack.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- Slack channel %s:\n%s", w.channel, w.describe())
		}
	})
	return w
}

// env is what every sandbot process of the world gets: the cluster, the
// namespace and queue, the decision key, a log level, and a HOME and PATH.
func (w *world) env(addr string) []string {
	level := "info"
	if os.Getenv("SANDBOT_TEST_LOG") != "" {
		level = "debug"
	}
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + w.dir, "TMPDIR=" + os.TempDir(),
		"SANDBOT_TEMPORAL_ADDRESS=" + w.c.HostPort(),
		"SANDBOT_TEMPORAL_NAMESPACE=" + w.ns,
		"SANDBOT_TEMPORAL_TASK_QUEUE=" + w.queue,
		"SANDBOT_DECISION_KEY=" + w.key,
		"SANDBOT_SANDBOX_BACKENDS=local",
		"SANDBOT_METRICS_ADDR=" + addr,
		"SANDBOT_LOG_LEVEL=" + level,
	}
}

// host is one worker host: a cmd/worker process with its own host ID,
// workspace root and listener address.
type host struct {
	*proc
	ID   string
	Root string
}

// workerEnv is a worker host's environment: the model, its own sandbox
// settings, the shared snapshot bucket and the store's AWS credentials.
func (w *world) workerEnv(id, root, addr string) []string {
	return append(append(w.env(addr),
		"SANDBOT_MODEL_BASE_URL="+w.model.URL(),
		"SANDBOT_MODEL_NAME=fake-model",
		"SANDBOT_MODEL_API_KEY=sk-cluster-test-model-key-0123456789",
		"SANDBOT_MODEL_ATTEMPTS=2",
		"SANDBOT_SANDBOX_HOST_ID="+id,
		"SANDBOT_SANDBOX_LOCAL_ROOT="+root,
		"SANDBOT_SANDBOX_SNAPSHOT_URL="+w.s3.URL(w.bucket),
		"SANDBOT_SESSION_EXEC_HEARTBEAT=3s",
	), awsEnv(w.dir)...)
}

// startHost starts worker host id from bin (this tree's cmd/worker unless
// given) with extra variables appended, and waits until it serves.
func (w *world) startHost(id, bin string, extra ...string) *host {
	w.t.Helper()
	if bin == "" {
		bin = currentBinary(w.t, "cmd/worker")
	}
	root := filepath.Join(w.dir, id, "workspaces")
	h := &host{ID: id, Root: root}
	env := append(w.workerEnv(id, root, listenAddr(w.t)), extra...)
	h.proc = startProc(w.t, "worker-"+id, bin, w.dir, env)
	// Every build prints this banner once it polls its queues.
	h.WaitReady(w.t, "sandbot worker: serving backends [local] on host queue "+session.HostQueue(w.queue, id), bin == currentBinary(w.t, "cmd/worker"))
	return h
}

// botEnv is a bot replica's environment: the Slack app's tokens, pointed at
// the Slack fake's Web API (Socket Mode is opened through it).
func (w *world) botEnv(addr string) []string {
	o := w.slack.Options()
	return append(w.env(addr),
		"SANDBOT_SLACK_BOT_TOKEN="+o.BotToken,
		"SANDBOT_SLACK_APP_TOKEN="+o.AppToken,
		"SANDBOT_SLACK_API_BASE="+w.slack.URL(),
	)
}

// startBots starts n bot replicas (cmd/bot processes) and waits until each
// is ready and connected to Slack.
func (w *world) startBots(n int) {
	w.t.Helper()
	bin := currentBinary(w.t, "cmd/bot")
	before := w.slack.Snapshot().Open
	for i := range n {
		p := startProc(w.t, fmt.Sprintf("bot-%d", len(w.bots)+1), bin, w.dir, w.botEnv(listenAddr(w.t)))
		p.WaitReady(w.t, "", true)
		w.wait(fmt.Sprintf("bot replica %d connected", i+1), func(s fakeslack.Snapshot) bool { return s.Open >= before+i+1 })
		w.bots = append(w.bots, p)
	}
}

// thread is the session location of a Slack thread rooted at ts.
func (w *world) thread(ts string) chat.Thread {
	return chat.Thread{Platform: slack.Platform, Workspace: w.team, Channel: w.channel, Thread: ts}
}

// mention posts "@sandbot text" in the channel as user; the thread under it
// is the session.
func (w *world) mention(user, text string) chat.Thread {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, waitTimeout)
	defer cancel()
	sent, err := w.slack.SendMessage(ctx, fakeslack.UserMessage{User: user, Channel: w.channel, Text: w.slack.Mention() + " " + text})
	if err != nil {
		w.t.Fatal(err)
	}
	return w.thread(sent.Message.TS)
}

// reply posts text in a session's thread as user.
func (w *world) reply(th chat.Thread, user, text string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, waitTimeout)
	defer cancel()
	if _, err := w.slack.SendMessage(ctx, fakeslack.UserMessage{User: user, Channel: th.Channel, ThreadTS: th.Thread, Text: text}); err != nil {
		w.t.Fatal(err)
	}
}

// wait blocks until cond holds on the Slack fake's state.
func (w *world) wait(what string, cond func(fakeslack.Snapshot) bool) fakeslack.Snapshot {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, waitTimeout)
	defer cancel()
	s, err := w.slack.WaitFor(ctx, cond)
	if err != nil {
		w.t.Fatalf("waiting for %s: %v", what, err)
	}
	return s
}

// turnState queries the session's turn state (fresh: omitted fields read
// as empty).
func (w *world) turnState(th chat.Thread) (session.TurnState, error) {
	var ts session.TurnState
	v, err := w.cl.QueryWorkflow(w.ctx, th.ID(), "", session.QueryTurnState)
	if err == nil {
		err = v.Get(&ts)
	}
	return ts, err
}

// waitTurn polls the turn state until cond holds.
func (w *world) waitTurn(th chat.Thread, what string, cond func(session.TurnState) bool) session.TurnState {
	w.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last session.TurnState
	var lastErr error
	for time.Now().Before(deadline) {
		ts, err := w.turnState(th)
		if err == nil {
			if last = ts; cond(ts) {
				return ts
			}
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	w.t.Fatalf("timed out waiting for %s; last state: %s (last error: %v)", what, dump(last), lastErr)
	return last
}

// waitDone waits until turn n ended and its answer is posted and recorded.
func (w *world) waitDone(th chat.Thread, n int) session.TurnState {
	w.t.Helper()
	return w.waitTurn(th, fmt.Sprintf("turn %d finished and its answer posted", n), func(ts session.TurnState) bool {
		return ts.Turn == n && (ts.Status == session.StatusComplete || ts.Status == session.StatusFailed) && ts.FinalRef != ""
	})
}

// approvalButtons waits until turn's status message shows the approval
// buttons and returns the message ts and the buttons by chat action.
func (w *world) approvalButtons(th chat.Thread, turn int) (string, map[string]fakeslack.Button) {
	w.t.Helper()
	ts := w.waitTurn(th, fmt.Sprintf("turn %d waiting for approval, on a status message", turn), func(ts session.TurnState) bool {
		return ts.Turn == turn && ts.Pending != nil && ts.StatusRef != ""
	})
	ref := ts.StatusRef
	var buttons []fakeslack.Button
	w.wait("approval buttons on the status message", func(s fakeslack.Snapshot) bool {
		m, ok := s.Message(w.channel, ref)
		buttons = nil
		for _, b := range shownButtons(m) {
			// The running card also has Stop.
			if id := slack.ActionIDOf(b.ActionID); id == chat.ActionApprove || id == chat.ActionApproveAlways || id == chat.ActionReject {
				buttons = append(buttons, b)
			}
		}
		return ok && len(buttons) == 3
	})
	out := map[string]fakeslack.Button{}
	for _, b := range buttons {
		out[slack.ActionIDOf(b.ActionID)] = b
	}
	if _, ok := out[chat.ActionApprove]; !ok {
		w.t.Fatalf("no approve button among %+v", buttons)
	}
	return ref, out
}

// click clicks a button of message ref as user.
func (w *world) click(ref, user string, b fakeslack.Button) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, waitTimeout)
	defer cancel()
	if _, err := w.slack.ClickButton(ctx, fakeslack.Click{User: user, Channel: w.channel, MessageTS: ref, ActionID: b.ActionID}); err != nil {
		w.t.Fatal(err)
	}
}

// botMessages are sandbot's messages in a thread, oldest first.
func (w *world) botMessages(th chat.Thread) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range w.slack.Snapshot().BotMessages(th.Channel, th.Thread) {
		if m.BotID == w.slack.Options().BotID {
			out = append(out, m)
		}
	}
	return out
}

// posts counts sandbot's messages in th that contain text.
func (w *world) posts(th chat.Thread, text string) int {
	n := 0
	for _, m := range w.botMessages(th) {
		if strings.Contains(messageText(m), text) {
			n++
		}
	}
	return n
}

// describe lists the channel's messages, for failure reports.
func (w *world) describe() string {
	var b strings.Builder
	for _, m := range w.slack.Snapshot().Messages[w.channel] {
		fmt.Fprintf(&b, "- ts %s thread %q user %s bot %q updates %d:\n%s\n", m.TS, m.ThreadTS, m.User, m.BotID, m.Updates, messageText(m))
	}
	return b.String()
}

// shownButtons lists the buttons of a message's actions blocks.
func shownButtons(m fakeslack.Message) []fakeslack.Button {
	var blocks []struct {
		Type     string           `json:"type"`
		BlockID  string           `json:"block_id"`
		Elements []map[string]any `json:"elements"`
	}
	if m.RawBlocks == "" || json.Unmarshal([]byte(m.RawBlocks), &blocks) != nil {
		return nil
	}
	str := func(o map[string]any, k string) string { s, _ := o[k].(string); return s }
	var out []fakeslack.Button
	for _, b := range blocks {
		if b.Type != "actions" {
			continue
		}
		for _, el := range b.Elements {
			if str(el, "type") == "button" {
				label, _ := el["text"].(map[string]any)
				out = append(out, fakeslack.Button{BlockID: b.BlockID, ActionID: str(el, "action_id"), Value: str(el, "value"), Text: str(label, "text")})
			}
		}
	}
	return out
}

// messageText is a message's text as a reader sees it: its blocks' text,
// or its plain text.
func messageText(m fakeslack.Message) string {
	var blocks []map[string]any
	if m.RawBlocks == "" || json.Unmarshal([]byte(m.RawBlocks), &blocks) != nil {
		return m.Text
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

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func shell(cmds ...string) string {
	b, _ := json.Marshal(map[string]any{"commands": cmds})
	return string(b)
}
