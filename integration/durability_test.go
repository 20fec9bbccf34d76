package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/devserver"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/workerapp"
	"github.com/sandbot/sandbot/session"
)

// waitFile waits until the file exists with content satisfying cond.
func waitFile(t *testing.T, path string, cond func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && cond(string(b)) {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", path)
	return ""
}

func findWorkspaceFile(t *testing.T, s *stack, name string) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(s.cfg.Sandbox.LocalRoot, "*", name)); len(m) > 0 {
			return m[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s in any workspace", name)
	return ""
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	// A zombie still answers kill -0; it is dead for our purposes.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

func TestStopMidCommand(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Session.ApprovalMode = "never" })
	th := s.thread("stop")
	s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo $$ > pid; sleep 3017; echo finished > after")),
		fakeopenai.FinalStep("next turn answer"),
	)
	s.say(th, "ev-1", "run the long thing")
	pidFile := findWorkspaceFile(t, s, "pid")
	pidText := waitFile(t, pidFile, func(s string) bool { return strings.HasSuffix(s, "\n") })
	if _, err := strconv.Atoi(strings.TrimSpace(pidText)); err != nil {
		t.Fatal(err)
	}
	// The PID the command printed is its sandbox's own; find the sleep
	// on the host by its argument.
	var pid int
	for deadline := time.Now().Add(waitTimeout); pid == 0; time.Sleep(20 * time.Millisecond) {
		if pids := hostProcsWith(t, "3017"); len(pids) > 0 {
			pid = pids[0]
		} else if time.Now().After(deadline) {
			t.Fatal("the command's sleep never started")
		}
	}
	s.say(th, "ev-stop", "/stop")
	end := s.waitState(th, "stopped turn", done)
	if !end.Stopped || end.ToolCalls[0].Status != session.CallFailed {
		t.Fatalf("state after stop: %s", dump(end))
	}
	if alive(pid) {
		t.Fatalf("the command's sleep (host pid %d) survived /stop", pid)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(pidFile), "after")); err == nil {
		t.Fatal("the stopped command ran to completion")
	}
	// The model hears about the interruption on the next turn.
	s.say(th, "ev-2", "what happened?")
	s.waitState(th, "turn 2", func(ts session.TurnState) bool { return ts.Turn == 2 && done(ts) })
	last, _ := s.model.LastRequest()
	if body := dump(last); !strings.Contains(body, "interrupted") {
		t.Fatalf("the model was not told about the interruption: %s", body)
	}
	recordHistory(t, s, th.ID(), "stop")
}

// buildWorker compiles cmd/worker for a test.
func buildWorker(t *testing.T) string { return buildWorkerTB(t) }

func buildWorkerTB(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sandbot-worker")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/worker")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build cmd/worker: %v\n%s", err, out)
	}
	return bin
}

