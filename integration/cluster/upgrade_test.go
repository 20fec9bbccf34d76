package cluster

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sandbot/sandbot/chat"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/pgtest"
	"github.com/sandbot/sandbot/session"
)

// oldCommit is the last commit before the watch-lease change (be30257,
// change ID "watch-lease" in workflows/policy.go): its workflow code
// records no watch-lease marker, and its sessions know no claim_watch.
const oldCommit = "35c0a931c0e9892111696197c1ce9e6c37d3c0d2"

// TestRollingUpgrade upgrades a worker host under the versioning policy
// (workflow.GetVersion on unversioned workers, docs/ARCHITECTURE.md) while
// a session is mid-turn. The session starts on cmd/worker built from
// oldCommit and runs its turn up to an approval; the host is then stopped
// and started again, same host ID and workspace root, with this tree's
// cmd/worker (whose workflow code changed: the watch-lease change). The
// approval is clicked after the upgrade: the new build replays the old
// history and finishes the turn in the old branch (no watch-lease marker
// in that run), and a new session on the new build records the marker.
func TestRollingUpgrade(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	oldBin, err := commitBinary(t, oldCommit, "cmd/worker")
	var missing errNoCommit
	if errors.As(err, &missing) {
		// A shallow clone or an export without history cannot build the
		// old worker; a full clone always can, so there it is a failure.
		if missing.noHistory || os.Getenv("CI") != "true" {
			t.Skipf("%v; the rolling upgrade needs the old build (a full clone, or git fetch --unshallow)", err)
		}
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, sharedCluster(t), "upgrade")
	old := w.startHost("host-u", oldBin)
	w.startBots(2)

	const oldAnswer = "Finished on the new build what the old build started."
	w.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("echo upgraded > upgrade.txt")), fakeopenai.FinalStep(oldAnswer))
	th := w.mention(alice, "a turn across the upgrade")
	ref, buttons := w.approvalButtons(th, 1)

	// The rolling upgrade of the host: the old build stops as an
	// orchestrator stops it, the new build starts in its place.
	old.Stop()
	upgraded := w.startHost("host-u", "")
	w.click(ref, alice, buttons[chat.ActionApprove])
	end := w.waitDone(th, 1)
	if end.Status != session.StatusComplete || len(end.ToolCalls) != 1 || end.ToolCalls[0].Status != session.CallCompleted {
		t.Fatalf("the old session's turn after the upgrade: %s", dump(end))
	}
	if n := w.posts(th, oldAnswer); n != 1 {
		t.Fatalf("the answer was posted %d times, want once", n)
	}
	if got := filesNamed(t, "upgrade.txt", upgraded); len(got) != 1 {
		t.Fatalf("upgrade.txt not in the host's workspace: %v", got)
	}
	h := w.history(th)
	if ids := h.changeIDs(); contains(ids, "watch-lease") || !contains(ids, "worker-policy") {
		t.Fatalf("the old session's run should carry the old build's markers only; change IDs %v", ids)
	}
	if ws := h.taskWorkers(); len(ws) == 0 || !strings.HasPrefix(ws[0], fmt.Sprint(old.Pid(), "@")) || !strings.HasPrefix(ws[len(ws)-1], fmt.Sprint(upgraded.Pid(), "@")) {
		t.Fatalf("workflow tasks should be completed first by the old build (pid %d), last by the new (pid %d): %v", old.Pid(), upgraded.Pid(), ws)
	}

	// A new session runs the new code.
	const newAnswer = "A new session on the new build."
	w.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("echo fresh > fresh.txt")), fakeopenai.FinalStep(newAnswer))
	th2 := w.mention(alice, "a session after the upgrade")
	ref2, buttons2 := w.approvalButtons(th2, 1)
	w.click(ref2, alice, buttons2[chat.ActionApprove])
	w.waitDone(th2, 1)
	if n := w.posts(th2, newAnswer); n != 1 {
		t.Fatalf("the new session's answer was posted %d times, want once", n)
	}
	if ids := w.history(th2).changeIDs(); !contains(ids, "watch-lease") {
		t.Fatalf("a new session should record the watch-lease marker; change IDs %v", ids)
	}
}

// noHistory reports whether this checkout cannot have old commits: no git,
// not a git work tree, or a shallow clone.
func noHistory(git, root string) bool {
	out, err := exec.Command(git, "-C", root, "rev-parse", "--is-shallow-repository").Output()
	return err != nil || strings.TrimSpace(string(out)) != "false"
}

// history is a session's current run's events.
type history []*historypb.HistoryEvent

func (w *world) history(th chat.Thread) history {
	w.t.Helper()
	it := w.cl.GetWorkflowHistory(w.ctx, th.ID(), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var h history
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			w.t.Fatalf("history of %s: %v", th.ID(), err)
		}
		h = append(h, e)
	}
	return h
}

// changeIDs are the change IDs of the run's version markers
// (workflow.GetVersion), in order.
func (h history) changeIDs() []string {
	var out []string
	for _, e := range h {
		m := e.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "Version" {
			continue
		}
		var id string
		if err := converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["change-id"], &id); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// taskWorkers are the identities of the workers that completed the run's
// workflow tasks, in order (an SDK identity is "pid@host@").
func (h history) taskWorkers() []string {
	var out []string
	for _, e := range h {
		if a := e.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			out = append(out, a.GetIdentity())
		}
	}
	return out
}

// errNoCommit is returned by commitBinary when the checkout does not have
// the commit; noHistory says whether it could not (see noHistory).
type errNoCommit struct {
	commit, why string
	noHistory   bool
}

func (e errNoCommit) Error() string {
	return fmt.Sprintf("commit %s is not in this checkout (%s); a full clone has it", e.commit, e.why)
}

// commitBinary builds cmdDir as of commit, from the commit's tree
// exported with git archive into a temporary directory (the repository's
// own state is only read).
func commitBinary(t testing.TB, commit, cmdDir string) (string, error) {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return "", errNoCommit{commit, "no git command", true}
	}
	if out, err := exec.Command(git, "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return "", errNoCommit{commit, strings.TrimSpace(string(out)), noHistory(git, root)}
	}
	return binary(t, cmdDir+"@"+commit, func(out string) error {
		src, err := os.MkdirTemp("", "sandbot-src-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(src)
		archive := exec.Command(git, "-C", root, "archive", "--format=tar", commit)
		r, err := archive.StdoutPipe()
		if err != nil {
			return err
		}
		var stderr strings.Builder
		archive.Stderr = &stderr
		if err := archive.Start(); err != nil {
			return err
		}
		if err := untar(r, src); err != nil {
			_ = archive.Process.Kill()
			_ = archive.Wait()
			return fmt.Errorf("git archive %s: %w", commit, err)
		}
		if err := archive.Wait(); err != nil {
			return fmt.Errorf("git archive %s: %w: %s", commit, err, stderr.String())
		}
		return goBuild(src, "./"+cmdDir, out)
	}), nil
}

// untar extracts the regular files and directories of a tar stream into dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, dir+string(filepath.Separator)) {
			continue // pax headers and anything outside dir
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}
