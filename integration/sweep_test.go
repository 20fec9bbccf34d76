package integration

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/devserver"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/workerapp"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/blobstore"
	"github.com/sandbot/sandbot/sandbox/local"
	"github.com/sandbot/sandbot/session"
)

// ageAll backdates every file under dir past the sweep grace, as if the
// sessions had been idle for hours.
func ageAll(t *testing.T, dir string) {
	t.Helper()
	old := time.Now().Add(-2 * sandbox.SweepGrace)
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(path, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// workspacesOf maps session IDs to the local workspaces that exist for
// them, read from the backend's notes beside the workspaces.
func workspacesOf(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(filepath.Join(root, ".sessions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(root, ".sessions", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, e.Name())); err == nil {
			out[string(data)] = e.Name()
		}
	}
	return out
}

// A session whose workflow ended without /destroy (here: terminated by an
// operator) leaves its local workspace and its snapshots behind. The
// worker's sweep removes both, spares the live session's, and a sweep by
// another deployment (its own Temporal server) sharing the same workspace
// root and snapshot store removes nothing, though to it every session is
// unknown.
func TestSweepRemovesWhatEndedSessionsLeft(t *testing.T) {
	e := newThreadEnv(t, false, func(c *config.Config) { c.Session.ApprovalMode = "never" })
	ended, live := e.thread("sweep-ended"), e.thread("sweep-live")
	e.turn(ended, 1, "make a workspace",
		fakeopenai.ToolCallStep("ended1", "shell", shell("echo ended > f.txt")),
		fakeopenai.FinalStep("made"))
	e.turn(live, 1, "make a workspace",
		fakeopenai.ToolCallStep("live1", "shell", shell("echo live > f.txt")),
		fakeopenai.FinalStep("made"))
	root := e.cfg.Sandbox.LocalRoot
	snapDir := strings.TrimPrefix(e.cfg.Sandbox.SnapshotURL, "file://")
	endedKey, liveKey := sandbox.SnapshotKey(ended.ID(), 1), sandbox.SnapshotKey(live.ID(), 1)
	if !e.snapshotExists(endedKey) || !e.snapshotExists(liveKey) {
		t.Fatal("the turns left no snapshots")
	}
	before := workspacesOf(t, root)
	if before[ended.ID()] == "" || before[live.ID()] == "" {
		t.Fatalf("workspaces before the sweep: %v", before)
	}
	if err := e.c.TerminateWorkflow(e.ctx, ended.ID(), "", "test: end without /destroy"); err != nil {
		t.Fatal(err)
	}
	ageAll(t, root)
	ageAll(t, snapDir)

	// Another deployment on the same host and store.
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
	otherID, err := workerapp.DeploymentID(e.ctx, oc, e.cfg.Temporal.Namespace, e.cfg.Temporal.TaskQueue)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := local.New(local.Options{Root: root, Deployment: otherID, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	store, err := blobstore.Open(e.ctx, e.cfg.Sandbox.SnapshotURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if removed := workerapp.SweepOrphans(e.ctx, oc, []sandbox.Backend{ob}, e.log); len(removed) != 0 {
		t.Fatalf("another deployment's sweep removed workspaces %q", removed)
	}
	if swept := workerapp.SweepSnapshots(e.ctx, oc, store, otherID, e.log); len(swept) != 0 {
		t.Fatalf("another deployment's sweep deleted the snapshots of %q", swept)
	}
	if got := workspacesOf(t, root); len(got) != 2 || !e.snapshotExists(endedKey) {
		t.Fatalf("after another deployment's sweep: workspaces %v, ended snapshot kept %v", got, e.snapshotExists(endedKey))
	}

	// This deployment's own sweep.
	swept := e.worker.Sweep(e.ctx)
	if !slices.Equal(swept.Sandboxes, []string{before[ended.ID()]}) || !slices.Equal(swept.Snapshots, []string{ended.ID()}) {
		t.Fatalf("sweep removed sandboxes %q and snapshots of %q; want the ended session's %q only", swept.Sandboxes, swept.Snapshots, before[ended.ID()])
	}
	after := workspacesOf(t, root)
	if _, ok := after[ended.ID()]; ok {
		t.Error("the ended session's workspace survived the sweep")
	}
	if after[live.ID()] != before[live.ID()] {
		t.Errorf("the live session's workspace changed: %v", after)
	}
	if e.snapshotExists(endedKey) {
		t.Error("the ended session's snapshot survived the sweep")
	}
	if !e.snapshotExists(liveKey) {
		t.Error("the sweep deleted the live session's snapshot")
	}
	// The live session carries on in its workspace.
	ts := e.turn(live, 2, "still there?",
		fakeopenai.ToolCallStep("live2", "shell", shell("cat f.txt")),
		fakeopenai.FinalStep("yes"))
	if got := cmdOut(t, onlyCall(t, ts), "cat f.txt"); got != "live" {
		t.Fatalf("live session after the sweep: %q", got)
	}
}
