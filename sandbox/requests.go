package sandbox

import "time"

// Requests and results of the sandbox activities (see Activities). They are
// part of the session workflow's history, so fields are only ever added.

// EnsureRequest asks for a live sandbox for a session on a backend.
type EnsureRequest struct {
	SessionID string `json:"session_id"`
	Backend   string `json:"backend"`
	// Handle is the session's current sandbox, if any.
	Handle *Handle `json:"handle,omitempty"`
	// Snapshot is the key of the session's last workspace snapshot, used to
	// fill a newly created sandbox.
	Snapshot string            `json:"snapshot,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// EnsureResult describes the sandbox to use.
type EnsureResult struct {
	Handle Handle `json:"handle"`
	// Created is true when a new sandbox was made (first use, loss, or
	// backend switch).
	Created bool `json:"created,omitempty"`
	// Restored is true when the workspace was filled from Snapshot.
	Restored bool `json:"restored,omitempty"`
	// Notice is a user-facing sentence about what happened ("the sandbox was
	// lost and has been restored from the snapshot of turn 4"), or empty.
	Notice string `json:"notice,omitempty"`
	// Confinement says how the backend confines commands (Describer).
	Confinement string `json:"confinement,omitempty"`
	// Warning, when set, is shown on the first card of a sandbox made for
	// the session: it is unconfined, or shares the host's network.
	Warning string `json:"warning,omitempty"`
}

// ExecRequest runs the commands of one shell tool call, in order.
type ExecRequest struct {
	Handle   Handle   `json:"handle"`
	CallID   string   `json:"call_id"`
	Commands []string `json:"commands"`
	// Timeout applies to each command. The activity's own timeout is always
	// longer than len(Commands)*Timeout plus a margin.
	Timeout time.Duration `json:"timeout"`
	// OutputCap bounds stdout and stderr per command, in bytes.
	OutputCap int `json:"output_cap"`
}

// CommandResult is one command's outcome inside an ExecResult.
type CommandResult struct {
	Command string `json:"command"`
	Result
	// Interrupted reports that the command started but its outcome is
	// unknown (the worker running it died). It was not run again.
	Interrupted bool `json:"interrupted,omitempty"`
	// Skipped reports that the command never ran (the call was stopped or
	// the sandbox failed before its turn came).
	Skipped bool `json:"skipped,omitempty"`
	// Error says why the command could not be run at all (the sandbox
	// vanished, the backend failed) or that it was stopped. It is
	// user-facing text; Result holds whatever output was collected.
	Error string `json:"error,omitempty"`
}

// ExecResult is the outcome of an ExecRequest.
type ExecResult struct {
	Results []CommandResult `json:"results"`
}

// SnapshotRequest asks for the workspace to be saved if it changed.
type SnapshotRequest struct {
	Handle Handle `json:"handle"`
	// Key is the store key to write, chosen by the workflow (unique per
	// session and turn).
	Key string `json:"key"`
	// PrevFingerprint is the fingerprint of the last snapshot; when the
	// workspace still matches it nothing is written.
	PrevFingerprint string `json:"prev_fingerprint,omitempty"`
	// Base is the session's last snapshot (SaveWorkspace): the files it
	// names whose metadata did not change are not read again, and the
	// contents it names are not written again.
	Base string `json:"base,omitempty"`
}

// SnapshotResult reports what was saved.
type SnapshotResult struct {
	// Written is false when the workspace had not changed.
	Written     bool   `json:"written"`
	Key         string `json:"key,omitempty"`
	Fingerprint string `json:"fingerprint"`
	// Bytes is what was written to the store: the whole compressed
	// archive (Snapshot), or the new objects and the manifest
	// (SaveWorkspace).
	Bytes int64 `json:"bytes,omitempty"`
	// Objects counts the new content objects written (SaveWorkspace).
	Objects int `json:"objects,omitempty"`
	// Files and WorkspaceBytes are the workspace's regular files and
	// their total size (SaveWorkspace).
	Files          int   `json:"files,omitempty"`
	WorkspaceBytes int64 `json:"workspace_bytes,omitempty"`
}

// CopySnapshotRequest copies a snapshot under a new key (forks).
type CopySnapshotRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// DestroyRequest removes a session's sandbox and, optionally, its snapshots.
type DestroyRequest struct {
	SessionID       string  `json:"session_id"`
	Handle          *Handle `json:"handle,omitempty"`
	DeleteSnapshots bool    `json:"delete_snapshots"`
}
