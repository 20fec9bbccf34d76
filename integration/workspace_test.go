package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// Backend switches through the chat core: the workspace moves with the
// session, a switch asked for mid-turn waits for the turn boundary, and an
// unusable backend leaves the session usable elsewhere.

func noApprovals(c *config.Config) { c.Session.ApprovalMode = "never" }

// onLocal checks that pwd printed a directory under the stack's local root.
func (e *threadEnv) onLocal(pwd string) bool {
	rel, err := filepath.Rel(e.cfg.Sandbox.LocalRoot, strings.TrimSpace(pwd))
	return err == nil && !strings.HasPrefix(rel, "..")
}

// waitBackend waits until the session runs on backend with no switch
// pending, and checks the switch notice.
func (e *threadEnv) waitBackend(th chat.Thread, from, to string) session.TurnState {
	e.t.Helper()
	st := e.waitState(th, "the switch to "+to, func(ts session.TurnState) bool {
		return ts.Backend == to && ts.PendingBackend == ""
	})
	if !hasNotice(st, "Switched backend from "+from+" to "+to) {
		e.t.Fatalf("no notice of the switch from %s to %s: %q", from, to, st.Notices)
	}
	if in := e.info(th); in.Backend != to {
		e.t.Fatalf("Info.Backend = %q after the switch to %s", in.Backend, to)
	}
	return st
}

func TestBackendSwitchCarriesWorkspace(t *testing.T) {
	e := newThreadEnv(t, true, noApprovals)
	th := e.thread("carry")

	ts := e.turn(th, 1, "make a file",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo from-local > carried.txt", "pwd")),
		fakeopenai.FinalStep("made"))
	if c := onlyCall(t, ts); ts.Backend != "local" || !e.onLocal(cmdOut(t, c, "pwd")) {
		t.Fatalf("turn 1 should run on local under %s: %s", e.cfg.Sandbox.LocalRoot, dump(ts))
	}

	if r := e.command(th, "/backend docker"); !strings.Contains(r, "Switching backend from **local** to **docker**") {
		t.Fatalf("/backend docker replied %q", r)
	}
	e.waitBackend(th, "local", "docker")
	if _, ok := workspaceFile(t, e.stack, th, "carried.txt"); ok {
		t.Fatal("the local workspace is still there after the switch to docker")
	}

	ts = e.turn(th, 2, "check it on docker",
		fakeopenai.ToolCallStep("c2", "shell", shell("cat carried.txt", "pwd", "id -u", "echo from-docker >> carried.txt")),
		fakeopenai.FinalStep("checked"))
	c := onlyCall(t, ts)
	if ts.Backend != "docker" || cmdOut(t, c, "pwd") != "/workspace" || cmdOut(t, c, "id -u") != "1000" {
		t.Fatalf("turn 2 should run in the container as uid 1000 in /workspace: %s", dump(ts))
	}
	if got := cmdOut(t, c, "cat carried.txt"); got != "from-local" {
		t.Fatalf("the file made on local reads %q in the container", got)
	}
	ctr := e.containerOf(th)
	if got := e.fileInContainer(ctr.ID, "/workspace/carried.txt"); got != "from-local\nfrom-docker\n" {
		t.Fatalf("carried.txt on the container's disk = %q", got)
	}

	if r := e.command(th, "/backend local"); !strings.Contains(r, "Switching backend from **docker** to **local**") {
		t.Fatalf("/backend local replied %q", r)
	}
	e.waitBackend(th, "docker", "local")
	if cs := e.containersOf(th); len(cs) != 0 {
		t.Fatalf("the container outlived the switch back to local: %s", dump(cs))
	}

	ts = e.turn(th, 3, "back on local",
		fakeopenai.ToolCallStep("c3", "shell", shell("cat carried.txt", "pwd", "echo back-on-local >> carried.txt")),
		fakeopenai.FinalStep("back"))
	c = onlyCall(t, ts)
	if ts.Backend != "local" || !e.onLocal(cmdOut(t, c, "pwd")) {
		t.Fatalf("turn 3 should run on local: %s", dump(ts))
	}
	if got := cmdOut(t, c, "cat carried.txt"); got != "from-local\nfrom-docker" {
		t.Fatalf("after the switch back, carried.txt reads %q", got)
	}
	if got, ok := workspaceFile(t, e.stack, th, "carried.txt"); !ok || got != "from-local\nfrom-docker\nback-on-local\n" {
		t.Fatalf("carried.txt in the local workspace = %q, %v", got, ok)
	}
	ts = e.turn(th, 4, "still there?",
		fakeopenai.ToolCallStep("c4", "shell", shell("cat carried.txt")),
		fakeopenai.FinalStep("yes"))
	if got := cmdOut(t, onlyCall(t, ts), "cat carried.txt"); got != "from-local\nfrom-docker\nback-on-local" {
		t.Fatalf("turn 4 reads %q", got)
	}
	recordHistory(t, e.stack, th.ID(), "backend-switch")
}

