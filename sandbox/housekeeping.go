package sandbox

import (
	"context"
	"fmt"
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

// SessionVerdicts answers a sweeper's question "has this session ended?"
// asking alive (a Temporal look-up, say) at most once per session. A
// session whose answer is unsure counts as alive, so its sandbox stays;
// the errors are kept for the sweeper to report after the others were
// handled.
type SessionVerdicts struct {
	alive func(sessionID string) (bool, error)
	live  map[string]bool
	// Errs are the failed look-ups.
	Errs []error
}

// NewSessionVerdicts wraps alive.
func NewSessionVerdicts(alive func(sessionID string) (bool, error)) *SessionVerdicts {
	return &SessionVerdicts{alive: alive, live: map[string]bool{}}
}

// Ended reports whether the session is known to have ended.
func (v *SessionVerdicts) Ended(sessionID string) bool {
	live, seen := v.live[sessionID]
	if !seen {
		var err error
		if live, err = v.alive(sessionID); err != nil {
			v.Errs = append(v.Errs, fmt.Errorf("session %q: %w", sessionID, err))
			live = true
		}
		v.live[sessionID] = live
	}
	return !live
}
