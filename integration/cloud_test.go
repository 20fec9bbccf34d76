package integration

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	fakedaytona "github.com/sandbot/sandbot/internal/fake/daytona"
	fakee2b "github.com/sandbot/sandbot/internal/fake/e2b"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/workerapp"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// Cloud backends end to end: the worker built from configuration talks to
// the in-project Daytona and E2B fakes over their wire protocols, the chat
// core drives sessions onto them, between them and off them again.

// Keys shaped like the providers' (the worker's configuration checks the
// prefixes); the fakes accept only these.
const (
	daytonaKey = "dtn_5f1c0e7a9b3d4c2e8f6a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e"
	e2bKey     = "e2b_3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b"
)

// clouds are the fakes of one test.
type clouds struct {
	daytona *fakedaytona.Server
	e2b     *fakee2b.Server
}

func startClouds(t testing.TB) *clouds {
	t.Helper()
	return &clouds{
		daytona: fakedaytona.Start(t, fakedaytona.Options{APIKey: daytonaKey}),
		e2b:     fakee2b.Start(t, fakee2b.Options{APIKey: e2bKey}),
	}
}

// withClouds points the worker at the fakes with their keys set: setting a
// key is what turns a cloud backend on.
func (cl *clouds) withClouds(c *config.Config) {
	c.Daytona.APIURL, c.Daytona.APIKey = cl.daytona.URL(), daytonaKey
	c.E2B.APIURL, c.E2B.SandboxURL, c.E2B.APIKey = cl.e2b.URL(), cl.e2b.SandboxURL(), e2bKey
}

// live returns the IDs of the session's sandboxes a fake still holds
// (not deleted).
func (cl *clouds) live(backend string, th chat.Thread) []string {
	var ids []string
	switch backend {
	case "daytona":
		for _, sb := range cl.daytona.Sandboxes() {
			if sb.Labels["sandbot.session"] == th.ID() && sb.State != "destroyed" && sb.State != "destroying" {
				ids = append(ids, sb.ID)
			}
		}
	case "e2b":
		for _, sb := range cl.e2b.Sandboxes() {
			if sb.Metadata["sandbot.session"] == th.ID() {
				ids = append(ids, sb.ID)
			}
		}
	}
	return ids
}

// moveTo starts the thread's session with a first turn on local and
// switches it to backend.
func (e *threadEnv) moveTo(th chat.Thread, backend string) {
	e.t.Helper()
	e.turn(th, 1, "hello",
		fakeopenai.ToolCallStep("h-"+th.Thread, "shell", shell("true")),
		fakeopenai.FinalStep("hi"))
	if r := e.command(th, "/backend "+backend); !strings.Contains(r, "to **"+backend+"**") {
		e.t.Fatalf("/backend %s replied %q", backend, r)
	}
	e.waitBackend(th, "local", backend)
}

func (cl *clouds) only(t testing.TB, backend string, th chat.Thread) string {
	t.Helper()
	ids := cl.live(backend, th)
	if len(ids) != 1 {
		t.Fatalf("%s holds %d sandboxes of %s, want 1: %v", backend, len(ids), th.ID(), ids)
	}
	return ids[0]
}

