package integration

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// /fork through the chat core: a new thread, a new session with a copy of
// the conversation and of the workspace under its own snapshot prefix,
// optionally on another backend.

// fork runs /fork in src and returns the new thread once its first
// message has been posted there.
func (e *threadEnv) fork(src chat.Thread, command string, atTurn int, backend string) chat.Thread {
	e.t.Helper()
	r := e.command(src, command)
	if !strings.Contains(r, "Forked at turn "+strconv.Itoa(atTurn)+" into") || !strings.Contains(r, "backend **"+backend+"**") {
		e.t.Fatalf("%s replied %q", command, r)
	}
	th := e.p.lastOpened(e.t)
	first := e.p.waitText(e.t, th, "Forked from", "at turn "+strconv.Itoa(atTurn), "backend **"+backend+"**")
	if all := e.p.textsIn(th); all[0] != first {
		e.t.Fatalf("the fork's thread should open with where it came from; it has %q", all)
	}
	return th
}

func TestForkIsolation(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals)
	src := e.thread("source")
	e.turn(src, 1, "make the base file",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo base > shared.txt")),
		fakeopenai.FinalStep("base made"))

	fork := e.fork(src, `/fork "iso test"`, 1, "local")
	si, fi := e.info(src), e.info(fork)
	if fi.Parent != src.ID() || fi.ForkedAtTurn != 1 || fi.Title != "iso test" || fi.Backend != "local" {
		t.Fatalf("fork lineage: %s", dump(fi))
	}
	if si.Parent != "" || si.Snapshot == "" || !strings.HasPrefix(si.Snapshot, sandbox.SessionPrefix(src.ID())) {
		t.Fatalf("source info: %s", dump(si))
	}
	if !strings.HasPrefix(fi.Snapshot, sandbox.SessionPrefix(fork.ID())) || !e.snapshotExists(fi.Snapshot) {
		t.Fatalf("the fork's snapshot %q must be its own copy under %q", fi.Snapshot, sandbox.SessionPrefix(fork.ID()))
	}

	// Each side changes the file its own way.
	ts := e.turn(src, 2, "change it in the source",
		fakeopenai.ToolCallStep("c2", "shell", shell("echo source-change >> shared.txt", "cat shared.txt")),
		fakeopenai.FinalStep("source changed"))
	if got := cmdOut(t, onlyCall(t, ts), "cat shared.txt"); got != "base\nsource-change" {
		t.Fatalf("source after its change: %q", got)
	}
	ts = e.turn(fork, 1, "change it in the fork",
		fakeopenai.ToolCallStep("f1", "shell", shell("cat shared.txt", "echo fork-change >> shared.txt", "cat ./shared.txt")),
		fakeopenai.FinalStep("fork changed"))
	c := onlyCall(t, ts)
	if got := cmdOut(t, c, "cat shared.txt"); got != "base" {
		t.Fatalf("the fork sees the source's later change: %q", got)
	}
	if got := cmdOut(t, c, "cat ./shared.txt"); got != "base\nfork-change" {
		t.Fatalf("fork after its change: %q", got)
	}
	// The fork got the conversation up to the fork point, not after it.
	var forkReq string
	for _, r := range e.model.Requests() {
		if body := dump(r.Body.Messages); strings.Contains(body, "change it in the fork") {
			forkReq = body
			break
		}
	}
	if !strings.Contains(forkReq, "make the base file") || strings.Contains(forkReq, "change it in the source") {
		t.Fatalf("the fork's conversation should hold the source's turn 1 and nothing later: %s", forkReq)
	}

	// And neither sees the other's change afterwards.
	ts = e.turn(src, 3, "look again",
		fakeopenai.ToolCallStep("c3", "shell", shell("cat shared.txt")),
		fakeopenai.FinalStep("looked"))
	if got := cmdOut(t, onlyCall(t, ts), "cat shared.txt"); got != "base\nsource-change" {
		t.Fatalf("the source sees the fork's change: %q", got)
	}
	ts = e.turn(fork, 2, "look again",
		fakeopenai.ToolCallStep("f2", "shell", shell("cat shared.txt")),
		fakeopenai.FinalStep("looked"))
	if got := cmdOut(t, onlyCall(t, ts), "cat shared.txt"); got != "base\nfork-change" {
		t.Fatalf("the fork sees the source's change: %q", got)
	}
	si, fi = e.info(src), e.info(fork)
	if !strings.HasPrefix(si.Snapshot, sandbox.SessionPrefix(src.ID())) || !strings.HasPrefix(fi.Snapshot, sandbox.SessionPrefix(fork.ID())) {
		t.Fatalf("snapshots left their session's prefix: source %q, fork %q", si.Snapshot, fi.Snapshot)
	}
	if got := e.state(src); got.Backend != "local" || got.Turn != 3 {
		t.Fatalf("the source should go on unchanged: %s", dump(got))
	}
	recordHistory(t, e.stack, src.ID(), "fork-source")
	recordHistory(t, e.stack, fork.ID(), "fork-child")
}

