package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

func (s *sessionRun) validateFork(ctx workflow.Context, req session.ForkRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	if req.Location.Channel == "" || req.Location.Thread == "" {
		return fmt.Errorf("fork needs a new chat thread to live in")
	}
	if req.Location.ID() == s.id {
		return fmt.Errorf("a fork needs its own thread; this thread is the source session")
	}
	if req.Backend != "" && len(s.st.Settings.Backends) > 0 && !slices.Contains(s.st.Settings.Backends, req.Backend) {
		return fmt.Errorf("backend %q is not available; available backends: %s", req.Backend, strings.Join(s.st.Settings.Backends, ", "))
	}
	if req.AtTurn != 0 {
		if !s.checkpoints {
			return errors.New("this session's current run predates checkpoints; /fork @N works after its next continue-as-new (a plain /fork works now)")
		}
		if _, ok := s.st.checkpoint(req.AtTurn); !ok {
			return fmt.Errorf("turn %d has no checkpoint; the session keeps the ends of turns %s", req.AtTurn, s.st.keptTurns())
		}
	}
	return nil
}

// onFork starts a new session in req.Location from this session's last
// completed turn: a copy of the conversation up to that turn and a copy of
// that turn's workspace snapshot under the fork's own key, so the two never
// see each other's changes. The source keeps running; a turn in progress is
// not included.
func (s *sessionRun) onFork(ctx workflow.Context, req session.ForkRequest) (session.ForkResponse, error) {
	atTurn := s.st.Turn
	if s.turnActive {
		atTurn--
	}
	var msgs []session.Message
	for _, e := range s.st.Transcript {
		if e.Turn <= atTurn {
			msgs = append(msgs, e.Msg)
		}
	}
	snap, fp := s.st.Snapshot, s.st.Fingerprint
	if req.AtTurn != 0 {
		// From a checkpoint (validated; kept while the fork copies, as
		// checkpoints only go between turns and forksInFlight holds
		// their deletion).
		c, _ := s.st.checkpoint(req.AtTurn)
		atTurn, snap, fp = c.Turn, c.Key, c.Fingerprint
		msgs = msgs[:0]
		for _, e := range s.st.Transcript {
			if e.Turn <= atTurn {
				msgs = append(msgs, e.Msg)
			}
		}
	} else if s.turnActive && s.execRan {
		// The running turn may have changed the workspace after the last
		// snapshot was taken; that snapshot is still the consistent point
		// because snapshots are only written at turn boundaries.
		fp = ""
	}
	newID := req.Location.ID()
	backend := req.Backend
	if backend == "" {
		backend = s.st.Backend
	}
	seed := &session.ForkSeed{Transcript: msgs, Fingerprint: fp}
	s.forksInFlight++
	defer func() { s.forksInFlight-- }()
	if snap != "" {
		to := sandbox.SnapshotKey(newID, 0)
		err := workflow.ExecuteActivity(housekeepingOptions(ctx, session.BackendQueue(s.queue, s.st.Backend)), sandboxActs.CopySnapshot,
			sandbox.CopySnapshotRequest{From: snap, To: to}).Get(ctx, nil)
		if err != nil {
			return session.ForkResponse{}, fmt.Errorf("copy the workspace snapshot: %s", userError(err))
		}
		seed.Snapshot = to
	}
	if s.st.Repo != nil {
		// The fork keeps its own copy of the clone (a manifest: no data
		// is copied), so /diff still works when the source is destroyed,
		// and pushes to its own branch: it starts with no pull request.
		base := sandbox.RepoBaseKey(newID)
		err := workflow.ExecuteActivity(housekeepingOptions(ctx, session.BackendQueue(s.queue, s.st.Backend)), sandboxActs.CopySnapshot,
			sandbox.CopySnapshotRequest{From: s.st.Repo.Base, To: base}).Get(ctx, nil)
		if err != nil {
			return session.ForkResponse{}, fmt.Errorf("copy the repository's base snapshot: %s", userError(err))
		}
		r := *s.st.Repo
		r.Base, r.PR = base, nil
		seed.Repo = &r
	}
	title := req.Title
	if title == "" {
		title = s.st.Title
		if title == "" {
			title = "session"
		}
		title = "fork of " + title
	}
	owner := req.User
	if owner.ID == "" {
		owner = s.st.Owner
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            newID,
		TaskQueue:             s.queue,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	})
	child := workflow.ExecuteChildWorkflow(cctx, Session, Input{SessionInput: session.SessionInput{
		Location: req.Location, Owner: owner, Title: title, Backend: backend, Settings: s.st.Settings,
		Parent: s.id, ForkedAtTurn: atTurn, Seed: seed,
	}})
	var exec workflow.Execution
	if err := child.GetChildWorkflowExecution().Get(ctx, &exec); err != nil {
		return session.ForkResponse{}, fmt.Errorf("start the fork: %s", userError(err))
	}
	s.notice("Forked at turn %d into a new session (%s) by %s.", atTurn, title, displayName(owner))
	return session.ForkResponse{WorkflowID: exec.ID, AtTurn: atTurn, Backend: backend}, nil
}