func TestBackendSwitchMidTurnIsDeferred(t *testing.T) {
	e := newThreadEnv(t, true, func(c *config.Config) { c.Session.ApprovalMode = "unless-readonly" })
	th := e.thread("midturn")
	e.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo during > mid.txt", "pwd", "id -u")),
		fakeopenai.FinalStep("wrote it"),
	)
	e.send(th, alice, "ev-1", "write mid.txt")
	e.waitState(th, "the approval of c1", func(ts session.TurnState) bool {
		return ts.Pending != nil && ts.Pending.CallID == "c1"
	})

	r := e.command(th, "/backend docker")
	if !strings.Contains(r, "from **local** to **docker** when the running turn ends") {
		t.Fatalf("a switch during a turn should say it is deferred; reply %q", r)
	}
	st := e.state(th)
	if st.Backend != "local" || st.PendingBackend != "docker" || st.Status != session.StatusAwaitingApproval {
		t.Fatalf("during the turn: backend %q, pending %q, status %s; want local, docker, awaiting_approval", st.Backend, st.PendingBackend, st.Status)
	}

	if err := e.approve(th, "c1", session.DecisionApprove, alice, ""); err != nil {
		t.Fatal(err)
	}
	end := e.waitState(th, "turn 1 end", func(ts session.TurnState) bool { return ts.Turn == 1 && done(ts) })
	c := onlyCall(t, end)
	// The confined local sandbox runs as uid 1000 whoever the worker is.
	if !e.onLocal(cmdOut(t, c, "pwd")) || cmdOut(t, c, "id -u") != "1000" {
		t.Fatalf("the approved command of the running turn must still run on local: %s", dump(c))
	}
	e.waitBackend(th, "local", "docker")

	ts := e.turn(th, 2, "where are we?",
		fakeopenai.ToolCallStep("c2", "shell", shell("cat mid.txt", "pwd", "id -u")),
		fakeopenai.FinalStep("on docker"))
	c = onlyCall(t, ts)
	if ts.Backend != "docker" || cmdOut(t, c, "pwd") != "/workspace" || cmdOut(t, c, "id -u") != "1000" {
		t.Fatalf("turn 2 should run in the container: %s", dump(ts))
	}
	if got := cmdOut(t, c, "cat mid.txt"); got != "during" {
		t.Fatalf("the file written by the turn before the switch reads %q on docker", got)
	}
}

