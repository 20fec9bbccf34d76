package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// historyBytes sums the history size of every run of a session.
func historyBytes(t testing.TB, ctx context.Context, c client.Client, workflowID string) int64 {
	t.Helper()
	var total int64
	runID := ""
	for {
		d, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
		if err != nil {
			t.Fatalf("describe %s %s: %v", workflowID, runID, err)
		}
		info := d.GetWorkflowExecutionInfo()
		total += info.GetHistorySizeBytes()
		iter := c.GetWorkflowHistory(ctx, workflowID, info.GetExecution().GetRunId(), false, 0)
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		prev := ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if prev == "" {
			return total
		}
		runID = prev
	}
}

// bigCalls are n tool calls that each print size bytes, then a final answer.
func bigCalls(prefix string, n, size int) []fakeopenai.Step {
	var steps []fakeopenai.Step
	for i := range n {
		steps = append(steps, fakeopenai.ToolCallStep(fmt.Sprintf("%s-%d", prefix, i), "shell",
			shell(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' %c", size, 'a'+i%26))))
	}
	return append(steps, fakeopenai.FinalStep("done"))
}

// Durable history grows with the work, not with its square: each tool
// output is stored about once, and a model call's input is a reference to
// the transcript stored at the previous call plus what is new. Before,
// one turn of 30 calls printing 12 KB each wrote 7.2 MB of history.
func TestHistoryIsLinearInTheWork(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals, func(c *config.Config) { c.Session.MaxToolCalls = 100 })
	one := e.thread("history-one-turn")
	e.turn(one, 1, "thirty big calls", bigCalls("big", 30, 12000)...)
	oneTurn := historyBytes(t, e.ctx, e.c, one.ID())

	ten := e.thread("history-ten-turns")
	for n := 1; n <= 10; n++ {
		e.turn(ten, n, fmt.Sprint("ten big calls, turn ", n), bigCalls(fmt.Sprint("t", n), 10, 12000)...)
	}
	tenTurns := historyBytes(t, e.ctx, e.c, ten.ID())
	t.Logf("history: 1 turn x 30 calls x 12 KB = %d bytes; 10 turns x 10 calls x 12 KB = %d bytes", oneTurn, tenTurns)
	if oneTurn > 1_500_000 {
		t.Errorf("one turn of 30 calls of 12 KB wrote %d bytes of history, want under 1.5 MB", oneTurn)
	}
	// 100 calls against 30: linear growth keeps the bytes per call about
	// the same (the ten turns add per-turn work: snapshots, messages).
	perCallOne, perCallTen := float64(oneTurn)/30, float64(tenTurns)/100
	if perCallTen > 1.5*perCallOne {
		t.Errorf("history per call grew from %.0f (30 calls) to %.0f bytes (100 calls over 10 turns): not linear", perCallOne, perCallTen)
	}
}

// The stored transcript holds up when the worker that makes the next call
// has never seen it (a restart, another host), and /destroy deletes it.
func TestStoredTranscriptSurvivesAWorkerRestartAndGoesWithDestroy(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals)
	th := e.thread("transcript-restart")
	e.turn(th, 1, "the first request, to remember",
		fakeopenai.ToolCallStep("r1", "shell", shell("echo one")),
		fakeopenai.FinalStep("first answer"))
	chunks := func() []string {
		dir := filepath.Join(strings.TrimPrefix(e.cfg.Sandbox.SnapshotURL, "file://"), sandbox.SessionPrefix(th.ID()), "transcript")
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		return files
	}
	if len(chunks()) == 0 {
		t.Fatal("the model calls stored no transcript")
	}
	// A new worker process: nothing cached.
	e.worker.Stop()
	e.startWorker()
	e.turn(th, 2, "and the second",
		fakeopenai.ToolCallStep("r2", "shell", shell("echo two")),
		fakeopenai.FinalStep("second answer"))
	last, _ := e.model.LastRequest()
	var got []string
	for _, m := range last.Body.Messages {
		got = append(got, m.Content)
	}
	joined := strings.Join(got, "\n")
	for _, want := range []string{"the first request, to remember", "first answer", "and the second"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("after the restart the model did not get %q: %q", want, got)
		}
	}
	if r := e.command(th, "/destroy confirm"); !strings.Contains(r, "Session destroyed") {
		t.Fatalf("/destroy confirm replied %q", r)
	}
	var res session.SessionResult
	if err := e.c.GetWorkflow(e.ctx, th.ID(), "").Get(e.ctx, &res); err != nil || !res.Destroyed {
		t.Fatalf("workflow result %+v, %v", res, err)
	}
	if left := regularFiles(t, strings.TrimPrefix(e.cfg.Sandbox.SnapshotURL, "file://")); len(left) != 0 {
		t.Fatalf("/destroy left objects in the store: %q", left)
	}
}