func TestForkOntoDocker(t *testing.T) {
	e := newThreadEnv(t, true, noApprovals)
	src := e.thread("source")
	e.turn(src, 1, "make files",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo parent-file > shared.txt", "mkdir -p sub && echo nested > sub/n.txt")),
		fakeopenai.FinalStep("made"))

	fork := e.fork(src, `/fork "on docker" docker`, 1, "docker")
	if fi := e.info(fork); fi.Backend != "docker" || fi.Parent != src.ID() || fi.ForkedAtTurn != 1 {
		t.Fatalf("fork info: %s", dump(fi))
	}
	ts := e.turn(fork, 1, "where am I?",
		fakeopenai.ToolCallStep("f1", "shell", shell("cat shared.txt", "cat sub/n.txt", "pwd", "id -u", "echo fork-only > fork.txt")),
		fakeopenai.FinalStep("in a container"))
	c := onlyCall(t, ts)
	if ts.Backend != "docker" || cmdOut(t, c, "pwd") != "/workspace" || cmdOut(t, c, "id -u") != "1000" {
		t.Fatalf("the fork should run in a container: %s", dump(ts))
	}
	if a, b := cmdOut(t, c, "cat shared.txt"), cmdOut(t, c, "cat sub/n.txt"); a != "parent-file" || b != "nested" {
		t.Fatalf("the fork's container lacks the parent's files: %q, %q", a, b)
	}
	ctr := e.containerOf(fork)
	if got := e.fileInContainer(ctr.ID, "/workspace/fork.txt"); got != "fork-only\n" {
		t.Fatalf("fork.txt in the container = %q", got)
	}
	// The source is untouched: still local, no container, no fork.txt.
	if st := e.state(src); st.Backend != "local" {
		t.Fatalf("the source moved: %s", dump(st))
	}
	if cs := e.containersOf(src); len(cs) != 0 {
		t.Fatalf("the source has containers: %s", dump(cs))
	}
	if _, ok := workspaceFile(t, e.stack, src, "fork.txt"); ok {
		t.Fatal("the fork's file appeared in the source's workspace")
	}
}

// A fork taken while a turn runs starts from the last completed turn: the
// running turn's commands that already changed the workspace, and its
// messages, are not in the fork.
func TestForkDuringATurnUsesTheLastCompletedTurn(t *testing.T) {
	e := newThreadEnv(t, false, func(c *config.Config) { c.Session.ApprovalMode = "unless-readonly" })
	src := e.thread("source")
	e.turn(src, 1, "write v1",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo v1 > f.txt")),
		fakeopenai.FinalStep("v1 written"))

	e.model.Push(
		fakeopenai.ToolCallStep("c2", "shell", shell("echo v2 > f.txt")),
		fakeopenai.ToolCallStep("c3", "shell", shell("echo v3 >> f.txt")),
		fakeopenai.FinalStep("v3 written"),
	)
	e.send(src, alice, "ev-2", "write v2 then v3")
	e.waitState(src, "approval of c2", func(ts session.TurnState) bool { return ts.Pending != nil && ts.Pending.CallID == "c2" })
	if err := e.approve(src, "c2", session.DecisionApprove, alice, ""); err != nil {
		t.Fatal(err)
	}
	e.waitState(src, "approval of c3", func(ts session.TurnState) bool { return ts.Pending != nil && ts.Pending.CallID == "c3" })
	if got, _ := workspaceFile(t, e.stack, src, "f.txt"); got != "v2\n" {
		t.Fatalf("the running turn should have changed the workspace already; f.txt = %q", got)
	}

	fork := e.fork(src, "/fork", 1, "local")
	if fi := e.info(fork); fi.ForkedAtTurn != 1 {
		t.Fatalf("a fork during turn 2 should be at turn 1: %s", dump(fi))
	}
	if err := e.approve(src, "c3", session.DecisionApprove, alice, ""); err != nil {
		t.Fatal(err)
	}
	if end := e.waitState(src, "turn 2 end", func(ts session.TurnState) bool { return ts.Turn == 2 && done(ts) }); end.FinalText != "v3 written" {
		t.Fatalf("the source's turn should finish normally: %s", dump(end))
	}

	ts := e.turn(fork, 1, "what is in f.txt?",
		fakeopenai.ToolCallStep("f1", "shell", shell("cat f.txt")),
		fakeopenai.FinalStep("v1"))
	if got := cmdOut(t, onlyCall(t, ts), "cat f.txt"); got != "v1" {
		t.Fatalf("the fork should hold the workspace of turn 1, f.txt = %q", got)
	}
	last, _ := e.model.LastRequest()
	if body := dump(last.Body.Messages); !strings.Contains(body, "write v1") || strings.Contains(body, "write v2 then v3") {
		t.Fatalf("the fork's conversation should end at turn 1: %s", body)
	}
}

// BenchmarkForkLatency measures /fork from the command reaching the core to
// the first message posted in the new thread, over ten forks of a session
// with a small workspace snapshot (local backend), and reports the median.
//
//	go test ./integration -run '^$' -bench ForkLatency -benchtime=1x
func BenchmarkForkLatency(b *testing.B) {
	const forks = 10
	e := newThreadEnv(b, false, noApprovals)
	src := e.thread("source")
	e.turn(src, 1, "make a workspace",
		fakeopenai.ToolCallStep("c1", "shell", shell("mkdir -p src && for i in 1 2 3 4 5 6 7 8 9 10; do echo line $i > src/f$i.txt; done")),
		fakeopenai.FinalStep("made"))
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		var lat []time.Duration
		for i := 0; i < forks; i++ {
			start := time.Now()
			e.send(src, alice, "fork", "/fork")
			th := e.p.lastOpened(b)
			first := e.p.waitText(b, th, "Forked from")
			lat = append(lat, first.At.Sub(start))
		}
		p50 := median(lat)
		b.ReportMetric(float64(p50.Microseconds())/1000, "ms/fork-p50")
		b.Logf("%d forks: p50 %s, all %v", forks, p50, lat)
	}
}
