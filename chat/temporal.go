package chat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandbot/sandbot/session"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// TemporalSessions implements Sessions with a Temporal client: updates and
// queries on the session workflow whose ID is the thread's Location.ID().
// It keeps no state of its own, so any number of bot replicas can share the
// same workflows. It is safe for concurrent use.
type TemporalSessions struct {
	client client.Client
	opts   TemporalOptions
}

var _ Sessions = (*TemporalSessions)(nil)

// TemporalOptions configures TemporalSessions.
type TemporalOptions struct {
	// TaskQueue is where new sessions start ("" means session.TaskQueue).
	TaskQueue string
	// Indexed says the namespace has the Sandbot* search attributes
	// (session.SearchAttributeTypes): List then filters on the server.
	// Sessions started with Settings.Indexed get them set at start either
	// way.
	Indexed bool
	// DecisionKey signs every update the bot sends (session.Sign): the
	// worker's DecisionGuard refuses updates without a valid signature, so
	// only holders of the key can decide for people.
	DecisionKey []byte
	// Now is the signing clock (default time.Now).
	Now func() time.Time
	// Namespace is the client's namespace, for the one call that needs it
	// spelled out (ResetStickyTaskQueue, see query). Empty disables that
	// fallback.
	Namespace string
}

// NewTemporalSessions returns Sessions over c.
func NewTemporalSessions(c client.Client, opts TemporalOptions) *TemporalSessions {
	if opts.TaskQueue == "" {
		opts.TaskQueue = session.TaskQueue
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &TemporalSessions{client: c, opts: opts}
}

// sendUpdateID is the update ID of a chat message. Temporal answers a
// repeated update ID on the same run with the first outcome, and the
// workflow dedupes by EventID across runs, so a redelivered event never
// becomes a second turn.
func sendUpdateID(eventID string) string { return "msg:" + eventID }

// Send implements Sessions with update-with-start: the first message of a
// thread starts the session (or a new one, if the thread's session ended),
// later ones reach the running one.
func (t *TemporalSessions) Send(ctx context.Context, start session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
	if req.EventID == "" {
		return session.MessageResponse{}, errors.New("temporal: send: message has no event ID, so redeliveries could not be recognised")
	}
	id := start.Location.ID()
	opts := client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                t.opts.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}
	if start.Settings.Indexed {
		opts.TypedSearchAttributes = session.StartSearchAttributes(start)
	}
	op := t.client.NewWithStartWorkflowOperation(opts, session.WorkflowName, start)
	session.Sign(t.opts.DecisionKey, id, session.UpdateSendMessage, &req, t.opts.Now())
	h, err := t.client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{
			UpdateID:     sendUpdateID(req.EventID),
			UpdateName:   session.UpdateSendMessage,
			Args:         []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		},
	})
	var resp session.MessageResponse
	if err == nil {
		err = h.Get(ctx, &resp)
	}
	if err != nil {
		return session.MessageResponse{}, translate("send", id, err)
	}
	return resp, nil
}

// update runs one update and waits for its result.
func (t *TemporalSessions) update(ctx context.Context, id, name string, arg session.Signed, out any) error {
	session.Sign(t.opts.DecisionKey, id, name, arg, t.opts.Now())
	h, err := t.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   name,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, out)
	}
	if err != nil {
		return translate(name, id, err)
	}
	return nil
}

// query runs one query on the latest run of id.
func (t *TemporalSessions) query(ctx context.Context, id, name string, out any, args ...any) error {
	first := ctx
	if dl, ok := ctx.Deadline(); ok && t.opts.Namespace != "" {
		// Keep half of the time for the retry below.
		var cancel context.CancelFunc
		first, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer cancel()
	}
	err := t.queryOnce(first, id, name, out, args...)
	if err != nil && ctx.Err() == nil && t.opts.Namespace != "" && stuckQuery(err) {
		// A query Temporal could not hand to any worker. The chaos suite
		// saw a session's queries fail for minutes after worker deaths
		// and server restarts while its updates went through: the server
		// kept routing queries to a sticky queue (one worker process's
		// cache) that no live worker polled. Resetting stickiness sends
		// the next tasks, this query's retry included, to the session's
		// normal task queue, which every worker polls.
		_, rerr := t.client.WorkflowService().ResetStickyTaskQueue(ctx, &workflowservice.ResetStickyTaskQueueRequest{
			Namespace: t.opts.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: id},
		})
		if rerr == nil {
			err = t.queryOnce(ctx, id, name, out, args...)
		}
	}
	if err != nil {
		return translate(name, id, err)
	}
	return nil
}

