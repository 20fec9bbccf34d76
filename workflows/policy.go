package workflows

import (
	"context"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/session"
)

// Change IDs for workflow.GetVersion. Each names one behaviour change that
// running sessions must survive (docs/ARCHITECTURE.md, "Sessions outlive
// code"): histories recorded before the change replay with
// workflow.DefaultVersion and keep the old behaviour; new runs record the
// newest version. Never reuse or renumber an ID; remove a branch only when no
// open run can predate it.
const (
	// changeWorkerPolicy: a run takes the session policy from the worker
	// (PolicyActivities) instead of the settings the bot sent.
	changeWorkerPolicy = "worker-policy"
	// changeFrozenApproval: whether a call needs approval is decided once
	// and recorded in history (a side effect), so a later change to the
	// read-only allowlist cannot change what a replay schedules.
	changeFrozenApproval = "frozen-approval-decision"
	// changeDestroyBeforeCAN: a destroy requested while the run waits for
	// its handlers before continue-as-new is carried out, not dropped.
	changeDestroyBeforeCAN = "destroy-before-continue-as-new"
	// changeSignedDecisions: the destroy signal, which no signature can
	// guard, is ignored; decisions come as signed updates (DecisionGuard).
	changeSignedDecisions = "signed-decisions"
	// changeWatchLease: a finished turn whose answer no bot posted yet
	// stays indexed as needing the bot (SandbotActiveTurn) and says so in
	// its TurnState (AwaitingPost), so any bot replica finds and posts it;
	// recording the final answer's ref clears it. Decided once per run, at
	// its start.
	changeWatchLease = "watch-lease"
	// changeSwitchFromUnreachable: a backend switch whose old sandbox
	// cannot be reached to save the workspace (the provider is down, the
	// sandbox is gone) goes ahead from the last snapshot, with a notice,
	// instead of keeping the session on the unreachable backend.
	changeSwitchFromUnreachable = "switch-from-unreachable"
	// changeTranscriptRefs: model calls send a reference to the transcript
	// the model activity stored at the previous call plus the messages
	// added since, instead of the whole budgeted transcript (history was
	// quadratic in a turn's length). Decided once per run, at its start.
	changeTranscriptRefs = "transcript-refs"
	// changeCompaction: a conversation that no longer fits the model's
	// context (the model activity had to drop whole exchanges, or the
	// model refused it as too long) is compacted: a model call summarises
	// its oldest part, and the summary replaces that part in the
	// transcript, once. Decided once per run, at its start.
	changeCompaction = "compaction"
	// changeCheckpoints: snapshots are incremental manifests
	// (SaveWorkspace, restored by EnsureWorkspace and RestoreWorkspace,
	// which workers of older builds do not register), and every completed
	// turn keeps its manifest as a checkpoint, within the policy's
	// retention, for /rewind and /fork @N. Decided once per run, at its
	// start.
	changeCheckpoints = "checkpoints"
	// changeAttachments: a message's attachments are saved into the
	// workspace (SaveAttachments) before its turn. Reached only for
	// messages that carry attachments, which no older history has.
	changeAttachments = "attachments"
	// changeShareFile: a share_file call reads the file (ReadFile) and
	// lists it for the bot; before, it failed as an unknown tool. Reached
	// only when the model calls share_file.
	changeShareFile = "share-file"
	// changeHistoryCountsCarry: (decided once per run, at its start) the
	// history limit counts what continue-as-new writes into the run's last
	// event — the whole State, transcript included — so a run that
	// continues as new stays near the limit instead of passing it by the
	// state's size (the soak's runs averaged 1.5 times a 1 MiB limit, one
	// 2.1 MB); a run still adds at least a quarter of the limit of its own
	// before it continues, so a state near the limit cannot make runs of
	// one turn each.
	changeHistoryCountsCarry = "history-limit-counts-carry"
	// changeCancelIdleTimer: (decided once per run, at its start) the wait
	// for work between turns cancels its idle-suspend timer when work comes
	// first, and starts none when work is already queued; before, each
	// turn left its timer pending, to fire later as an empty workflow task.
	changeCancelIdleTimer = "cancel-idle-timer"
)

// PolicyActivities serves the worker's session policy to session runs. It
// runs as a local activity on the worker that runs the workflow task, so
// the policy is the one of the workers serving the session queue, recorded
// in history as the activity's result.
type PolicyActivities struct {
	Policy session.Policy
}

// SessionPolicy returns the worker's policy with defaults filled in.
func (a *PolicyActivities) SessionPolicy(context.Context) (session.Policy, error) {
	return a.Policy.WithDefaults(), nil
}

var policyActs *PolicyActivities

// takeWorkerPolicy replaces the run's policy with the worker's, at the start
// of every run (a new session, a fork, and each continue-as-new). If the
// worker cannot answer (it predates PolicyActivities), the run keeps the
// policy it has and says so in the log.
func (s *sessionRun) takeWorkerPolicy(ctx workflow.Context) {
	if workflow.GetVersion(ctx, changeWorkerPolicy, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	var p session.Policy
	if err := workflow.ExecuteLocalActivity(lctx, policyActs.SessionPolicy).Get(ctx, &p); err != nil {
		s.log.Warn("worker policy unavailable; keeping the session's policy", "error", err)
		return
	}
	s.st.Settings.Policy = p.WithDefaults()
}