// A stored transcript deleted by hand costs the session nothing but a
// notice: the call goes out with the whole transcript.
func TestMissingStoredTranscript(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals)
	th := e.thread("transcript-missing")
	e.turn(th, 1, "remember me",
		fakeopenai.FinalStep("remembered"))
	dir := filepath.Join(strings.TrimPrefix(e.cfg.Sandbox.SnapshotURL, "file://"), sandbox.SessionPrefix(th.ID()), "transcript")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// Without a cache, as after a restart.
	e.worker.Stop()
	e.startWorker()
	ts := e.turn(th, 2, "still there?", fakeopenai.FinalStep("yes"))
	if ts.FinalText != "yes" || !hasNotice(ts, "stored copy of this conversation was missing") {
		t.Fatalf("turn 2: %s", dump(ts))
	}
	last, _ := e.model.LastRequest()
	if !strings.Contains(fmt.Sprint(last.Body.Messages), "remember me") {
		t.Fatalf("the model lost the first message: %v", last.Body.Messages)
	}
}

// What the model reports each call costs is added up per turn and per
// session, and /status shows it.
func TestUsageIsRecordedAndShown(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Session.ApprovalMode = "never" })
	th := s.thread("usage")
	s.model.Push(fakeopenai.ToolCallStep("u1", "shell", shell("true")), fakeopenai.FinalStep("one"))
	s.say(th, "ev-1", "first")
	s.waitState(th, "turn 1", func(ts session.TurnState) bool { return ts.Turn == 1 && done(ts) })
	s.model.Push(fakeopenai.FinalStep("two"))
	s.say(th, "ev-2", "second")
	last := s.waitState(th, "turn 2", func(ts session.TurnState) bool { return ts.Turn == 2 && done(ts) })
	if last.Usage.Calls != 1 || last.Usage.PromptTokens == 0 || last.Usage.CompletionTokens == 0 {
		t.Fatalf("turn 2's usage: %+v", last.Usage)
	}
	info := s.info(th)
	if info.Usage.Calls != 3 || info.Usage.PromptTokens <= last.Usage.PromptTokens {
		t.Fatalf("the session's usage after 3 model calls: %+v (last turn %+v)", info.Usage, last.Usage)
	}
	s.say(th, "ev-3", "/status")
	var status string
	s.poster.waitFor(t, "the /status reply", func(posts []posted, _ []string) bool {
		for _, p := range posts {
			for _, c := range p.Cards {
				if x := cardText(c); strings.Contains(x, "Tokens") {
					status = x
				}
			}
		}
		return status != ""
	})
	if !strings.Contains(status, "(3 calls)") || !strings.Contains(status, "last turn") {
		t.Fatalf("/status reads %q", status)
	}
}

