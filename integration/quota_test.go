package integration

import (
	"strings"
	"testing"

	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/sandbox"
)

// withQuota bounds workspaces to 1 MiB and snapshots to 64 KiB.
func withQuota(c *config.Config) {
	c.Session.ApprovalMode = "never"
	c.Sandbox.WorkspaceQuota = 1 << 20
	c.Sandbox.SnapshotMax = 64 << 10
}

// A session that fills its disk: one write past the quota fails in the
// sandbox with "File too large"; files that together pass the quota make
// the turn's snapshot fail with a message naming the setting, and the last
// good snapshot stays the session's; random bytes under the quota but past
// the snapshot cap are refused the same way. Run on each backend.
func TestWorkspaceQuotaAndSnapshotCap(t *testing.T) {
	for _, backend := range []string{"local", "docker"} {
		t.Run(backend, func(t *testing.T) {
			opts := []stackOption{withQuota}
			if backend == "docker" {
				opts = append(opts, onDocker)
			}
			e := newThreadEnv(t, backend == "docker", opts...)
			th := e.thread("quota-" + backend)

			ts := e.turn(th, 1, "start small",
				fakeopenai.ToolCallStep("q1", "shell", shell("echo small > small.txt")),
				fakeopenai.FinalStep("ok"))
			if len(ts.Notices) != 0 || !e.snapshotExists(sandbox.SnapshotKey(th.ID(), 1)) {
				t.Fatalf("first turn: notices %q; want none and a snapshot", ts.Notices)
			}

			ts = e.turn(th, 2, "one big file",
				fakeopenai.ToolCallStep("q2", "shell", shell("head -c 3000000 /dev/zero > big.bin; echo rc=$?; wc -c < big.bin; rm big.bin")),
				fakeopenai.FinalStep("ok"))
			out := cmdOut(t, onlyCall(t, ts), "head -c 3000000 /dev/zero > big.bin; echo rc=$?; wc -c < big.bin; rm big.bin")
			if strings.Contains(out, "rc=0") || !strings.Contains(out, "\n1048576\n") || !strings.Contains(out, "File") {
				t.Errorf("a write past the quota: %q; want it refused at 1048576 bytes", out)
			}

			ts = e.turn(th, 3, "many files",
				fakeopenai.ToolCallStep("q3", "shell", shell("for i in 1 2 3; do head -c 500000 /dev/zero > part$i; done")),
				fakeopenai.FinalStep("ok"))
			notice := strings.Join(ts.Notices, "\n")
			for _, want := range []string{"The workspace snapshot failed", "over its quota of 1 MiB", "SANDBOT_SANDBOX_WORKSPACE_QUOTA", "delete files"} {
				if !strings.Contains(notice, want) {
					t.Errorf("notices %q lack %q", ts.Notices, want)
				}
			}
			if e.snapshotExists(sandbox.SnapshotKey(th.ID(), 3)) {
				t.Error("the over-quota workspace was snapshotted")
			}

			ts = e.turn(th, 4, "random bytes",
				fakeopenai.ToolCallStep("q4", "shell", shell("rm part1 part2 part3; head -c 200000 /dev/urandom > noise")),
				fakeopenai.FinalStep("ok"))
			notice = strings.Join(ts.Notices, "\n")
			for _, want := range []string{"The workspace snapshot failed", "cap of 64 KiB", "SANDBOT_SANDBOX_SNAPSHOT_MAX"} {
				if !strings.Contains(notice, want) {
					t.Errorf("notices %q lack %q", ts.Notices, want)
				}
			}
			// The last good snapshot (turn 1's, or turn 2's where the
			// backend's fingerprint saw turn 2 change the workspace) is
			// still the session's.
			key := e.info(th).Snapshot
			if (key != sandbox.SnapshotKey(th.ID(), 1) && key != sandbox.SnapshotKey(th.ID(), 2)) || !e.snapshotExists(key) {
				t.Errorf("the session's snapshot is %q (exists: %v); want the last good one, of turn 1 or 2", key, key != "" && e.snapshotExists(key))
			}
		})
	}
}