func TestWorkerKilledMidCommand(t *testing.T) {
	bin := buildWorker(t)
	s := newStack(t, func(c *config.Config) { c.Session.ApprovalMode = "never" })
	// Replace the in-process worker by a real worker process.
	s.worker.Stop()
	proc := exec.Command(bin)
	proc.Env = append(os.Environ(),
		"SANDBOT_TEMPORAL_ADDRESS="+srv.HostPort(),
		"SANDBOT_TEMPORAL_NAMESPACE="+srv.Namespace(),
		"SANDBOT_TEMPORAL_TASK_QUEUE="+s.cfg.Temporal.TaskQueue,
		"SANDBOT_MODEL_BASE_URL="+s.cfg.Model.BaseURL,
		"SANDBOT_MODEL_NAME="+s.cfg.Model.Name,
		"SANDBOT_SANDBOX_LOCAL_ROOT="+s.cfg.Sandbox.LocalRoot,
		"SANDBOT_SANDBOX_SNAPSHOT_URL="+s.cfg.Sandbox.SnapshotURL,
		"SANDBOT_SANDBOX_HOST_ID="+s.cfg.Sandbox.HostID,
		"SANDBOT_SESSION_EXEC_HEARTBEAT=2s",
		// Sessions take the policy from the worker, so the worker process
		// gets the stack's approval mode.
		"SANDBOT_SESSION_APPROVAL_MODE="+s.cfg.Session.ApprovalMode,
		"SANDBOT_DECISION_KEY="+s.cfg.DecisionKey,
		"SANDBOT_LOG_LEVEL=warn",
	)
	out, err := os.CreateTemp(t.TempDir(), "worker-log")
	if err != nil {
		t.Fatal(err)
	}
	proc.Stdout, proc.Stderr = out, out
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })

	th := s.thread("killed")
	s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo run >> count; sleep 300")),
		fakeopenai.ToolCallStep("c2", "shell", shell("cat count")),
		fakeopenai.FinalStep("recovered"),
	)
	s.say(th, "ev-1", "count once")
	count := findWorkspaceFile(t, s, "count")
	waitFile(t, count, func(s string) bool { return s == "run\n" })
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()

	// A new worker on the same host finishes the turn.
	s.startWorker()
	end := s.waitState(th, "turn end after worker death", done)
	if end.Status != session.StatusComplete || end.FinalText != "recovered" {
		t.Fatalf("end: %s", dump(end))
	}
	c1 := end.ToolCalls[0]
	if c1.Status != session.CallFailed || !strings.Contains(c1.Error, "interrupted") {
		t.Fatalf("c1 should be reported interrupted: %s", dump(c1))
	}
	if got, _ := os.ReadFile(count); string(got) != "run\n" {
		t.Fatalf("the interrupted command ran again: count = %q", got)
	}
	if !strings.Contains(end.ToolCalls[1].Output, "run") {
		t.Fatalf("the next command should run on the new worker: %s", dump(end.ToolCalls[1]))
	}
}