// The round trip: a workspace made on docker moves to E2B, then to
// Daytona, then back to local, with its files intact at every step, and
// each backend left behind holds nothing of the session.
func TestCloudBackendsCarryWorkspace(t *testing.T) {
	cl := startClouds(t)
	e := newThreadEnv(t, true, noApprovals, cl.withClouds)
	th := e.thread("cloud-carry")

	e.moveTo(th, "docker")
	ts := e.turn(th, 2, "make files on docker",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo from-docker > carried.txt", "mkdir -p sub && printf 'x\\ny\\n' > sub/n.txt && chmod 750 sub", "pwd")),
		fakeopenai.FinalStep("made"))
	if c := onlyCall(t, ts); ts.Backend != "docker" || cmdOut(t, c, "pwd") != "/workspace" {
		t.Fatalf("turn 1 should run in the container: %s", dump(ts))
	}

	steps := []struct {
		from, to, workdir string
	}{
		{"docker", "e2b", "/home/user/workspace"},
		{"e2b", "daytona", "/home/daytona/workspace"},
	}
	want := "from-docker"
	var tokens []string
	for i, st := range steps {
		if r := e.command(th, "/backend "+st.to); !strings.Contains(r, "Switching backend from **"+st.from+"** to **"+st.to+"**") {
			t.Fatalf("/backend %s replied %q", st.to, r)
		}
		e.waitBackend(th, st.from, st.to)
		n := i + 3
		ts := e.turn(th, n, "check on "+st.to,
			fakeopenai.ToolCallStep("c"+st.to, "shell", shell("cat carried.txt", "cat sub/n.txt", "stat -c %a sub", "pwd", "echo from-"+st.to+" >> carried.txt")),
			fakeopenai.FinalStep("checked"))
		c := onlyCall(t, ts)
		if ts.Backend != st.to || cmdOut(t, c, "pwd") != st.workdir {
			t.Fatalf("turn %d should run on %s in %s: %s", n, st.to, st.workdir, dump(ts))
		}
		if got := cmdOut(t, c, "cat carried.txt"); got != want {
			t.Fatalf("on %s carried.txt reads %q, want %q", st.to, got, want)
		}
		if got, mode := cmdOut(t, c, "cat sub/n.txt"), cmdOut(t, c, "stat -c %a sub"); got != "x\ny" || mode != "750" {
			t.Fatalf("on %s sub/n.txt reads %q and sub has mode %s", st.to, got, mode)
		}
		want += "\nfrom-" + st.to
		cl.only(t, st.to, th)
		// The token dies with the sandbox; keep it to look for later.
		tokens = append(tokens, cl.e2b.AccessTokens()...)
		if st.from != "docker" {
			if ids := cl.live(st.from, th); len(ids) != 0 {
				t.Fatalf("the %s sandbox outlived the switch to %s: %v", st.from, st.to, ids)
			}
		} else if cs := e.containersOf(th); len(cs) != 0 {
			t.Fatalf("the container outlived the switch to %s: %s", st.to, dump(cs))
		}
	}

	e.command(th, "/backend local")
	e.waitBackend(th, "daytona", "local")
	ts = e.turn(th, 5, "back on local",
		fakeopenai.ToolCallStep("c4", "shell", shell("cat carried.txt", "cat sub/n.txt", "pwd")),
		fakeopenai.FinalStep("back"))
	c := onlyCall(t, ts)
	if ts.Backend != "local" || !e.onLocal(cmdOut(t, c, "pwd")) {
		t.Fatalf("turn 4 should run on local: %s", dump(ts))
	}
	if got := cmdOut(t, c, "cat carried.txt"); got != want {
		t.Fatalf("back on local carried.txt reads %q, want %q", got, want)
	}
	if ids := cl.live("daytona", th); len(ids) != 0 {
		t.Fatalf("the daytona sandbox outlived the switch back to local: %v", ids)
	}
	if len(tokens) == 0 {
		t.Fatal("the E2B fake issued no access token")
	}
	assertNoCloudSecrets(t, e.stack, th, tokens)
}

// assertNoCloudSecrets fails when the session's durable history holds a
// provider key or an E2B sandbox's envd access token.
func assertNoCloudSecrets(t *testing.T, s *stack, th chat.Thread, tokens []string) {
	t.Helper()
	secrets := map[string]string{"DAYTONA_API_KEY": daytonaKey, "E2B_API_KEY": e2bKey}
	for i, tok := range tokens {
		secrets[fmt.Sprintf("envd access token %d", i)] = tok
	}
	for i, h := range runHistories(t, s, th.ID()) {
		b, err := proto.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		for what, v := range secrets {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("run %d of %s's history holds %s", i+1, th.ID(), what)
			}
		}
		if bytes.Contains(b, []byte("envdAccessToken")) || bytes.Contains(b, []byte("access_token")) {
			t.Errorf("run %d of %s's history names an access token field", i+1, th.ID())
		}
	}
}

