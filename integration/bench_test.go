package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/local"
	"github.com/sandbot/sandbot/session"
)

// toolLoop answers with one `true` shell call per model request until the
// current turn has n tool results, then with a final answer: a turn of n
// tool calls whose model answers instantly.
func toolLoop(n int) fakeopenai.Responder {
	return func(req fakeopenai.RecordedRequest) fakeopenai.Step {
		results := 0
		for i := len(req.Body.Messages) - 1; i >= 0; i-- {
			m := req.Body.Messages[i]
			if m.Role == "user" {
				break
			}
			if m.Role == "tool" {
				results++
			}
		}
		if results >= n {
			return fakeopenai.FinalStep("done")
		}
		return fakeopenai.ToolCallStep(fmt.Sprintf("call_%d_%d", req.Seq, results), "shell", shell("true"))
	}
}

// noopActivity is the floor's activity: it does nothing.
func noopActivity(context.Context) error { return nil }

// floorWorkflow runs n no-op activities in sequence and returns how long
// that took in workflow time, measured the same way as a session turn.
func floorWorkflow(ctx workflow.Context, n int) (time.Duration, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	start := workflow.Now(ctx)
	for i := 0; i < n; i++ {
		if err := workflow.ExecuteActivity(ctx, noopActivity).Get(ctx, nil); err != nil {
			return 0, err
		}
	}
	return workflow.Now(ctx).Sub(start), nil
}

// workFloor is the second floor: activities that do the same real work as
// a turn's, with none of sandbot's orchestration around them (no state,
// queries, approval checks or snapshot decisions). Its model activity
// makes the same HTTP call to a fake model with the same transcript: the
// messages of the session turn's own model requests, as the session's
// fake recorded them (earlier turns included), replayed in order through
// agent.Activities.Complete. Its exec runs `true` through the same local
// backend, and its last activity fingerprints the workspace as the
// end-of-turn snapshot does (the workspace is unchanged, so nothing is
// written).
type workFloor struct {
	model   *agent.Activities
	backend sandbox.Backend
	handle  sandbox.Handle

	mu   sync.Mutex
	turn [][]session.Message // the messages of each model call to replay
}

// replay sets the model calls the next floor run replays: reqs are the
// session's model requests of one turn, in order.
func (f *workFloor) replay(reqs []fakeopenai.RecordedRequest) {
	turn := make([][]session.Message, len(reqs))
	for i, r := range reqs {
		for _, m := range r.Body.Messages {
			if m.Role == session.RoleSystem {
				continue // Complete adds the system prompt itself
			}
			msg := session.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, session.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			turn[i] = append(turn[i], msg)
		}
	}
	f.mu.Lock()
	f.turn = turn
	f.mu.Unlock()
}

// FloorModel makes the i-th model call of the turn being replayed and
// returns the model's answer, as any workflow that runs an agent must get
// it back: the answer's trip through Temporal is real work, not
// orchestration.
func (f *workFloor) FloorModel(ctx context.Context, i int) (agent.ModelResponse, error) {
	f.mu.Lock()
	var msgs []session.Message
	if i < len(f.turn) {
		msgs = f.turn[i]
	}
	f.mu.Unlock()
	if msgs == nil {
		return agent.ModelResponse{}, fmt.Errorf("floor: no recorded model call %d to replay", i)
	}
	return f.model.Complete(ctx, agent.ModelRequest{Messages: msgs})
}

// FloorExec runs `true` and returns its result, as the session's exec
// activity returns its command's.
func (f *workFloor) FloorExec(ctx context.Context) (sandbox.ExecResult, error) {
	r, err := f.backend.Exec(ctx, f.handle, sandbox.Cmd{Command: "true"})
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	return sandbox.ExecResult{Results: []sandbox.CommandResult{{Command: "true", Result: r}}}, nil
}

// FloorModelDiscard and FloorExecDiscard are the earlier floor's
// activities: the same work, with its result dropped in the activity. The
// benchmark still reports the ratio against them, so the effect of the
// floor's change shows in the same run.
func (f *workFloor) FloorModelDiscard(ctx context.Context, i int) error {
	_, err := f.FloorModel(ctx, i)
	return err
}

func (f *workFloor) FloorExecDiscard(ctx context.Context) error {
	_, err := f.FloorExec(ctx)
	return err
}

