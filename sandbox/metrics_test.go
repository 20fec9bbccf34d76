package sandbox_test

import (
	"testing"

	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/internal/metrics/metricstest"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/local"
)

// Each command is counted by backend and outcome and timed; each snapshot
// by outcome, with the stored bytes it reports and its duration.
func TestExecAndSnapshotsAreCounted(t *testing.T) {
	reg := metrics.NewRegistry()
	f := newFixture(t)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	before := metricstest.Gather(t, reg)
	if _, err := run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h, CallID: "c", Commands: []string{
		"echo hello > file", "exit 3",
	}}); err != nil {
		t.Fatal(err)
	}
	settle(t, f, h)
	first := f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("s", 1)})
	f.snapshot(t, sandbox.SnapshotRequest{Handle: h, Key: sandbox.SnapshotKey("s", 2), PrevFingerprint: first.Fingerprint})
	after := metricstest.Gather(t, reg)
	delta := func(name string, labels ...string) float64 {
		return after.Value(name, labels...) - before.Value(name, labels...)
	}
	if d := delta("sandbot_exec_commands_total", "backend", local.Name, "outcome", metrics.ExecOK); d != 1 {
		t.Errorf("ok commands: %v", d)
	}
	if d := delta("sandbot_exec_commands_total", "backend", local.Name, "outcome", metrics.ExecNonZero); d != 1 {
		t.Errorf("nonzero commands: %v", d)
	}
	if d := delta("sandbot_exec_duration_seconds", "backend", local.Name); d != 2 {
		t.Errorf("timed commands: %v", d)
	}
	if d := delta("sandbot_snapshots_total", "backend", local.Name, "outcome", metrics.SnapshotWritten); d != 1 {
		t.Errorf("written snapshots: %v", d)
	}
	if d := delta("sandbot_snapshots_total", "backend", local.Name, "outcome", metrics.SnapshotUnchanged); d != 1 {
		t.Errorf("unchanged snapshots: %v", d)
	}
	if d := after.Sum("sandbot_snapshot_stored_bytes", "backend", local.Name) - before.Sum("sandbot_snapshot_stored_bytes", "backend", local.Name); d != float64(first.Bytes) || d <= 0 {
		t.Errorf("stored bytes moved by %v, the snapshot stored %d", d, first.Bytes)
	}
	if d := delta("sandbot_snapshot_duration_seconds", "backend", local.Name); d != 1 {
		t.Errorf("timed snapshots: %v", d)
	}
}