// A fork onto a cloud backend starts from the parent's workspace in a
// sandbox of its own; the parent stays where it was.
func TestForkOntoCloud(t *testing.T) {
	cl := startClouds(t)
	e := newThreadEnv(t, false, noApprovals, cl.withClouds)
	src := e.thread("cloud-fork-src")
	e.turn(src, 1, "make files",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo parent-file > shared.txt")),
		fakeopenai.FinalStep("made"))

	for _, to := range []struct{ backend, workdir string }{{"e2b", "/home/user/workspace"}, {"daytona", "/home/daytona/workspace"}} {
		fork := e.fork(src, `/fork "on `+to.backend+`" `+to.backend, 1, to.backend)
		ts := e.turn(fork, 1, "where am I?",
			fakeopenai.ToolCallStep("f-"+to.backend, "shell", shell("cat shared.txt", "pwd", "echo fork-only > fork.txt")),
			fakeopenai.FinalStep("in the cloud"))
		c := onlyCall(t, ts)
		if ts.Backend != to.backend || cmdOut(t, c, "pwd") != to.workdir || cmdOut(t, c, "cat shared.txt") != "parent-file" {
			t.Fatalf("the fork onto %s: %s", to.backend, dump(ts))
		}
		cl.only(t, to.backend, fork)
		if ids := cl.live(to.backend, src); len(ids) != 0 {
			t.Fatalf("the source has %s sandboxes: %v", to.backend, ids)
		}
	}
	if _, ok := workspaceFile(t, e.stack, src, "fork.txt"); ok {
		t.Fatal("a fork's file appeared in the source's workspace")
	}
	if st := e.state(src); st.Backend != "local" {
		t.Fatalf("the source moved: %s", dump(st))
	}
}

// A cloud sandbox that disappears between turns (deleted in the
// provider's console, reclaimed) is made again from the session's
// snapshot, and the thread is told.
func TestCloudSandboxVanishes(t *testing.T) {
	cl := startClouds(t)
	e := newThreadEnv(t, false, noApprovals, cl.withClouds)
	for _, backend := range []string{"e2b", "daytona"} {
		th := e.thread("vanish-" + backend)
		e.moveTo(th, backend)
		e.turn(th, 2, "write",
			fakeopenai.ToolCallStep("w-"+backend, "shell", shell("echo survived > keep.txt")),
			fakeopenai.FinalStep("written"))
		gone := cl.only(t, backend, th)
		switch backend {
		case "e2b":
			cl.e2b.Vanish(gone)
		case "daytona":
			cl.daytona.Vanish(gone)
		}
		ts := e.turn(th, 3, "read",
			fakeopenai.ToolCallStep("r-"+backend, "shell", shell("cat keep.txt")),
			fakeopenai.FinalStep("read"))
		if got := cmdOut(t, onlyCall(t, ts), "cat keep.txt"); got != "survived" {
			t.Fatalf("%s: after the sandbox vanished keep.txt reads %q", backend, got)
		}
		if !hasNotice(ts, sandbox.NoticeRestoredAfterLoss) {
			t.Fatalf("%s: no notice of the restore: %q", backend, ts.Notices)
		}
		if now := cl.only(t, backend, th); now == gone {
			t.Fatalf("%s: the session still names the vanished sandbox %s", backend, gone)
		}
	}
}

// A provider outage fails the turn with the provider's reason, in the
// thread and to the model, and the session moves to another backend with
// its workspace.
func TestCloudProviderOutage(t *testing.T) {
	cl := startClouds(t)
	e := newThreadEnv(t, false, noApprovals, cl.withClouds)
	th := e.thread("outage")
	e.moveTo(th, "daytona")
	e.turn(th, 2, "write",
		fakeopenai.ToolCallStep("o1", "shell", shell("echo kept > kept.txt")),
		fakeopenai.FinalStep("written"))

	const reason = "scheduled maintenance until 14:00 UTC"
	cl.daytona.SetDown(reason)
	ts := e.turn(th, 3, "read it during the outage",
		fakeopenai.ToolCallStep("o2", "shell", shell("cat kept.txt")),
		fakeopenai.FinalStep("daytona is down"))
	if len(ts.ToolCalls) != 1 {
		t.Fatalf("turn 2: %s", dump(ts))
	}
	if c := ts.ToolCalls[0]; c.Status != session.CallFailed || !strings.Contains(c.Error, reason) {
		t.Fatalf("the call should fail with the provider's reason: %s", dump(c))
	}
	if !hasNotice(ts, reason, "/backend") {
		t.Fatalf("no notice naming the reason and /backend: %q", ts.Notices)
	}
	if got := toolResultFor(e.model, "o2"); !strings.Contains(got, reason) {
		t.Fatalf("the model was not told why: %q", got)
	}

	e.command(th, "/backend local")
	e.waitBackend(th, "daytona", "local")
	ts = e.turn(th, 4, "read it on local",
		fakeopenai.ToolCallStep("o3", "shell", shell("cat kept.txt")),
		fakeopenai.FinalStep("there"))
	if got := cmdOut(t, onlyCall(t, ts), "cat kept.txt"); got != "kept" {
		t.Fatalf("after moving to local, kept.txt reads %q", got)
	}
}