func (t *TemporalSessions) queryOnce(ctx context.Context, id, name string, out any, args ...any) error {
	v, err := t.client.QueryWorkflow(ctx, id, "", name, args...)
	if err == nil {
		err = v.Get(out)
	}
	return err
}

// stuckQuery reports whether a query failed for want of a worker to take
// it (timed out, or no poller seen), rather than being answered with an
// error.
func stuckQuery(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &deadline) || errors.As(err, &unavailable) || strings.Contains(err.Error(), "no poller seen")
}

// TurnState implements Sessions.
func (t *TemporalSessions) TurnState(ctx context.Context, id string) (session.TurnState, error) {
	var ts session.TurnState
	err := t.query(ctx, id, session.QueryTurnState, &ts)
	return ts, err
}

// Approve implements Sessions. A decision the session refuses because
// this very click (req.Click) decided the call already, through another
// replica's copy of it, is the success it is: Repeat, no error.
func (t *TemporalSessions) Approve(ctx context.Context, id string, req session.ApproveRequest) (session.ApproveResponse, error) {
	var r session.ApproveResponse
	err := t.update(ctx, id, session.UpdateApprove, &req, &r)
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == session.ErrTypeClickDecided {
		return session.ApproveResponse{Repeat: true}, nil
	}
	return r, err
}

// Stop implements Sessions.
func (t *TemporalSessions) Stop(ctx context.Context, id string, req session.StopRequest) (session.StopResponse, error) {
	var r session.StopResponse
	err := t.update(ctx, id, session.UpdateStop, &req, &r)
	return r, err
}

// Pause implements Sessions.
func (t *TemporalSessions) Pause(ctx context.Context, id string, req session.PauseRequest) (session.PauseResponse, error) {
	var r session.PauseResponse
	err := t.update(ctx, id, session.UpdatePause, &req, &r)
	return r, err
}

// Compact implements Sessions.
func (t *TemporalSessions) Compact(ctx context.Context, id string, req session.CompactRequest) (session.CompactResponse, error) {
	var r session.CompactResponse
	err := t.update(ctx, id, session.UpdateCompact, &req, &r)
	return r, err
}

// Rewind implements Sessions.
func (t *TemporalSessions) Rewind(ctx context.Context, id string, req session.RewindRequest) (session.RewindResponse, error) {
	var r session.RewindResponse
	err := t.update(ctx, id, session.UpdateRewind, &req, &r)
	return r, err
}

// SetModel implements Sessions.
func (t *TemporalSessions) SetModel(ctx context.Context, id string, req session.SetModelRequest) (session.SetModelResponse, error) {
	var r session.SetModelResponse
	err := t.update(ctx, id, session.UpdateSetModel, &req, &r)
	return r, err
}

// SetTitle implements Sessions.
func (t *TemporalSessions) SetTitle(ctx context.Context, id string, req session.SetTitleRequest) (session.SetTitleResponse, error) {
	var r session.SetTitleResponse
	err := t.update(ctx, id, session.UpdateSetTitle, &req, &r)
	return r, err
}

// SetRepo implements Sessions.
func (t *TemporalSessions) SetRepo(ctx context.Context, id string, req session.SetRepoRequest) (session.SetRepoResponse, error) {
	var r session.SetRepoResponse
	err := t.update(ctx, id, session.UpdateSetRepo, &req, &r)
	return r, err
}