func (f *workFloor) FloorFingerprint(ctx context.Context) error {
	_, err := f.backend.(sandbox.Fingerprinter).Fingerprint(ctx, f.handle)
	return err
}

// workFloorWorkflow runs calls rounds of model call + exec, a last model
// call and a fingerprint, as a turn of calls tool calls does, and returns
// the workflow time it took. With discard its activities drop their
// results (the floor before 2026-12-06's second session). With hostQueue
// its sandbox activities (exec, fingerprint) go to that queue, as a
// multi-worker deployment's must go to the worker holding the sandbox;
// its model calls stay on the workflow's queue, as the session's do.
func workFloorWorkflow(ctx workflow.Context, calls int, discard bool, hostQueue string) (time.Duration, error) {
	opts := workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	}
	ctx = workflow.WithActivityOptions(ctx, opts)
	sandboxCtx := ctx
	if hostQueue != "" {
		opts.TaskQueue = hostQueue
		sandboxCtx = workflow.WithActivityOptions(ctx, opts)
	}
	var f *workFloor
	start := workflow.Now(ctx)
	for i := 0; i <= calls; i++ {
		if discard {
			if err := workflow.ExecuteActivity(ctx, f.FloorModelDiscard, i).Get(ctx, nil); err != nil {
				return 0, err
			}
		} else {
			var answer agent.ModelResponse
			if err := workflow.ExecuteActivity(ctx, f.FloorModel, i).Get(ctx, &answer); err != nil {
				return 0, err
			}
		}
		if i == calls {
			break
		}
		if discard {
			if err := workflow.ExecuteActivity(sandboxCtx, f.FloorExecDiscard).Get(ctx, nil); err != nil {
				return 0, err
			}
			continue
		}
		var result sandbox.ExecResult
		if err := workflow.ExecuteActivity(sandboxCtx, f.FloorExec).Get(ctx, &result); err != nil {
			return 0, err
		}
	}
	if err := workflow.ExecuteActivity(sandboxCtx, f.FloorFingerprint).Get(ctx, nil); err != nil {
		return 0, err
	}
	return workflow.Now(ctx).Sub(start), nil
}

