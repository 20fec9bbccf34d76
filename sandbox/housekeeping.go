package sandbox

import (
	"context"
	"strings"
)

// SuspendRequest asks for an idle sandbox to be suspended.
type SuspendRequest struct {
	Handle Handle `json:"handle"`
}

// SuspendResult says what happened.
type SuspendResult struct {
	// Suspended is false when the backend has nothing to suspend (a local
	// directory costs nothing while idle) or the sandbox is already gone.
	Suspended bool `json:"suspended"`
}

// Suspend stops an idle sandbox without losing its workspace, when the
// backend supports it (Suspender). The next Exec resumes it. Run it on the
// handle's TaskQueue after the workspace was snapshotted, so even a
// sandbox that is later lost can be restored.
func (a *Activities) Suspend(ctx context.Context, req SuspendRequest) (_ SuspendResult, err error) {
	defer func() { err = RedactError(a.Redactor, err) }()
	b, err := a.backend(req.Handle.Backend)
	if err != nil {
		return SuspendResult{}, err
	}
	// Housekeeping activities run with a heartbeat timeout (a dead host is
	// noticed in minutes, not after StartToClose), so they must beat while
	// they work, however long a large copy or delete takes.
	stop := heartbeatWhileRunning(ctx, nil)
	defer stop()
	s, ok := b.(Suspender)
	if !ok {
		return SuspendResult{}, nil
	}
	alive, err := b.Alive(ctx, req.Handle)
	if err != nil {
		return SuspendResult{}, classify("suspend", err)
	}
	if !alive {
		return SuspendResult{}, nil
	}
	if err := s.Suspend(ctx, req.Handle); err != nil {
		return SuspendResult{}, classify("suspend", err)
	}
	a.log().Info("suspended idle sandbox", "session_id", req.Handle.SessionID, "sandbox", req.Handle.ID)
	return SuspendResult{Suspended: true}, nil
}

// DeleteSnapshotsRequest names superseded snapshots to remove.
type DeleteSnapshotsRequest struct {
	Keys []string `json:"keys"`
}

// DeleteSnapshots removes snapshots a session no longer needs (each turn
// that changes the workspace writes a new one). Missing keys are not an
// error, so the activity can be retried.
func (a *Activities) DeleteSnapshots(ctx context.Context, req DeleteSnapshotsRequest) (err error) {
	defer func() { err = RedactError(a.Redactor, err) }()
	if a.Store == nil {
		return badRequest("sandbox: delete snapshots: no snapshot store configured")
	}
	// Housekeeping activities run with a heartbeat timeout (a dead host is
	// noticed in minutes, not after StartToClose), so they must beat while
	// they work, however long a large copy or delete takes.
	stop := heartbeatWhileRunning(ctx, nil)
	defer stop()
	for _, k := range req.Keys {
		if !strings.HasPrefix(k, "sessions/") || !strings.HasSuffix(k, ".tar") {
			return badRequest("sandbox: delete snapshots: %q is not a snapshot key", k)
		}
		if err := a.Store.Delete(ctx, k); err != nil {
			return classify("delete snapshot", err)
		}
	}
	return nil
}