// Diff implements Sessions.
func (t *TemporalSessions) Diff(ctx context.Context, id string, req session.DiffRequest) (session.DiffResponse, error) {
	var r session.DiffResponse
	err := t.update(ctx, id, session.UpdateDiff, &req, &r)
	return r, err
}

// OpenPR implements Sessions.
func (t *TemporalSessions) OpenPR(ctx context.Context, id string, req session.OpenPRRequest) (session.OpenPRResponse, error) {
	var r session.OpenPRResponse
	err := t.update(ctx, id, session.UpdateOpenPR, &req, &r)
	return r, err
}

// Resume implements Sessions.
func (t *TemporalSessions) Resume(ctx context.Context, id string, req session.ResumeRequest) (session.PauseResponse, error) {
	var r session.PauseResponse
	err := t.update(ctx, id, session.UpdateResume, &req, &r)
	return r, err
}

// Destroy implements Sessions.
func (t *TemporalSessions) Destroy(ctx context.Context, id string, req session.DestroyRequest) (session.DestroyResponse, error) {
	var r session.DestroyResponse
	err := t.update(ctx, id, session.UpdateDestroy, &req, &r)
	return r, err
}

// SetBackend implements Sessions.
func (t *TemporalSessions) SetBackend(ctx context.Context, id string, req session.SetBackendRequest) (session.SetBackendResponse, error) {
	var r session.SetBackendResponse
	err := t.update(ctx, id, session.UpdateSetBackend, &req, &r)
	return r, err
}

// Fork implements Sessions.
func (t *TemporalSessions) Fork(ctx context.Context, id string, req session.ForkRequest) (session.ForkResponse, error) {
	var r session.ForkResponse
	err := t.update(ctx, id, session.UpdateFork, &req, &r)
	return r, err
}

// RecordChatRef implements Sessions.
func (t *TemporalSessions) RecordChatRef(ctx context.Context, id string, req session.ChatRefRequest) error {
	return t.update(ctx, id, session.UpdateChatRef, &req, nil)
}

// ClaimFinal implements Sessions.
func (t *TemporalSessions) ClaimFinal(ctx context.Context, id string, req session.ClaimFinalRequest) (session.ClaimFinalResponse, error) {
	var out session.ClaimFinalResponse
	err := t.update(ctx, id, session.UpdateClaimFinal, &req, &out)
	return out, err
}

// ClaimWatch implements Sessions. A claim the workflow refuses because
// another replica's lease runs is a plain answer, not an error; a session
// whose build predates the lease answers ErrNoWatchLease.
func (t *TemporalSessions) ClaimWatch(ctx context.Context, id string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
	var out session.ClaimWatchResponse
	err := t.update(ctx, id, session.UpdateClaimWatch, &req, &out)
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.Type() == session.ErrTypeWatchLeaseHeld:
		return session.ClaimWatchResponse{}, nil
	case errors.As(err, &appErr) && appErr.Type() == session.ErrTypeStaleRelease:
		// The hold being released was renewed (or ended) since: there is
		// nothing of it to give up.
		return session.ClaimWatchResponse{}, nil
	case err != nil && strings.Contains(err.Error(), "unknown update"):
		return out, fmt.Errorf("%w: %w", ErrNoWatchLease, err)
	}
	return out, err
}

// Info implements Sessions.
func (t *TemporalSessions) Info(ctx context.Context, id string) (session.Info, error) {
	var r session.Info
	err := t.query(ctx, id, session.QueryInfo, &r)
	return r, err
}

// History implements Sessions.
func (t *TemporalSessions) History(ctx context.Context, id string, req session.HistoryRequest) ([]session.HistoryEntry, error) {
	var r []session.HistoryEntry
	err := t.query(ctx, id, session.QueryHistory, &r, req)
	return r, err
}

// SharedFile implements Sessions with the shared_file query.
func (t *TemporalSessions) SharedFile(ctx context.Context, id string, req session.SharedFileRequest) (session.SharedFileData, error) {
	var r session.SharedFileData
	err := t.query(ctx, id, session.QuerySharedFile, &r, req)
	return r, err
}

