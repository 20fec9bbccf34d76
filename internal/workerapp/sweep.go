package workerapp

import (
	"context"
	"errors"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/sandbox"
)

// sweeper is a backend that can remove sandboxes whose session is gone.
type sweeper interface {
	Sweep(ctx context.Context, alive func(sessionID string) (bool, error)) ([]string, error)
}

// SessionAlive reports whether the session workflow is still running. A
// closed or unknown workflow is not alive; any other error is returned so
// that sweeping keeps the sandbox when in doubt.
func SessionAlive(ctx context.Context, c client.Client) func(string) (bool, error) {
	return func(id string) (bool, error) {
		resp, err := c.DescribeWorkflowExecution(ctx, id, "")
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return resp.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
	}
}

// SweepOrphans removes sandboxes of every backend that supports it whose
// session is gone, and returns what was removed.
func SweepOrphans(ctx context.Context, c client.Client, backends []sandbox.Backend, log *slog.Logger) []string {
	var removed []string
	for _, b := range backends {
		s, ok := b.(sweeper)
		if !ok {
			continue
		}
		got, err := s.Sweep(ctx, SessionAlive(ctx, c))
		if err != nil {
			log.Warn("orphan sweep", "backend", b.Name(), "error", err)
		}
		removed = append(removed, got...)
	}
	if len(removed) > 0 {
		log.Info("removed orphan sandboxes", "count", len(removed))
	}
	return removed
}

// snapshotStore is what SweepSnapshots needs of the snapshot store
// (blobstore.Store).
type snapshotStore interface {
	Claim(ctx context.Context, deployment string) (string, error)
	SessionIDs(ctx context.Context) ([]string, error)
	DeleteOlder(ctx context.Context, prefix string, cutoff time.Time) (int, error)
}

// SweepSnapshots deletes the snapshots of sessions that ended without
// /destroy (terminated, timed out, or gone from this cluster) and returns
// the sessions it cleaned up. It sweeps only a store this deployment owns
// (the first deployment to use a store claims it), so deployments sharing
// a bucket never delete each other's snapshots; a session whose state is
// unsure keeps its snapshots, and snapshots written within
// sandbox.SweepGrace stay (they may be a fork's, copied before its
// workflow starts, or a new session's of a reused ID).
func SweepSnapshots(ctx context.Context, c client.Client, store snapshotStore, deployment string, log *slog.Logger) []string {
	owner, err := store.Claim(ctx, deployment)
	if err != nil {
		log.Warn("snapshot sweep", "error", err)
		return nil
	}
	if owner != deployment {
		log.Warn("not sweeping snapshots: the store belongs to another deployment", "owner", owner, "deployment", deployment)
		return nil
	}
	ids, err := store.SessionIDs(ctx)
	if err != nil {
		log.Warn("snapshot sweep", "error", err)
		return nil
	}
	cutoff := time.Now().Add(-sandbox.SweepGrace)
	alive := SessionAlive(ctx, c)
	var swept []string
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		if id == "" {
			continue
		}
		live, err := alive(id)
		if err != nil {
			log.Warn("snapshot sweep: keeping the snapshots of a session whose state is unknown", "workflow_id", id, "error", err)
			continue
		}
		if live {
			continue
		}
		n, err := store.DeleteOlder(ctx, sandbox.SessionPrefix(id), cutoff)
		if err != nil {
			log.Warn("snapshot sweep", "workflow_id", id, "error", err)
		}
		if n > 0 {
			log.Info("deleted the snapshots of an ended session", "workflow_id", id, "count", n)
			swept = append(swept, id)
		}
	}
	return swept
}

// objectStore is what CollectObjects needs of the snapshot store.
type objectStore interface {
	sandbox.SnapshotStore
	Claim(ctx context.Context, deployment string) (string, error)
}

// CollectObjects deletes the workspace content objects no session's
// snapshot names any more (sandbox.CollectObjects), in a store this
// deployment owns, and returns how many it deleted.
func CollectObjects(ctx context.Context, store objectStore, deployment string, log *slog.Logger) int {
	owner, err := store.Claim(ctx, deployment)
	if err != nil || owner != deployment {
		return 0 // SweepSnapshots says why
	}
	rep, err := sandbox.CollectObjects(ctx, store, time.Now())
	if err != nil {
		log.Error("collecting unreferenced workspace objects stopped; storage is not reclaimed until the named manifest is readable or deleted", "error", err)
		return rep.Deleted
	}
	if rep.Deleted > 0 {
		log.Info("deleted workspace objects no snapshot names", "deleted", rep.Deleted, "objects", rep.Objects, "manifests", rep.Manifests)
	}
	return rep.Deleted
}