// compactingModel answers a turn with one shell call printing size bytes
// and then an answer naming the turn's request; asked to compact, it
// writes a summary that keeps every request it can see (as the compaction
// prompt asks), including those of an earlier summary.
func compactingModel(size int) fakeopenai.Responder {
	return func(req fakeopenai.RecordedRequest) fakeopenai.Step {
		msgs := req.Body.Messages
		last := msgs[len(msgs)-1]
		if last.Role == "user" && strings.HasPrefix(last.Content, "The conversation above no longer fits") {
			var kept []string
			for _, m := range msgs[:len(msgs)-1] {
				for _, line := range strings.Split(m.Content, "\n") {
					if strings.HasPrefix(line, "request ") {
						kept = append(kept, line)
					}
				}
			}
			return fakeopenai.FinalStep(strings.Join(kept, "\n"))
		}
		if last.Role == "tool" {
			return fakeopenai.FinalStep("answered")
		}
		return fakeopenai.ToolCallStep(fmt.Sprintf("c%d", req.Seq), "shell", shell(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' z", size)))
	}
}

// A long conversation with large outputs never sends the model more than
// its window, keeps the user's first request in what it sends (in a
// summary once it has been compacted), and compacts a bounded number of
// times: once per window's worth of conversation, not per call.
func TestLongConversationCompacts(t *testing.T) {
	const window, answer = 8192, 1024
	e := newThreadEnv(t, false, noApprovals, func(c *config.Config) {
		c.Model.ContextTokens, c.Model.AnswerTokens = window, answer
	})
	e.model.SetResponder(compactingModel(3000))
	th := e.thread("long-conversation")
	const turns = 200
	for n := 1; n <= turns; n++ {
		e.send(th, alice, fmt.Sprintf("ev-long-%d", n), fmt.Sprintf("request %d: look at part %d", n, n))
		e.waitState(th, fmt.Sprint("turn ", n), func(ts session.TurnState) bool { return ts.Turn == n && done(ts) })
	}
	compactions := 0
	for _, r := range e.model.Requests() {
		var msgs []session.Message
		for _, m := range r.Body.Messages {
			msgs = append(msgs, session.Message{Role: m.Role, Content: m.Content})
		}
		if got := agent.TranscriptTokens(msgs); got > window-answer {
			t.Fatalf("request %d sent about %d tokens; the window leaves %d", r.Seq, got, window-answer)
		}
		if last := msgs[len(msgs)-1]; strings.HasPrefix(last.Content, "The conversation above no longer fits") {
			compactions++
			continue
		}
		if !strings.Contains(fmt.Sprint(msgs), "request 1: look at part 1") {
			for _, m := range msgs {
				t.Logf("%s: %.100q", m.Role, m.Content)
			}
			t.Fatalf("request %d does not carry the user's first request", r.Seq)
		}
	}
	t.Logf("%d turns, %d model requests, %d compactions", turns, len(e.model.Requests()), compactions)
	if compactions == 0 || compactions > turns/5 {
		t.Fatalf("%d compactions over %d turns", compactions, turns)
	}
}

// /compact summarises the older conversation at once; the model then
// gets the summary instead of the old turns.
func TestCompactCommand(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals)
	e.model.SetResponder(compactingModel(100))
	th := e.thread("compact-command")
	for n := 1; n <= 3; n++ {
		e.send(th, alice, fmt.Sprintf("ev-cc-%d", n), fmt.Sprintf("request %d: look at part %d", n, n))
		e.waitState(th, fmt.Sprint("turn ", n), func(ts session.TurnState) bool { return ts.Turn == n && done(ts) })
	}
	if r := e.command(th, "/compact"); !strings.Contains(r, "Compacted the older conversation") {
		t.Fatalf("/compact replied %q", r)
	}
	e.send(th, alice, "ev-cc-4", "request 4: and now?")
	e.waitState(th, "turn 4", func(ts session.TurnState) bool { return ts.Turn == 4 && done(ts) })
	var first []string
	for _, r := range e.model.Requests() {
		if r.Body.Messages[len(r.Body.Messages)-1].Content == "request 4: and now?" {
			for _, m := range r.Body.Messages[1:] {
				first = append(first, m.Content)
			}
			break
		}
	}
	if len(first) == 0 || !strings.HasPrefix(first[0], agent.CompactNotePrefix) || !strings.Contains(first[0], "request 1: look at part 1") {
		t.Fatalf("after /compact the model got %q", first)
	}
	if strings.Contains(strings.Join(first[1:], "\n"), "request 1: look at part 1") {
		t.Fatal("turn 1 is still there beside its summary")
	}
	if r := e.command(e.thread("compact-fresh"), "/compact"); !strings.Contains(r, "no running session") {
		t.Fatalf("/compact on a thread without a session replied %q", r)
	}
}

// A model whose window is smaller than the worker was told refuses the
// conversation as too long: the session compacts and asks again, and the
// turn does not fail.
func TestContextTooLongCompactsAndRetries(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals)
	base := compactingModel(100)
	var refused atomic.Int32
	e.model.SetResponder(func(req fakeopenai.RecordedRequest) fakeopenai.Step {
		msgs := req.Body.Messages
		last := msgs[len(msgs)-1]
		if last.Role == "user" && last.Content == "request 4: the long one" && refused.CompareAndSwap(0, 1) {
			return fakeopenai.ErrorStep(413, "This model's maximum context length is exceeded")
		}
		return base(req)
	})
	th := e.thread("too-long")
	for n := 1; n <= 4; n++ {
		text := fmt.Sprintf("request %d: look at part %d", n, n)
		if n == 4 {
			text = "request 4: the long one"
		}
		e.send(th, alice, fmt.Sprintf("ev-tl-%d", n), text)
		ts := e.waitState(th, fmt.Sprint("turn ", n), func(ts session.TurnState) bool { return ts.Turn == n && done(ts) })
		if n == 4 {
			if ts.Status != session.StatusComplete || !hasNotice(ts, "Compacted turns", "the model refused the conversation as too long") {
				t.Fatalf("turn 4 after the refusal: %s", dump(ts))
			}
		}
	}
	if n := refused.Load(); n != 1 {
		t.Fatalf("the model refused %d times", n)
	}
	reqs := e.model.Requests()
	last := reqs[len(reqs)-1]
	if first := last.Body.Messages[1].Content; !strings.HasPrefix(first, agent.CompactNotePrefix) || !strings.Contains(first, "request 1: look at part 1") {
		t.Fatalf("the retried call did not start from the summary: %.120q", first)
	}
}
