package workflows

import (
	"errors"
	"fmt"
	"strings"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// sessionRun is one run of the session workflow: the durable State plus the
// transient control fields that only make sense inside this run.
type sessionRun struct {
	st State
	// watchLease: this run keeps finished, unposted turns indexed as
	// needing the bot (changeWatchLease).
	watchLease bool
	// transcriptRefs: this run's model calls carry a stored transcript's
	// ref and the messages added since (changeTranscriptRefs).
	transcriptRefs bool
	// compaction: this run compacts a conversation that no longer fits
	// (changeCompaction).
	compaction bool
	// checkpoints: this run writes incremental snapshots and keeps a
	// checkpoint per completed turn (changeCheckpoints).
	checkpoints bool
	// countCarry: this run's history limit counts what continue-as-new
	// carries (changeHistoryCountsCarry). startBytes is the history's size
	// at the run's first workflow task (its input, the state carried in);
	// carryBytes the encoded size of what continuing as new would carry
	// out, measured at each boundary of the main loop.
	countCarry             bool
	startBytes, carryBytes int
	// cancelIdleTimer: this run cancels the idle-suspend timer when work
	// comes first (changeCancelIdleTimer; awaitWork).
	cancelIdleTimer bool
	// rewind is a /rewind waiting for the main loop; rewound is its answer.
	rewind  *session.RewindRequest
	rewound rewindResult
	// saved is what this turn's incremental snapshot wrote.
	saved sandbox.SnapshotResult
	// compactRequested is set by /compact until the main loop compacted;
	// compacted is what the last compaction did.
	compactRequested bool
	compacted        session.CompactResponse
	// repoDone answers /repo once the main loop cloned (or failed to);
	// prInFlight is set while /pr pushes.
	repoDone   *repoResult
	prInFlight bool
	// turnModel is the model of the running turn (taken at its start, so
	// a /model during a turn applies to the next one).
	turnModel string
	log       log.Logger
	id        string
	// queue is this workflow's task queue; activity queues derive from it.
	queue string

	// Control (not carried through continue-as-new).
	turnActive       bool
	cancelTurn       workflow.CancelFunc
	stopBy           *session.User
	pauseRequested   bool
	destroyRequested bool
	destroyBy        session.User
	cleanedUp        bool
	decision         *session.DecisionRecord
	execRan          bool
	turnsThisRun     int
	lastIndex        *indexed
	forksInFlight    int
	// forceEnsure makes the next sandbox use go through Ensure even with a
	// known handle (the handle's sandbox was reported gone).
	forceEnsure bool
	// shared holds the bytes of the current turn's shared files until the
	// bot records their post (never in State; see shareFile).
	shared map[string][]byte
}

// Session is the session workflow. It registers its handlers before doing
// anything else, then loops: wait for messages, run a turn, and continue as
// new at a turn boundary when history grows large.
func Session(ctx workflow.Context, in Input) (session.SessionResult, error) {
	s := newSession(ctx, in)
	s.watchLease = workflow.GetVersion(ctx, changeWatchLease, workflow.DefaultVersion, 1) >= 1
	s.transcriptRefs = workflow.GetVersion(ctx, changeTranscriptRefs, workflow.DefaultVersion, 1) >= 1
	s.compaction = s.transcriptRefs && workflow.GetVersion(ctx, changeCompaction, workflow.DefaultVersion, 1) >= 1
	s.checkpoints = workflow.GetVersion(ctx, changeCheckpoints, workflow.DefaultVersion, 1) >= 1
	s.countCarry = workflow.GetVersion(ctx, changeHistoryCountsCarry, workflow.DefaultVersion, 1) >= 1
	s.cancelIdleTimer = workflow.GetVersion(ctx, changeCancelIdleTimer, workflow.DefaultVersion, 1) >= 1
	s.startBytes = workflow.GetInfo(ctx).GetCurrentHistorySize()
	if err := s.register(ctx); err != nil {
		return session.SessionResult{}, err
	}
	s.takeWorkerPolicy(ctx)
	return s.run(ctx)
}

func newSession(ctx workflow.Context, in Input) *sessionRun {
	info := workflow.GetInfo(ctx)
	s := &sessionRun{log: workflow.GetLogger(ctx), id: info.WorkflowExecution.ID, queue: info.TaskQueueName}
	if in.State != nil {
		s.st = *in.State
		// The SDK keeps the decoded input for the whole run: emptied, it
		// no longer holds the carried transcript's entries once the run's
		// own state has moved past them (memory only; no command changes).
		*in.State = State{}
		s.st.Runs++
		s.st.Settings = s.st.Settings.WithDefaults()
		return s
	}
	s.st = State{
		Location:     in.Location,
		Owner:        in.Owner,
		Title:        in.Title,
		Settings:     in.Settings.WithDefaults(),
		Backend:      in.Backend,
		Parent:       in.Parent,
		ForkedAtTurn: in.ForkedAtTurn,
		CreatedAt:    workflow.Now(ctx),
		Runs:         1,
	}
	if s.st.Backend == "" {
		s.st.Backend = "local"
	}
	if in.Seed != nil {
		for _, m := range in.Seed.Transcript {
			s.st.appendTranscript(session.HistoryEntry{Turn: 0, At: s.st.CreatedAt, Msg: m})
		}
		s.st.Snapshot = in.Seed.Snapshot
		s.st.Fingerprint = in.Seed.Fingerprint
		s.st.Repo = in.Seed.Repo
	}
	s.st.Last = session.TurnState{Status: session.StatusIdle, Backend: s.st.Backend}
	return s
}

// touch marks a visible change.
func (s *sessionRun) touch() {
	s.st.Version++
	s.st.Last.Version = s.st.Version
}

func (s *sessionRun) notice(format string, args ...any) {
	s.st.Last.Notices = append(s.st.Last.Notices, fmt.Sprintf(format, args...))
	s.touch()
}

// maxCarried bounds the notices kept for the next turn's card.
const maxCarried = 5

// noticeNext is notice for what the user must learn even when it happens
// between turns: a backend switch asked for with /backend is carried out
// at the turn boundary, after the finished turn's card had its last edit,
// and a switch that could not be made (the snapshot store full, say) said
// so only on that card, which nobody draws again. So a notice made while
// no turn runs is also kept for the next turn's card. (The soak under
// faults counted a /backend local answered and not in effect, with
// nothing in the thread saying why.)
func (s *sessionRun) noticeNext(format string, args ...any) {
	s.notice(format, args...)
	if !s.turnActive {
		s.st.Carried = append(s.st.Carried, s.st.Last.Notices[len(s.st.Last.Notices)-1])
		if n := len(s.st.Carried); n > maxCarried {
			s.st.Carried = append([]string(nil), s.st.Carried[n-maxCarried:]...)
		}
	}
}

func (s *sessionRun) turnState() session.TurnState {
	ts := s.st.Last
	ts.ToolCalls = append([]session.ToolCallState(nil), ts.ToolCalls...)
	ts.Notices = append([]string(nil), ts.Notices...)
	ts.Version = s.st.Version
	ts.Backend = s.st.Backend
	ts.PendingBackend = s.st.PendingBackend
	ts.Queued = len(s.st.Queue)
	ts.Paused = s.st.Paused
	ts.Destroyed = s.cleanedUp
	ts.Watcher, ts.WatchUntil = s.st.Watch.Holder, s.st.Watch.Until
	ts.AwaitingPost = s.awaitingPost()
	return ts
}

// awaitingPost reports whether the last turn ended without its answer
// posted (runs since changeWatchLease only).
func (s *sessionRun) awaitingPost() bool {
	last := s.st.Last
	return s.watchLease && !s.turnActive && !s.cleanedUp && last.Turn > 0 && last.FinalRef == "" &&
		(last.Status == session.StatusComplete || last.Status == session.StatusFailed)
}

func (s *sessionRun) info(ctx workflow.Context) session.Info {
	return session.Info{
		WorkflowID:     s.id,
		Location:       s.st.Location,
		Owner:          s.st.Owner,
		Title:          s.st.Title,
		Backend:        s.st.Backend,
		Turns:          s.st.Turn,
		Status:         s.st.Last.Status,
		Parent:         s.st.Parent,
		ForkedAtTurn:   s.st.ForkedAtTurn,
		CreatedAt:      s.st.CreatedAt,
		Snapshot:       s.st.Snapshot,
		Decisions:      append([]session.DecisionRecord(nil), s.st.Decisions...),
		Runs:           s.st.Runs,
		Suspended:      s.st.Suspended,
		Confinement:    s.st.Confinement,
		SandboxWarning: s.st.SandboxWarning,
		Usage:          s.st.Usage,
		Checkpoints:    s.st.checkpointInfo(),
		Repo:           s.st.Repo,
		Model:          s.currentModel(),
		Models:         append([]string(nil), s.st.Settings.Models...),
	}
}

func (s *sessionRun) run(ctx workflow.Context) (session.SessionResult, error) {
	for {
		s.index(ctx)
		s.dropStaleSnapshots(ctx)
		s.measureCarry()
		cond := func() bool {
			return s.destroyRequested ||
				(!s.st.Paused && len(s.st.Queue) > 0) ||
				(s.pauseRequested && !s.st.Paused) ||
				s.st.PendingBackend != "" ||
				s.compactRequested ||
				s.rewind != nil ||
				s.st.PendingRepo != nil && !s.st.PendingRepo.FromMessage ||
				s.shouldContinueAsNew(ctx)
		}
		if s.st.Settings.IdleSuspend > 0 && s.st.Handle != nil && !s.st.Suspended {
			ok, err := s.awaitWork(ctx, cond)
			if err != nil {
				return session.SessionResult{Turns: s.st.Turn}, err
			}
			if !ok {
				s.suspend(ctx)
				continue
			}
		} else if err := workflow.Await(ctx, cond); err != nil {
			return session.SessionResult{Turns: s.st.Turn}, err
		}
		switch {
		case s.destroyRequested:
			return s.destroy(ctx)
		case s.pauseRequested:
			s.pauseRequested = false
			s.st.Paused = true
			s.touch()
			continue
		case s.st.PendingBackend != "":
			s.applyBackend(ctx)
			continue
		case s.compactRequested:
			s.compact(ctx, "asked for with /compact")
			s.compactRequested = false
			continue
		case s.rewind != nil:
			s.rewound = s.doRewind(ctx, *s.rewind)
			s.rewind = nil
			continue
		case s.st.PendingRepo != nil && !s.st.PendingRepo.FromMessage:
			s.setupRepo(ctx, s.st.Turn)
			continue
		case s.shouldContinueAsNew(ctx):
			return s.continueAsNew(ctx)
		}
		s.runTurn(ctx)
	}
}

// awaitWork waits for cond for at most the idle-suspend time and reports
// whether cond came first. workflow.AwaitWithTimeout (SDK v1.50) leaves its
// timer pending when the condition comes first (it cancels it only under
// an SDK flag not yet on), so every turn's timer fired half an hour later
// as a workflow task that did nothing, and a run carried one pending timer
// per turn. Runs since changeCancelIdleTimer start no timer when there is
// work already, and cancel it when work comes first.
func (s *sessionRun) awaitWork(ctx workflow.Context, cond func() bool) (bool, error) {
	if !s.cancelIdleTimer {
		return workflow.AwaitWithTimeout(ctx, s.st.Settings.IdleSuspend, cond)
	}
	if cond() {
		return true, nil
	}
	tctx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(tctx, s.st.Settings.IdleSuspend)
	if err := workflow.Await(ctx, func() bool { return timer.IsReady() || cond() }); err != nil {
		return false, err
	}
	// Work that came with the timer is taken rather than suspended for.
	return cond(), nil
}

// shouldContinueAsNew is checked only between turns.
//
// A run's history holds the state it carries twice: in its first event
// (its input) and in its last (continue-as-new's input, this run's State,
// transcript and all). Comparing the size before that last event with the
// limit let every run pass it by the state's size, up to twice the limit
// with a transcript near its cap. Runs since changeHistoryCountsCarry
// count the state they would carry out, so a run ends near the limit; but
// a run of a state that alone fills most of the limit could never stay
// within it, and must not continue after every turn, which would write the
// whole state twice per turn: it continues once its own events (what it
// added to its input) reach a quarter of the limit, or the history passes
// the limit as before, whichever comes first. So a run is at most
// max(limit, in + out + limit/4) plus the turn that crossed the line, and
// never more than the old bound of limit + out plus that turn, where in and
// out are the state carried in and out (the transcript's cap and bounded
// bookkeeping: docs/ARCHITECTURE.md, "Long life").
func (s *sessionRun) shouldContinueAsNew(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	if info.GetContinueAsNewSuggested() {
		return true
	}
	// A run that has not run a turn yet never continues on size alone, so a
	// tiny limit cannot make runs chase each other without progress.
	if s.turnsThisRun == 0 {
		return false
	}
	size, limit := info.GetCurrentHistorySize(), s.st.Settings.HistoryLimitBytes
	if size > limit {
		return true
	}
	return s.countCarry && size+s.carryBytes > limit && size-s.startBytes >= limit/4
}

// measureCarry measures what continuing as new would carry (runs since
// changeHistoryCountsCarry), once per boundary of the main loop rather
// than at every evaluation of its condition: encoding a transcript of up
// to a MiB is not free, and the state changes little between turns.
func (s *sessionRun) measureCarry() {
	if !s.countCarry {
		return
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(s.continueInput())
	if err != nil {
		// Not expected (the same input is encoded to continue as new);
		// counting nothing keeps the old rule.
		s.log.Warn("measure the state continue-as-new carries", "error", err)
		s.carryBytes = 0
		return
	}
	s.carryBytes = p.Size()
}

// continueInput is what the next run starts from.
func (s *sessionRun) continueInput() Input {
	st := s.st
	return Input{
		SessionInput: session.SessionInput{Location: st.Location, Owner: st.Owner, Backend: st.Backend, Settings: st.Settings},
		State:        &st,
	}
}

func (s *sessionRun) continueAsNew(ctx workflow.Context) (session.SessionResult, error) {
	// Let in-flight update handlers (chat refs, approvals) finish so no
	// caller loses its answer. A destroy that arrives meanwhile (an update,
	// whose handler waits for the cleanup, or a signal) is carried out
	// instead: waiting for its handler would wait forever, and continuing
	// as new would drop it.
	if workflow.GetVersion(ctx, changeDestroyBeforeCAN, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			return session.SessionResult{Turns: s.st.Turn}, err
		}
	} else {
		if err := workflow.Await(ctx, func() bool { return s.destroyRequested || workflow.AllHandlersFinished(ctx) }); err != nil {
			return session.SessionResult{Turns: s.st.Turn}, err
		}
		if s.destroyRequested {
			return s.destroy(ctx)
		}
	}
	in := s.continueInput()
	s.log.Info("continuing as new", "turn", s.st.Turn, "history_bytes", workflow.GetInfo(ctx).GetCurrentHistorySize(),
		"start_bytes", s.startBytes, "carry_bytes", s.carryBytes)
	return session.SessionResult{}, workflow.NewContinueAsNewError(ctx, Session, in)
}

// dropStaleSnapshots deletes superseded snapshots between turns. A failure
// is logged and retried at the next boundary; stale snapshots only cost
// storage, and destroy removes the whole prefix anyway.
func (s *sessionRun) dropStaleSnapshots(ctx workflow.Context) {
	if len(s.st.Stale) == 0 || s.forksInFlight > 0 {
		return
	}
	keys := s.st.Stale
	err := workflow.ExecuteActivity(housekeepingOptions(ctx, session.BackendQueue(s.queue, s.st.Backend)), sandboxActs.DeleteSnapshots,
		sandbox.DeleteSnapshotsRequest{Keys: keys}).Get(ctx, nil)
	if err != nil {
		s.log.Warn("delete stale snapshots", "error", err)
		return
	}
	s.st.Stale = s.st.Stale[len(keys):]
}

// suspend saves and stops an idle sandbox; the next command resumes it
// (or restores it from the snapshot if it was lost meanwhile).
func (s *sessionRun) suspend(ctx workflow.Context) {
	if err := s.snapshot(ctx, false); err != nil {
		s.log.Warn("snapshot before suspend failed; keeping the sandbox running", "error", err)
		s.st.Suspended = true // do not retry every idle period; the next turn re-checks
		return
	}
	var res sandbox.SuspendResult
	err := workflow.ExecuteActivity(housekeepingOptions(ctx, s.st.Handle.TaskQueue), sandboxActs.Suspend,
		sandbox.SuspendRequest{Handle: *s.st.Handle}).Get(ctx, &res)
	if err != nil {
		s.log.Warn("suspend failed", "error", err)
	}
	s.st.Suspended = true
	s.touch()
}

// applyBackend switches the backend at a turn boundary: the current
// workspace is snapshotted, the old sandbox removed, and the next turn
// creates a sandbox on the new backend from that snapshot.
func (s *sessionRun) applyBackend(ctx workflow.Context) {
	to := s.st.PendingBackend
	s.st.PendingBackend = ""
	from := s.st.Backend
	if to == from {
		s.touch()
		return
	}
	if s.st.Handle != nil {
		if err := s.snapshot(ctx, true); err != nil {
			if !s.switchAnyway(ctx, err) {
				s.noticeNext("Could not save the workspace before switching to %s: %s. Staying on %s.", to, userError(err), from)
				return
			}
			last := "an empty workspace (there is no snapshot yet)"
			if s.st.Snapshot != "" {
				last = "the last snapshot; changes made since it stay behind"
			}
			s.noticeNext("Could not reach the %s sandbox to save the workspace: %s. The %s sandbox starts from %s.", from, userError(err), to, last)
		}
		s.destroySandbox(ctx, false)
	}
	s.st.Backend = to
	s.st.Handle = nil
	s.st.Suspended = false
	s.st.Last.Backend = to
	s.noticeNext("Switched backend from %s to %s; the workspace moves with the session.", from, to)
}

// switchAnyway reports whether a switch goes ahead although the old
// sandbox could not be snapshotted: when its backend is unavailable or the
// sandbox is gone, waiting cannot save anything, and the user asked to move
// exactly because it does not work. Any other failure (a quota, a store
// error) keeps the session where its workspace is.
func (s *sessionRun) switchAnyway(ctx workflow.Context, err error) bool {
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || (ae.Type() != sandbox.ErrTypeUnavailable && ae.Type() != sandbox.ErrTypeNotFound) {
		return false
	}
	return workflow.GetVersion(ctx, changeSwitchFromUnreachable, workflow.DefaultVersion, 1) >= 1
}

func (s *sessionRun) destroy(ctx workflow.Context) (session.SessionResult, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	s.destroySandbox(dctx, true)
	s.cleanedUp = true
	s.st.Last.Status = session.StatusComplete
	s.notice("Session destroyed by %s; its sandbox and snapshots were removed.", displayName(s.destroyBy))
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return session.SessionResult{Turns: s.st.Turn}, err
	}
	return session.SessionResult{Turns: s.st.Turn, Destroyed: true}, nil
}