func TestUnavailableDockerBackend(t *testing.T) {
	const missing = "sandbot-test/missing:0"
	e := newThreadEnv(t, true, noApprovals, func(c *config.Config) { c.Docker.Image = missing })
	th := e.thread("unavailable")
	e.turn(th, 1, "keep this",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo kept > kept.txt")),
		fakeopenai.FinalStep("kept"))
	e.command(th, "/backend docker")
	e.waitBackend(th, "local", "docker")

	ts := e.turn(th, 2, "read it on docker",
		fakeopenai.ToolCallStep("c2", "shell", shell("cat kept.txt")),
		fakeopenai.FinalStep("the sandbox is unavailable"))
	if len(ts.ToolCalls) != 1 {
		t.Fatalf("turn 2: %s", dump(ts))
	}
	c := ts.ToolCalls[0]
	want := `image "` + missing + `" is not present`
	if c.Status != session.CallFailed || !strings.Contains(c.Error, want) {
		t.Fatalf("the call should fail saying the image is missing: %s", dump(c))
	}
	if !hasNotice(ts, want, "/backend") {
		t.Fatalf("no notice naming the missing image and /backend: %q", ts.Notices)
	}
	// The thread shows it too, on the turn's status card.
	e.p.waitFor(t, "the status card naming the missing image", func(posts []posted, _ []string) bool {
		for _, p := range posts {
			if p.Thread == th && strings.Contains(cardText(p.Cards[len(p.Cards)-1]), want) {
				return true
			}
		}
		return false
	})
	if got := toolResultFor(e.model, "c2"); !strings.Contains(got, "not run") || !strings.Contains(got, want) {
		t.Fatalf("the model was not told why the command did not run; its tool result: %q", got)
	}

	e.command(th, "/backend local")
	e.waitBackend(th, "docker", "local")
	ts = e.turn(th, 3, "read it on local",
		fakeopenai.ToolCallStep("c3", "shell", shell("cat kept.txt")),
		fakeopenai.FinalStep("there"))
	if got := cmdOut(t, onlyCall(t, ts), "cat kept.txt"); got != "kept" {
		t.Fatalf("after moving back to local, kept.txt reads %q", got)
	}
}

// A turn that changes the workspace writes a new snapshot; the one it
// supersedes is deleted at the next turn boundary, so a long session does
// not pile up one archive per turn.
// Snapshots that no kept checkpoint names are deleted: with one
// checkpoint kept, turn 1's snapshot goes once turn 2 completes, and the
// store holds turn 2's manifest and the objects it names.
func TestSupersededSnapshotsAreDeleted(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals, func(c *config.Config) { c.Session.Checkpoints = 1 })
	th := e.thread("superseded")
	e.turn(th, 1, "first version",
		fakeopenai.ToolCallStep("c1", "shell", shell("echo one > v.txt")),
		fakeopenai.FinalStep("one"))
	first := e.info(th).Snapshot
	if !e.snapshotExists(first) {
		t.Fatalf("turn 1 snapshot %q missing", first)
	}
	e.turn(th, 2, "second version",
		fakeopenai.ToolCallStep("c2", "shell", shell("echo two > v.txt")),
		fakeopenai.FinalStep("two"))
	info := e.info(th)
	second := info.Snapshot
	if second == first || !e.snapshotExists(second) {
		t.Fatalf("turn 2 should write a new snapshot: first %q, second %q", first, second)
	}
	if len(info.Checkpoints) != 1 || info.Checkpoints[0].Turn != 2 {
		t.Fatalf("checkpoints %+v, want only turn 2's", info.Checkpoints)
	}
	deadline := time.Now().Add(waitTimeout)
	for e.snapshotExists(first) {
		if time.Now().After(deadline) {
			t.Fatalf("the superseded snapshot %s is still in the store", first)
		}
		time.Sleep(50 * time.Millisecond)
	}
	snapDir := strings.TrimPrefix(e.cfg.Sandbox.SnapshotURL, "file://")
	var snapshots []string
	for _, f := range regularFiles(t, snapDir) {
		// The session's stored transcripts live beside its snapshots,
		// the contents under objects/.
		if strings.Contains(f, "/sessions/") && !strings.Contains(f, "/transcript/") {
			snapshots = append(snapshots, f)
		}
	}
	if len(snapshots) != 1 {
		t.Fatalf("the store should hold only the latest snapshot, it holds %q", snapshots)
	}
}