// startWorkFloor starts the real-work floor's worker on its own queue,
// with its own fake model (so the turn's model requests stay countable),
// configured as the stack's worker configures its model client, and its
// own local sandbox, and a second worker in this process on the floor's
// host queue (the second result) for the routed floor. Before each run,
// replay the turn's model requests.
func startWorkFloor(b *testing.B, s *stack) (string, string, *workFloor) {
	model := fakeopenai.New()
	b.Cleanup(model.Close)
	model.SetResponder(func(fakeopenai.RecordedRequest) fakeopenai.Step { return fakeopenai.FinalStep("ok") })
	acts, err := agent.NewActivities(agent.Config{BaseURL: model.URL(), APIKey: s.cfg.Model.APIKey, Model: s.cfg.Model.Name,
		Stream: s.cfg.Model.Stream, RequestTimeout: s.cfg.Model.Timeout,
		Window: agent.Window{ContextTokens: s.cfg.Model.ContextTokens, AnswerTokens: s.cfg.Model.AnswerTokens}})
	if err != nil {
		b.Fatal(err)
	}
	lb, err := local.New(local.Options{Root: b.TempDir(), Logger: s.log})
	if err != nil {
		b.Fatal(err)
	}
	h, err := lb.Create(s.ctx, sandbox.Spec{SessionID: "work-floor"})
	if err != nil {
		b.Fatal(err)
	}
	queue := s.cfg.Temporal.TaskQueue + "-work-floor"
	w := worker.New(s.c, queue, worker.Options{})
	w.RegisterWorkflow(workFloorWorkflow)
	f := &workFloor{model: acts, backend: lb, handle: h}
	w.RegisterActivity(f)
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Stop)
	hostQueue := queue + "-host"
	hw := worker.New(s.c, hostQueue, worker.Options{})
	hw.RegisterActivity(f)
	if err := hw.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(hw.Stop)
	return queue, hostQueue, f
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkTurnOverhead compares a session turn of 10 tool calls (instant
// model, command `true`) with a bare workflow running as many no-op
// activities as the turn ran, on the same server in the same run. It runs
// a fixed 25 turns per b.N; use -benchtime=1x.
//
//	go test ./integration -run '^$' -bench TurnOverhead -benchtime=1x
func BenchmarkTurnOverhead(b *testing.B) { byLayout(b, turnOverhead) }

// byLayout runs fn as a sub-benchmark per worker layout: single-host is
// cmd/dev's (sandbox activities share the session queue), host-queue a
// multi-worker deployment's (sandbox activities go to the holding
// worker's own queue).
func byLayout(b *testing.B, fn func(b *testing.B, singleHost bool)) {
	for _, single := range []bool{true, false} {
		name := "host-queue"
		if single {
			name = "single-host"
		}
		b.Run(name, func(b *testing.B) { fn(b, single) })
	}
}

func turnOverhead(b *testing.B, singleHost bool) {
	const calls, turns = 10, 25
	s := newStack(b, func(c *config.Config) {
		c.Session.ApprovalMode = "never"
		c.Sandbox.SingleHost = singleHost
	})
	s.model.SetResponder(toolLoop(calls))
	floorQueue := s.cfg.Temporal.TaskQueue + "-floor"
	fw := worker.New(s.c, floorQueue, worker.Options{})
	fw.RegisterWorkflow(floorWorkflow)
	fw.RegisterActivity(noopActivity)
	if err := fw.Start(); err != nil {
		b.Fatal(err)
	}
	defer fw.Stop()
	workQueue, floorHostQueue, floor := startWorkFloor(b, s)

	th := s.thread(fmt.Sprintf("bench-%v", singleHost))
	// Warm up: the first turn creates the sandbox.
	s.say(th, "warm", "warm up")
	s.waitState(th, "warm-up turn", func(ts session.TurnState) bool { return ts.Turn == 1 && done(ts) })
	before := len(s.model.Requests())

	for n := 0; n < b.N; n++ {
		var turnDur, floorDur, workDur, dropDur, routedDur []time.Duration
		activities := 0
		for i := 0; i < turns; i++ {
			turn := s.state(th).Turn + 1
			if os.Getenv("SANDBOT_BENCH_NO_WATCH") != "" {
				// Diagnostic: no chat watcher polling turn_state.
				sess := chat.NewTemporalSessions(s.c, chat.TemporalOptions{TaskQueue: s.cfg.Temporal.TaskQueue, DecisionKey: []byte(s.cfg.DecisionKey)})
				if _, err := sess.Send(s.ctx, session.SessionInput{Location: th, Owner: alice, Backend: "local", Settings: s.cfg.SessionSettings()},
					session.MessageRequest{EventID: fmt.Sprintf("ev-%d-%d", n, i), User: alice, Text: "go"}); err != nil {
					b.Fatal(err)
				}
			} else {
				s.say(th, fmt.Sprintf("ev-%d-%d", n, i), "go")
			}
			ts := s.waitStateEvery(th, 500*time.Millisecond, "bench turn", func(ts session.TurnState) bool { return ts.Turn == turn && done(ts) })
			if len(ts.ToolCalls) != calls {
				b.Fatalf("turn ran %d tool calls, want %d", len(ts.ToolCalls), calls)
			}
			turnDur = append(turnDur, ts.EndedAt.Sub(ts.StartedAt))
			// Activities this turn ran: every model call, one exec per tool
			// call, and the end-of-turn snapshot.
			reqs := s.model.Requests()
			models := len(reqs)
			activities = models - before + len(ts.ToolCalls) + 1
			floor.replay(reqs[before:models])
			before = models

			run, err := s.c.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{TaskQueue: floorQueue}, floorWorkflow, activities)
			if err != nil {
				b.Fatal(err)
			}
			var d time.Duration
			if err := run.Get(s.ctx, &d); err != nil {
				b.Fatal(err)
			}
			floorDur = append(floorDur, d)

			kinds := []string{"work", "discard"}
			if !singleHost {
				kinds = append(kinds, "routed")
			}
			for _, kind := range kinds {
				hostQueue := ""
				if kind == "routed" {
					hostQueue = floorHostQueue
				}
				run, err = s.c.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{TaskQueue: workQueue}, workFloorWorkflow, calls, kind == "discard", hostQueue)
				if err != nil {
					b.Fatal(err)
				}
				if err := run.Get(s.ctx, &d); err != nil {
					b.Fatal(err)
				}
				switch kind {
				case "discard":
					dropDur = append(dropDur, d)
				case "routed":
					routedDur = append(routedDur, d)
				default:
					workDur = append(workDur, d)
				}
			}
		}
		ratios := make([]time.Duration, turns)
		workRatios := make([]time.Duration, turns)
		dropRatios := make([]time.Duration, turns)
		for i := range turnDur {
			dropRatios[i] = time.Duration(float64(turnDur[i]) / float64(dropDur[i]) * 1000)
			// Ratios scaled by 1000 to reuse the duration median.
			ratios[i] = time.Duration(float64(turnDur[i]) / float64(floorDur[i]) * 1000)
			workRatios[i] = time.Duration(float64(turnDur[i]) / float64(workDur[i]) * 1000)
		}
		mt, mf, mr := median(turnDur), median(floorDur), float64(median(ratios))/1000
		mw, mwr := median(workDur), float64(median(workRatios))/1000
		md, mdr := median(dropDur), float64(median(dropRatios))/1000
		b.ReportMetric(float64(mt.Microseconds())/1000, "ms/turn")
		b.ReportMetric(float64(mf.Microseconds())/1000, "ms/floor")
		b.ReportMetric(mr, "median-ratio")
		b.ReportMetric(float64(mw.Microseconds())/1000, "ms/work-floor")
		b.ReportMetric(mwr, "median-work-ratio")
		b.ReportMetric(mdr, "median-discard-ratio")
		b.ReportMetric(float64(activities), "activities/turn")
		b.Logf("%d turns of %d tool calls: median turn %s, median floor (%d no-op activities) %s, median ratio %.2f; median real-work floor %s, median ratio %.2f; the same floor dropping its results %s, median ratio %.2f",
			turns, calls, mt, activities, mf, mr, mw, mwr, md, mdr)
		if len(routedDur) == turns {
			routedRatios := make([]time.Duration, turns)
			for i := range turnDur {
				routedRatios[i] = time.Duration(float64(turnDur[i]) / float64(routedDur[i]) * 1000)
			}
			mrt, mrr := median(routedDur), float64(median(routedRatios))/1000
			b.ReportMetric(mrr, "median-routed-work-ratio")
			b.Logf("the real-work floor with its sandbox activities on a host queue, as this layout's are: %s, median ratio %.3f", mrt, mrr)
		}
	}
}