// A backend is offered only where a worker serves it, and a worker serves
// a cloud backend only with its key; a key the provider refuses stops the
// worker, naming the variable.
func TestCloudBackendRegistration(t *testing.T) {
	cl := startClouds(t)
	e := newThreadEnv(t, false, noApprovals)
	th := e.thread("no-keys")
	for _, b := range []string{"e2b", "daytona"} {
		if r := e.command(th, "/backend "+b); !strings.Contains(r, "**"+b+"** is not available") {
			t.Fatalf("/backend %s without its key replied %q", b, r)
		}
	}
	if e.worker.Served[0] != "local" || len(e.worker.Served) != 1 {
		t.Fatalf("a worker without keys serves %v", e.worker.Served)
	}

	for _, tc := range []struct {
		setting string
		cfg     func(c *config.Config)
	}{
		{"E2B_API_KEY", func(c *config.Config) {
			c.E2B.APIURL, c.E2B.SandboxURL, c.E2B.APIKey = cl.e2b.URL(), cl.e2b.SandboxURL(), "e2b_00000000000000000000000000000000deadbeef"
		}},
		{"DAYTONA_API_KEY", func(c *config.Config) {
			c.Daytona.APIURL, c.Daytona.APIKey = cl.daytona.URL(), "dtn_000000000000000000000000000000000000000000000000000000000000dead"
		}},
	} {
		cfg := *e.cfg
		cfg.Temporal.TaskQueue += "-refused"
		tc.cfg(&cfg)
		w, err := workerapp.Start(context.Background(), e.c, &cfg, workerapp.Options{}, e.log)
		if err == nil {
			w.Stop()
			t.Fatalf("a worker with a refused %s started", tc.setting)
		}
		if !strings.Contains(err.Error(), tc.setting) {
			t.Fatalf("the start-up error does not name %s: %v", tc.setting, err)
		}
	}
}

// Cloud sandboxes cost money while they exist: the worker's sweeper
// deletes those of sessions that ended without /destroy, once they are
// older than the grace, and leaves live sessions' sandboxes alone.
func TestCloudSweepRemovesWhatEndedSessionsLeft(t *testing.T) {
	cl := startClouds(t)
	e := newThreadEnv(t, false, noApprovals, cl.withClouds)
	type pair struct{ ended, live chat.Thread }
	threads := map[string]pair{}
	for _, backend := range []string{"e2b", "daytona"} {
		p := pair{e.thread("sweep-ended-" + backend), e.thread("sweep-live-" + backend)}
		e.moveTo(p.ended, backend)
		e.moveTo(p.live, backend)
		for _, th := range []chat.Thread{p.ended, p.live} {
			e.turn(th, 2, "make a sandbox",
				fakeopenai.ToolCallStep("s-"+th.Thread, "shell", shell("echo x > f.txt")),
				fakeopenai.FinalStep("made"))
		}
		if err := e.c.TerminateWorkflow(e.ctx, p.ended.ID(), "", "test: end without /destroy"); err != nil {
			t.Fatal(err)
		}
		threads[backend] = p
	}
	// Young sandboxes stay: the session ID may start a new workflow.
	e.worker.Sweep(e.ctx)
	for backend, p := range threads {
		cl.only(t, backend, p.ended)
	}
	old := time.Now().Add(-2 * sandbox.SweepGrace)
	for backend, p := range threads {
		for _, th := range []chat.Thread{p.ended, p.live} {
			id := cl.only(t, backend, th)
			switch backend {
			case "e2b":
				cl.e2b.Backdate(id, 2*sandbox.SweepGrace)
			case "daytona":
				cl.daytona.SetCreated(id, old)
			}
		}
	}
	swept := e.worker.Sweep(e.ctx)
	for backend, p := range threads {
		if ids := cl.live(backend, p.ended); len(ids) != 0 {
			t.Errorf("%s: the ended session's sandbox survived the sweep (swept %v)", backend, swept.Sandboxes)
		}
		cl.only(t, backend, p.live)
	}
	if len(swept.Sandboxes) != 2 {
		t.Errorf("the sweep removed %v, want the two ended sessions' sandboxes", swept.Sandboxes)
	}
}