// listQuery is the visibility query for f. Without search attributes,
// platform, workspace, channel and owner are filtered after listing.
func listQuery(f ListFilter, indexed bool) string {
	q := fmt.Sprintf("WorkflowType = %s", quoteVisibility(session.WorkflowName))
	if f.ActiveOnly {
		q += " AND ExecutionStatus = 'Running'"
	}
	if !indexed {
		return q
	}
	for _, c := range []struct{ attr, value string }{
		{session.SAPlatform.GetName(), f.Platform},
		{session.SAChannel.GetName(), f.Channel},
		{session.SAOwner.GetName(), f.Owner},
	} {
		if c.value != "" {
			q += fmt.Sprintf(" AND %s = %s", c.attr, quoteVisibility(c.value))
		}
	}
	if f.TurnActive {
		q += fmt.Sprintf(" AND %s = true", session.SAActiveTurn.GetName())
	}
	return q
}

// quoteVisibility quotes a string literal for a visibility query.
func quoteVisibility(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// matches reports whether loc passes the location part of f.
func (f ListFilter) matches(loc session.Location) bool {
	return (f.Platform == "" || f.Platform == loc.Platform) &&
		(f.Workspace == "" || f.Workspace == loc.Workspace) &&
		(f.Channel == "" || f.Channel == loc.Channel)
}

// List implements Sessions with the visibility API. Closed runs of a
// workflow ID that has a newer run are dropped, so each thread appears once.
func (t *TemporalSessions) List(ctx context.Context, f ListFilter) ([]SessionSummary, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	seen := map[string]bool{}
	var out []SessionSummary
	var token []byte
	for len(out) < limit {
		resp, err := t.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         listQuery(f, t.opts.Indexed),
			PageSize:      int32(min(limit, 1000)),
			NextPageToken: token,
		})
		if err != nil {
			return out, translate("list", "", err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			loc, err := session.ParseID(id)
			if err != nil || seen[id] || !f.matches(loc) {
				continue
			}
			seen[id] = true
			s := SessionSummary{
				WorkflowID: id,
				Location:   loc,
				Running:    e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
			}
			if ts := e.GetStartTime(); ts != nil {
				s.StartedAt = ts.AsTime()
			}
			if ts := e.GetCloseTime(); ts != nil {
				s.ClosedAt = ts.AsTime()
			}
			if f.Owner != "" && !t.opts.Indexed {
				info, err := t.Info(ctx, id)
				if err != nil || info.Owner.ID != f.Owner {
					continue
				}
			}
			out = append(out, s)
			if len(out) == limit {
				break
			}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	slices.SortStableFunc(out, func(a, b SessionSummary) int { return b.StartedAt.Compare(a.StartedAt) })
	return out, nil
}

// translate turns a Temporal client error into a *UserError where the user
// can act on it, and into a wrapped internal error otherwise.
func translate(op, id string, err error) error {
	wrapped := fmt.Errorf("temporal: %s %s: %w", op, id, err)
	var (
		appErr   *temporal.ApplicationError
		notFound *serviceerror.NotFound
		canceled *temporal.CanceledError
		deadline *serviceerror.DeadlineExceeded
	)
	switch {
	case errors.As(err, &appErr):
		// A validator's rejection or a handler's error: written for users.
		return &UserError{Msg: appErr.Message(), Err: wrapped}
	case errors.As(err, &notFound):
		return &UserError{
			Msg: "There is no running session in this thread (it may have been destroyed). Send a message to start a new one.",
			Err: fmt.Errorf("%w: %w", ErrNoSession, wrapped),
		}
	case errors.As(err, &canceled):
		return &UserError{Msg: "The session cancelled the request.", Err: wrapped}
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &deadline):
		return &UserError{Msg: "The session did not answer in time (are the workers running?). Try again in a moment.", Err: wrapped}
	}
	return wrapped
}