// BenchmarkIdleSessionsMemory starts a worker process, creates 1,000
// sessions that each finish one turn and go idle, and reports the worker's
// resident memory. Use -benchtime=1x.
//
//	go test ./integration -run '^$' -bench IdleSessionsMemory -benchtime=1x
func BenchmarkIdleSessionsMemory(b *testing.B) {
	const sessions = 1000
	bin := buildWorkerTB(b)
	s := newStack(b, func(c *config.Config) { c.Session.ApprovalMode = "never" })
	s.worker.Stop()
	s.model.SetResponder(func(fakeopenai.RecordedRequest) fakeopenai.Step { return fakeopenai.FinalStep("ok") })
	proc := exec.Command(bin)
	proc.Env = s.workerProcEnv("SANDBOT_LOG_LEVEL=error")
	if err := proc.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = proc.Process.Kill(); _ = proc.Wait() }()
	base := rssKB(b, proc.Process.Pid)

	for n := 0; n < b.N; n++ {
		sem := make(chan struct{}, 32)
		errs := make(chan error, sessions)
		for i := 0; i < sessions; i++ {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				th := s.thread(fmt.Sprintf("idle-%d-%d", n, i))
				errs <- s.core.HandleMessage(s.ctx, s.poster, chatMessage(th, fmt.Sprintf("e-%d-%d", n, i), "hello"))
			}()
		}
		for i := 0; i < sessions; i++ {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		// Wait until every session has finished its turn.
		for i := 0; i < sessions; i++ {
			th := s.thread(fmt.Sprintf("idle-%d-%d", n, i))
			s.waitState(th, "idle", done)
		}
		rss := rssKB(b, proc.Process.Pid)
		b.ReportMetric(float64(rss)/1024, "MB-rss")
		b.ReportMetric(float64(base)/1024, "MB-rss-at-start")
		b.Logf("worker RSS with %d idle sessions: %.1f MB (at start %.1f MB)", sessions, float64(rss)/1024, float64(base)/1024)
	}
}

func rssKB(tb testing.TB, pid int) int {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				tb.Fatal(err)
			}
			return kb
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}