func TestContinueAsNewKeepsState(t *testing.T) {
	// Force continue-as-new at every turn boundary.
	settingsHook = func(st *session.Settings) { st.HistoryLimitBytes = 1 }
	defer func() { settingsHook = nil }()
	s := newStack(t, func(c *config.Config) { c.Session.ApprovalMode = "never" })
	th := s.thread("can")
	const turns = 5
	for i := 1; i <= turns; i++ {
		s.model.Push(
			fakeopenai.ToolCallStep(fmt.Sprintf("c%d", i), "shell", shell(fmt.Sprintf("echo %d >> turns.txt", i))),
			fakeopenai.FinalStep(fmt.Sprintf("answer %d", i)),
		)
		s.say(th, fmt.Sprintf("ev-%d", i), fmt.Sprintf("turn %d please", i))
		s.waitState(th, fmt.Sprintf("turn %d", i), func(ts session.TurnState) bool { return ts.Turn == i && done(ts) })
	}
	info := s.info(th)
	if info.Runs < turns || info.Turns != turns {
		t.Fatalf("want >= %d runs and %d turns, got %s", turns, turns, dump(info))
	}
	v, err := s.c.QueryWorkflow(s.ctx, th.ID(), "", session.QueryHistory, session.HistoryRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var hist []session.HistoryEntry
	if err := v.Get(&hist); err != nil {
		t.Fatal(err)
	}
	joined := dump(hist)
	for i := 1; i <= turns; i++ {
		if !strings.Contains(joined, fmt.Sprintf("turn %d please", i)) || !strings.Contains(joined, fmt.Sprintf("answer %d", i)) {
			t.Fatalf("history lost turn %d: %s", i, joined)
		}
	}
	got, _ := os.ReadFile(findWorkspaceFile(t, s, "turns.txt"))
	if string(got) != "1\n2\n3\n4\n5\n" {
		t.Fatalf("workspace across runs: %q", got)
	}
	// Dedupe survives continue-as-new.
	s.say(th, "ev-1", "turn 1 please")
	if ts := s.state(th); ts.Turn != turns || ts.Queued != 0 {
		t.Fatalf("an old event started a turn after continue-as-new: %s", dump(ts))
	}
	recordHistory(t, s, th.ID(), "continue-as-new")
}

func TestDevServerRestartKeepsSession(t *testing.T) {
	db := filepath.Join(t.TempDir(), "temporal.db")
	ctx := context.Background()
	start := func() *devserver.Server {
		s, err := devserver.Start(ctx, devserver.Options{DBPath: db, SearchAttributes: session.SearchAttributeTypes()})
		if err != nil {
			t.Fatalf("start server: %v", err)
		}
		return s
	}
	dir := t.TempDir()
	model := fakeopenai.New()
	defer model.Close()
	cfg := config.Load()
	cfg.EnsureDecisionKey()
	cfg.Model.BaseURL, cfg.Model.Name = model.URL(), "fake"
	cfg.Sandbox.LocalRoot = filepath.Join(dir, "ws")
	cfg.Sandbox.SnapshotURL = "file://" + filepath.Join(dir, "snap")
	cfg.Session.ApprovalMode = "never"
	th := chat.Thread{Platform: "console", Channel: "local", Thread: "restart"}

	run := func(s *devserver.Server, eventID, text string, turn int) session.TurnState {
		c, err := s.NewClient(ctx, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		w, err := workerapp.Start(ctx, c, cfg, workerapp.Options{}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		st := &stack{t: t, ctx: ctx, c: c, cfg: cfg, model: model, log: testLogger(t), poster: newRecPoster()}
		st.startCore()
		st.say(th, eventID, text)
		return st.waitState(th, "turn end", func(ts session.TurnState) bool { return ts.Turn == turn && done(ts) })
	}

	s1 := start()
	model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("echo remembered > note")), fakeopenai.FinalStep("noted"))
	run(s1, "ev-1", "remember this", 1)
	if err := s1.Stop(); err != nil {
		t.Fatal(err)
	}

	s2 := start()
	defer s2.Stop()
	model.Push(fakeopenai.ToolCallStep("c2", "shell", shell("cat note")), fakeopenai.FinalStep("still here"))
	end := run(s2, "ev-2", "what did I say?", 2)
	if end.FinalText != "still here" || !strings.Contains(end.ToolCalls[0].Output, "remembered") {
		t.Fatalf("after restart: %s", dump(end))
	}
	last, _ := model.LastRequest()
	if !strings.Contains(dump(last), "remember this") {
		t.Fatal("the transcript did not survive the restart")
	}
}

func TestSecretsNeverReachTheSandbox(t *testing.T) {
	const secret = "sk-live-DO-NOT-LEAK-4242"
	t.Setenv("SANDBOT_MODEL_API_KEY", secret)
	t.Setenv("OPENAI_API_KEY", secret)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	s := newStack(t, func(c *config.Config) {
		c.Session.ApprovalMode = "never"
		c.Model.APIKey = secret
	})
	th := s.thread("secrets")
	s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("env", "cat /proc/self/environ | tr '\\0' '\\n'", "env > env.txt")),
		fakeopenai.FinalStep("checked"),
	)
	s.say(th, "ev-1", "print your environment")
	end := s.waitState(th, "turn end", done)
	if end.Status != session.StatusComplete {
		t.Fatalf("turn: %s", dump(end))
	}
	envFile, err := os.ReadFile(findWorkspaceFile(t, s, "env.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(envFile) == 0 || !strings.Contains(string(envFile), "PATH=") {
		t.Fatalf("env.txt should hold the sandbox environment, got %q", envFile)
	}
	// The model was still authenticated with the key...
	first := s.model.Requests()[0]
	if tok, _ := first.BearerToken(); tok != secret {
		t.Fatalf("model request token = %q", tok)
	}
	// ...but the key is nowhere in the sandbox, the history or the chat.
	if strings.Contains(string(envFile), secret) || strings.Contains(dump(end), secret) {
		t.Fatal("secret reached the sandbox")
	}
	iter := s.c.GetWorkflowHistory(s.ctx, th.ID(), "", false, 0)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(ev.String(), secret) {
			t.Fatalf("secret in workflow history event %d (%s)", ev.GetEventId(), ev.GetEventType())
		}
	}
	posts, texts := s.poster.snapshot()
	if strings.Contains(dump(posts)+strings.Join(texts, ""), secret) {
		t.Fatal("secret in a chat message")
	}
}
