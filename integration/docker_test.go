package integration

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/devserver"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/workerapp"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/blobstore"
	"github.com/sandbot/sandbot/sandbox/docker"
	"github.com/sandbot/sandbot/session"
)

// The lifetime of a Docker sandbox: idle suspend and resume, restore after
// the container is lost, destroy, and the orphan sweeper.

// onDocker makes docker the backend of new sessions (approvals off).
func onDocker(c *config.Config) {
	c.Sandbox.Default = "docker"
	c.Session.ApprovalMode = "never"
}

// waitInfo polls the session's Info until cond holds.
func (e *threadEnv) waitInfo(th interface{ ID() string }, what string, cond func(session.Info) bool) session.Info {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last session.Info
	for time.Now().Before(deadline) {
		if v, err := e.c.QueryWorkflow(e.ctx, th.ID(), "", session.QueryInfo); err == nil {
			var in session.Info // fresh: omitted fields must read as empty
			if err := v.Get(&in); err == nil {
				last = in
				if cond(in) {
					return in
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("timed out waiting for %s; last info: %s", what, dump(last))
	return last
}

func dockerTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("container time %q: %v", s, err)
	}
	return tm
}

func TestIdleSuspendAndResume(t *testing.T) {
	e := newThreadEnv(t, true, onDocker, func(c *config.Config) { c.Session.IdleSuspend = 2 * time.Second })
	th := e.thread("idle")
	ts := e.turn(th, 1, "make a file",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo survives > kept.txt", "id -u")),
		fakeopenai.FinalStep("made"))
	if ts.Backend != "docker" || cmdOut(t, onlyCall(t, ts), "id -u") != "1000" {
		t.Fatalf("turn 1 should run in a container: %s", dump(ts))
	}
	ctr := e.containerOf(th)

	stopped := e.waitContainer(ctr.ID, "the idle suspend to stop it", func(s *container.State) bool { return !s.Running })
	if stopped.Status != container.StateExited {
		t.Fatalf("a suspended container should be stopped (exited), not %s", stopped.Status)
	}
	e.waitInfo(th, "Info.Suspended", func(in session.Info) bool { return in.Suspended })
	stoppedAt := dockerTime(t, stopped.FinishedAt)

	ts = e.turn(th, 2, "read it back",
		fakeopenai.ToolCallStep("c2", "shell", shell("cat kept.txt")),
		fakeopenai.FinalStep("read"))
	if got := cmdOut(t, onlyCall(t, ts), "cat kept.txt"); got != "survives" {
		t.Fatalf("after resume kept.txt reads %q", got)
	}
	if !hasNotice(ts, "Resumed") {
		t.Fatalf("no notice that the sandbox was resumed: %q", ts.Notices)
	}
	// The same container was started again (not replaced by a new one).
	if again := e.containerOf(th); again.ID != ctr.ID {
		t.Fatalf("resume replaced the container %s by %s", ctr.ID, again.ID)
	}
	if started := dockerTime(t, e.inspect(ctr.ID).StartedAt); !started.After(stoppedAt) {
		t.Fatalf("the container was not started again after its suspend (started %s, stopped %s)", started, stoppedAt)
	}
}

func TestRestoreAfterContainerRemoved(t *testing.T) {
	e := newThreadEnv(t, true, onDocker)
	th := e.thread("lost")
	e.turn(th, 1, "make a file",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo precious > data.txt")),
		fakeopenai.FinalStep("made"))
	ctr := e.containerOf(th)
	if _, err := e.docker.ContainerRemove(e.ctx, ctr.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if cs := e.containersOf(th); len(cs) != 0 {
		t.Fatalf("container still listed after removal: %s", dump(cs))
	}

	ts := e.turn(th, 2, "read it",
		fakeopenai.ToolCallStep("c2", "shell", shell("cat data.txt")),
		fakeopenai.FinalStep("read"))
	if got := cmdOut(t, onlyCall(t, ts), "cat data.txt"); got != "precious" {
		t.Fatalf("after the container was removed, data.txt reads %q", got)
	}
	if now := e.containerOf(th); now.ID == ctr.ID {
		t.Fatal("the removed container came back with the same ID")
	}
	if !hasNotice(ts, "restored") {
		t.Fatalf("the turn state should say the sandbox was lost and restored from the snapshot; notices %q", ts.Notices)
	}
}

// regularFiles lists the regular files under the snapshot store dir, but
// the store's owner record (blobstore.OwnerKey), which the worker's sweeper
// writes at start and no session owns.
func regularFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && p != filepath.Join(dir, blobstore.OwnerKey) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDestroyCleansUp(t *testing.T) {
	e := newThreadEnv(t, true, onDocker)
	th := e.thread("destroy")
	e.turn(th, 1, "make a file",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo doomed > d.txt")),
		fakeopenai.FinalStep("made"))
	ctr := e.containerOf(th)
	key := e.info(th).Snapshot
	snapDir := strings.TrimPrefix(e.cfg.Sandbox.SnapshotURL, "file://")
	if !strings.HasPrefix(key, sandbox.SessionPrefix(th.ID())) || !e.snapshotExists(key) || len(regularFiles(t, snapDir)) == 0 {
		t.Fatalf("before destroy the session should have a snapshot under its prefix; key %q, files %q", key, regularFiles(t, snapDir))
	}

	r := e.command(th, "/destroy confirm")
	if !strings.Contains(r, "Session destroyed after 1 turn") {
		t.Fatalf("/destroy confirm replied %q", r)
	}
	if cs := e.containersOf(th); len(cs) != 0 {
		t.Fatalf("container %s outlived destroy: %s", ctr.ID, dump(cs))
	}
	if e.snapshotExists(key) {
		t.Fatalf("snapshot %s outlived destroy", key)
	}
	// The session's prefix is gone at once; the contents only it named go
	// at the next collection of objects older than the sweep's grace.
	for _, f := range regularFiles(t, snapDir) {
		if !strings.Contains(f, "/objects/") {
			t.Fatalf("files left in the snapshot store: %q", f)
		}
	}
	st, err := blobstore.Open(e.ctx, e.cfg.Sandbox.SnapshotURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := sandbox.CollectObjects(e.ctx, st, time.Now().Add(2*sandbox.SweepGrace)); err != nil {
		t.Fatal(err)
	}
	if left := regularFiles(t, snapDir); len(left) != 0 {
		t.Fatalf("files left in the snapshot store after collection: %q", left)
	}
	var res session.SessionResult
	if err := e.c.GetWorkflow(e.ctx, th.ID(), "").Get(e.ctx, &res); err != nil || !res.Destroyed || res.Turns != 1 {
		t.Fatalf("workflow result %+v, %v; want destroyed after 1 turn", res, err)
	}
	d, err := e.c.DescribeWorkflowExecution(e.ctx, th.ID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("workflow status %s, want completed", st)
	}
	recordHistory(t, e.stack, th.ID(), "destroy")
}

// sweepBackend is a docker backend labelled as the worker of the given
// deployment labels its own (see workerapp.LabelDeployment), for calling
// workerapp.SweepOrphans the way that worker's sweeper does.
func (e *threadEnv) sweepBackend(c tclient.Client, namespace, taskQueue string) sandbox.Backend {
	e.t.Helper()
	id, err := workerapp.DeploymentID(e.ctx, c, namespace, taskQueue)
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := docker.New(e.docker, docker.Options{Image: e.image,
		Labels: map[string]string{workerapp.LabelDeployment: id}})
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func TestOrphanSweeper(t *testing.T) {
	e := newThreadEnv(t, true, onDocker)
	orphan, live := e.thread("orphan"), e.thread("live")
	e.turn(orphan, 1, "make a sandbox",
		fakeopenai.ToolCallStep("o1", "shell", shell("echo o > o.txt")),
		fakeopenai.FinalStep("made"))
	e.turn(live, 1, "make a sandbox",
		fakeopenai.ToolCallStep("l1", "shell", shell("echo l > l.txt")),
		fakeopenai.FinalStep("made"))
	oc, lc := e.containerOf(orphan), e.containerOf(live)
	if err := e.c.TerminateWorkflow(e.ctx, orphan.ID(), "", "test: orphan its container"); err != nil {
		t.Fatal(err)
	}

	removed := workerapp.SweepOrphans(e.ctx, e.c, []sandbox.Backend{e.sweepBackend(e.c, e.cfg.Temporal.Namespace, e.cfg.Temporal.TaskQueue)}, e.log)
	if !slices.Contains(removed, oc.ID) || slices.Contains(removed, lc.ID) {
		t.Fatalf("sweep removed %q; want the orphan %s and not the live %s", removed, oc.ID, lc.ID)
	}
	if cs := e.containersOf(orphan); len(cs) != 0 {
		t.Fatalf("the orphan's container survived the sweep: %s", dump(cs))
	}
	if got := e.containerOf(live); got.ID != lc.ID {
		t.Fatalf("the live session's container changed: %s", dump(got))
	}
	// The live session still works in its container.
	ts := e.turn(live, 2, "still there?",
		fakeopenai.ToolCallStep("l2", "shell", shell("cat l.txt")),
		fakeopenai.FinalStep("yes"))
	if got := cmdOut(t, onlyCall(t, ts), "cat l.txt"); got != "l" {
		t.Fatalf("live session after the sweep: %q", got)
	}
}

// Two sandbot deployments (here: two Temporal servers) may share one
// Docker host, both left at the same namespace and task queue. A sweep by
// one must not remove the other's live sandboxes: to the sweeping deployment
// the other's sessions are simply unknown. (Labelled by namespace and queue
// alone, as before, the other's sweep removed this live container.)
func TestSweeperSparesAnotherDeploymentsContainers(t *testing.T) {
	e := newThreadEnv(t, true, onDocker)
	th := e.thread("other-deployment")
	e.turn(th, 1, "make a sandbox",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo mine > mine.txt")),
		fakeopenai.FinalStep("made"))
	ctr := e.containerOf(th)

	other, err := devserver.Start(e.ctx, devserver.Options{Ephemeral: true, SearchAttributes: session.SearchAttributeTypes()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop() })
	oc, err := other.NewClient(e.ctx, tclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()
	// The other deployment's worker labels and sweeps its own containers.
	b := e.sweepBackend(oc, e.cfg.Temporal.Namespace, e.cfg.Temporal.TaskQueue)
	removed := workerapp.SweepOrphans(e.ctx, oc, []sandbox.Backend{b}, e.log)
	if slices.Contains(removed, ctr.ID) {
		t.Fatalf("a sweep by another deployment removed this deployment's live container %s (session %s is running)", ctr.ID, th.ID())
	}
	ts := e.turn(th, 2, "still mine?",
		fakeopenai.ToolCallStep("c2", "shell", shell("cat mine.txt")),
		fakeopenai.FinalStep("yes"))
	if got := cmdOut(t, onlyCall(t, ts), "cat mine.txt"); got != "mine" || e.containerOf(th).ID != ctr.ID {
		t.Fatalf("the session lost its container: %q, %s", got, dump(e.containersOf(th)))
	}
}