// destroySandbox removes the sandbox (and the snapshots when all is true).
// Failures are logged: an unreachable host must not keep a session alive.
func (s *sessionRun) destroySandbox(ctx workflow.Context, all bool) {
	req := sandbox.DestroyRequest{SessionID: s.id, Handle: s.st.Handle, DeleteSnapshots: all}
	queue := session.BackendQueue(s.queue, s.st.Backend)
	if s.st.Handle != nil && s.st.Handle.TaskQueue != "" {
		queue = s.st.Handle.TaskQueue
	}
	err := workflow.ExecuteActivity(housekeepingOptions(ctx, queue), sandboxActs.Destroy, req).Get(ctx, nil)
	if err != nil && queue != session.BackendQueue(s.queue, s.st.Backend) {
		// The holding host is gone; its sandbox went with it. Snapshots
		// are shared, so any worker of the backend can delete them.
		req.Handle = nil
		err = workflow.ExecuteActivity(housekeepingOptions(ctx, session.BackendQueue(s.queue, s.st.Backend)), sandboxActs.Destroy, req).Get(ctx, nil)
	}
	if err != nil {
		s.log.Warn("destroy sandbox failed", "error", err)
	}
	s.st.Handle = nil
	if all {
		s.st.Snapshot = ""
		s.st.Fingerprint = ""
	}
}

func displayName(u session.User) string {
	if u.Name != "" {
		return u.Name
	}
	if u.ID != "" {
		return u.ID
	}
	return "someone"
}

// userError turns an activity error into words for the chat thread,
// without Temporal's wrapping noise.
func userError(err error) string {
	if err == nil {
		return ""
	}
	var msg string
	for e := err; e != nil; e = errors.Unwrap(e) {
		msg = e.Error()
		if ae, ok := e.(*temporal.ApplicationError); ok {
			// Its Error() appends "(type: ..., retryable: ...)", which
			// says nothing to a person.
			msg = ae.Message()
		}
	}
	msg = strings.TrimSpace(msg)
	if msg == "" {
		msg = err.Error()
	}
	return msg
}

// modelMessages returns the transcript in model form.
func (s *sessionRun) modelMessages() []session.Message {
	out := make([]session.Message, 0, len(s.st.Transcript))
	for _, e := range s.st.Transcript {
		out = append(out, e.Msg)
	}
	return out
}
