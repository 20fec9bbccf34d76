// Package integration runs sandbot end to end: the embedded Temporal server
// (one per test binary), real workers with real sandboxes, the chat core,
// and the in-project fakes that speak the OpenAI, Slack and Discord wire
// protocols. It is the only test package that links the Temporal server.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/botapp"
	"github.com/sandbot/sandbot/internal/devcmd"
	"github.com/sandbot/sandbot/internal/devserver"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/workerapp"
	"github.com/sandbot/sandbot/session"
)

// srv is the embedded Temporal server shared by every test of the package.
var srv *devserver.Server

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := devserver.Start(ctx, devserver.Options{Ephemeral: true, SearchAttributes: session.SearchAttributeTypes(), DynamicConfig: devcmd.DevDynamicConfig()})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start embedded Temporal:", err)
		os.Exit(1)
	}
	srv = s
	code := m.Run()
	_ = srv.Stop()
	os.Exit(code)
}

// waitTimeout bounds every wait for an event. It is generous on purpose:
// tests wait for conditions, never for durations.
const waitTimeout = 90 * time.Second

func testLogger(t testing.TB) *slog.Logger {
	var out io.Writer = io.Discard
	if os.Getenv("SANDBOT_TEST_LOG") != "" {
		out = os.Stderr
	}
	// Every line is also kept, for tests that check what the logs hold
	// (logText).
	v, loaded := testLogs.LoadOrStore(t.Name(), &lockedBuffer{})
	buf := v.(*lockedBuffer)
	if !loaded {
		t.Cleanup(func() { testLogs.Delete(t.Name()) })
	}
	return slog.New(slog.NewTextHandler(io.MultiWriter(out, buf), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testLogs holds each running test's log lines, by test name.
var testLogs sync.Map

// logText returns what t's stack logged so far.
func logText(t testing.TB) string {
	if b, ok := testLogs.Load(t.Name()); ok {
		return b.(*lockedBuffer).String()
	}
	return ""
}

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a
// process's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var nonWord = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// stack is one isolated sandbot: its own task queue, model fake, worker,
// sandbox root, snapshot store and chat core, on the shared server. The
// worker and the bot are built by internal/workerapp and internal/botapp,
// as cmd/worker, cmd/bot and cmd/dev build them.
type stack struct {
	t      testing.TB
	ctx    context.Context
	c      client.Client
	cfg    *config.Config
	model  *fakeopenai.Server
	worker *workerapp.Worker
	bot    *botapp.Bot
	core   *chat.Core
	poster *recPoster
	log    *slog.Logger
}

type stackOption func(*config.Config)

func newStack(t testing.TB, opts ...stackOption) *stack {
	t.Helper()
	return newStackClient(t, client.Options{}, opts...)
}

// newStackClient is newStack with the options of the client that the
// worker, the core and the test share (a benchmark counts its calls).
func newStackClient(t testing.TB, copts client.Options, opts ...stackOption) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := testLogger(t)
	c, err := srv.NewClient(ctx, copts)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(c.Close)
	model := fakeopenai.New()
	t.Cleanup(model.Close)

	cfg := config.Load()
	dir := t.TempDir()
	cfg.Temporal.TaskQueue = "it-" + nonWord.ReplaceAllString(t.Name(), "-")
	cfg.Temporal.Namespace = srv.Namespace()
	cfg.Model.BaseURL = model.URL()
	cfg.Model.Name = "fake-model"
	cfg.Model.APIKey = "sk-test-secret-key-0123456789"
	cfg.Model.Attempts = 2
	cfg.Sandbox.LocalRoot = filepath.Join(dir, "workspaces")
	cfg.Sandbox.SnapshotURL = "file://" + filepath.Join(dir, "snapshots")
	cfg.Sandbox.HostID = "host-a"
	cfg.Sandbox.Backends = []string{"local"}
	cfg.Session.ExecHeartbeat = 3 * time.Second
	for _, o := range opts {
		o(cfg)
	}
	cfg.EnsureDecisionKey()
	if err := cfg.Validate(config.RoleDev); err != nil {
		t.Fatalf("config: %v", err)
	}
	s := &stack{t: t, ctx: ctx, c: c, cfg: cfg, model: model, log: log, poster: newRecPoster()}
	s.startWorker()
	s.startCore()
	return s
}

// workerProcEnv is the environment of a real cmd/worker process serving
// this stack in place of its in-process worker (the same server, queue,
// model, workspace root, snapshot store, approval policy and decision
// key), plus extra.
func (s *stack) workerProcEnv(extra ...string) []string {
	return append(append(os.Environ(),
		"SANDBOT_TEMPORAL_ADDRESS="+srv.HostPort(),
		"SANDBOT_TEMPORAL_NAMESPACE="+srv.Namespace(),
		"SANDBOT_TEMPORAL_TASK_QUEUE="+s.cfg.Temporal.TaskQueue,
		"SANDBOT_MODEL_BASE_URL="+s.cfg.Model.BaseURL,
		"SANDBOT_MODEL_NAME="+s.cfg.Model.Name,
		"SANDBOT_SANDBOX_LOCAL_ROOT="+s.cfg.Sandbox.LocalRoot,
		"SANDBOT_SANDBOX_SNAPSHOT_URL="+s.cfg.Sandbox.SnapshotURL,
		// Sessions take the policy from the worker.
		"SANDBOT_SESSION_APPROVAL_MODE="+s.cfg.Session.ApprovalMode,
		"SANDBOT_DECISION_KEY="+s.cfg.DecisionKey,
	), extra...)
}

func (s *stack) startWorker() {
	s.t.Helper()
	w, err := workerapp.Start(s.ctx, s.c, s.cfg, workerapp.Options{Policy: policyHook()}, s.log)
	if err != nil {
		s.t.Fatalf("worker: %v", err)
	}
	s.worker = w
	s.t.Cleanup(w.Stop)
}

// startCore starts the bot through the production assembly. No chat
// platform is configured, so it is the core alone; tests hand it messages
// with their own poster, as the terminal front end does.
func (s *stack) startCore() {
	s.t.Helper()
	b, err := botapp.New(s.ctx, s.c, s.cfg, botapp.Options{Settings: settingsHook}, s.log)
	if err != nil {
		s.t.Fatalf("bot: %v", err)
	}
	s.bot, s.core = b, b.Core
	s.t.Cleanup(b.Close)
}

// settingsHook, when set, adjusts what sessions run with: the settings the
// bot starts them with and the policy the worker gives them (sessions take
// the policy from the worker). Set it before newStack.
var settingsHook func(*session.Settings)

// policyHook applies settingsHook to the worker's policy.
func policyHook() func(*session.Policy) {
	hook := settingsHook
	if hook == nil {
		return nil
	}
	return func(p *session.Policy) {
		st := session.Settings{Policy: *p}
		hook(&st)
		*p = st.Policy
	}
}

var alice = chat.User{ID: "U-alice", Name: "alice"}

func (s *stack) thread(name string) chat.Thread {
	return chat.Thread{Platform: "console", Channel: "it", Thread: name}
}

// say sends a chat message as alice.
func (s *stack) say(th chat.Thread, eventID, text string) {
	s.t.Helper()
	s.sayAs(th, alice, eventID, text)
}

func chatMessage(th chat.Thread, eventID, text string) chat.Message {
	return chat.Message{EventID: eventID, Thread: th, User: alice, Text: text}
}

func (s *stack) sayAs(th chat.Thread, u chat.User, eventID, text string) {
	s.t.Helper()
	if err := s.core.HandleMessage(s.ctx, s.poster, chat.Message{EventID: eventID, Thread: th, User: u, Text: text}); err != nil {
		s.t.Fatalf("HandleMessage(%q): %v", text, err)
	}
}

// state queries the session's turn state.
func (s *stack) state(th chat.Thread) session.TurnState {
	s.t.Helper()
	v, err := s.c.QueryWorkflow(s.ctx, th.ID(), "", session.QueryTurnState)
	if err != nil {
		s.t.Fatalf("query turn_state: %v", err)
	}
	var ts session.TurnState
	if err := v.Get(&ts); err != nil {
		s.t.Fatal(err)
	}
	return ts
}

// waitState polls the turn state until cond holds.
func (s *stack) waitState(th chat.Thread, what string, cond func(session.TurnState) bool) session.TurnState {
	s.t.Helper()
	return s.waitStateEvery(th, 50*time.Millisecond, what, cond)
}

// waitStateEvery is waitState with a chosen poll interval (benchmarks poll
// gently so the measurement does not load the server).
func (s *stack) waitStateEvery(th chat.Thread, every time.Duration, what string, cond func(session.TurnState) bool) session.TurnState {
	s.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last session.TurnState
	for time.Now().Before(deadline) {
		v, err := s.c.QueryWorkflow(s.ctx, th.ID(), "", session.QueryTurnState)
		if err == nil {
			var ts session.TurnState // fresh: omitted fields must read as empty
			if err := v.Get(&ts); err == nil {
				last = ts
				if cond(ts) {
					return ts
				}
			}
		}
		time.Sleep(every)
	}
	s.t.Fatalf("timed out waiting for %s; last state: %s", what, dump(last))
	return last
}

func (s *stack) approve(th chat.Thread, callID string, d session.Decision, u chat.User, reason string) error {
	req := session.ApproveRequest{CallID: callID, Decision: d, User: u, Reason: reason}
	session.Sign([]byte(s.cfg.DecisionKey), th.ID(), session.UpdateApprove, &req, time.Now())
	h, err := s.c.UpdateWorkflow(s.ctx, client.UpdateWorkflowOptions{
		WorkflowID: th.ID(), UpdateName: session.UpdateApprove, WaitForStage: client.WorkflowUpdateStageCompleted,
		Args: []any{req},
	})
	if err != nil {
		return err
	}
	return h.Get(s.ctx, nil)
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func shell(cmds ...string) string {
	b, _ := json.Marshal(map[string]any{"commands": cmds})
	return string(b)
}

func done(ts session.TurnState) bool {
	return ts.Status == session.StatusComplete || ts.Status == session.StatusFailed
}

// recPoster is a chat.Poster that records what the core shows, for
// assertions, and lets tests wait for a condition on it.
type recPoster struct {
	mu      sync.Mutex
	changed chan struct{}
	posts   []posted
	texts   []string
	n       int
}

type posted struct {
	Thread chat.Thread
	Ref    string
	Cards  []chat.Card // every version, first is the post
}

func newRecPoster() *recPoster { return &recPoster{changed: make(chan struct{})} }

func (p *recPoster) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *recPoster) Post(_ context.Context, th chat.Thread, c chat.Card) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	ref := fmt.Sprintf("m%d", p.n)
	p.posts = append(p.posts, posted{Thread: th, Ref: ref, Cards: []chat.Card{c}})
	p.notify()
	return ref, nil
}

func (p *recPoster) Edit(_ context.Context, th chat.Thread, ref string, c chat.Card) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.posts {
		if p.posts[i].Ref == ref {
			p.posts[i].Cards = append(p.posts[i].Cards, c)
			p.notify()
			return nil
		}
	}
	return fmt.Errorf("edit of unknown message %s", ref)
}

func (p *recPoster) PostText(_ context.Context, th chat.Thread, md string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.texts = append(p.texts, md)
	p.notify()
	return fmt.Sprintf("m%d", p.n), nil
}

func (p *recPoster) snapshot() ([]posted, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := make([]posted, len(p.posts))
	for i, x := range p.posts {
		ps[i] = posted{Thread: x.Thread, Ref: x.Ref, Cards: append([]chat.Card(nil), x.Cards...)}
	}
	return ps, append([]string(nil), p.texts...)
}

// waitFor blocks until cond holds on what was posted.
func (p *recPoster) waitFor(t testing.TB, what string, cond func(posts []posted, texts []string) bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		posts, texts := p.snapshot()
		if cond(posts, texts) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; posts: %s texts: %q", what, dump(posts), texts)
		}
	}
}

func cardText(c chat.Card) string {
	var b strings.Builder
	b.WriteString(c.Title)
	for _, bl := range c.Blocks {
		b.WriteString("\n" + bl.Text)
		for _, f := range bl.Fields {
			b.WriteString("\n" + f.Label + ": " + f.Value)
		}
		for _, btn := range bl.Buttons {
			b.WriteString("\n[" + btn.Label + "]")
		}
	}
	return b.String()
}
