package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sandbot/sandbot/session"
	"go.temporal.io/sdk/workflow"
)

// register installs every query, update and signal handler. It runs before
// the first activity so no early update is refused.
func (s *sessionRun) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, session.QueryTurnState, func() (session.TurnState, error) {
		return s.turnState(), nil
	}); err != nil {
		return fmt.Errorf("register %s: %w", session.QueryTurnState, err)
	}
	if err := workflow.SetQueryHandler(ctx, session.QueryHistory, func(req session.HistoryRequest) ([]session.HistoryEntry, error) {
		h := s.st.Transcript
		if req.Last > 0 && len(h) > req.Last {
			h = h[len(h)-req.Last:]
		}
		return append([]session.HistoryEntry(nil), h...), nil
	}); err != nil {
		return fmt.Errorf("register %s: %w", session.QueryHistory, err)
	}
	// A query adds nothing to history, so the View output button's read
	// path needs no versioning; a bot asking a run of an older build falls
	// back to QueryHistory and computes the same answer.
	if err := workflow.SetQueryHandler(ctx, session.QueryToolOutput, func(req session.ToolOutputRequest) (session.ToolOutputResponse, error) {
		return session.ToolOutputs(s.st.Transcript, req), nil
	}); err != nil {
		return fmt.Errorf("register %s: %w", session.QueryToolOutput, err)
	}
	if err := workflow.SetQueryHandler(ctx, session.QueryInfo, func() (session.Info, error) {
		return s.info(ctx), nil
	}); err != nil {
		return fmt.Errorf("register %s: %w", session.QueryInfo, err)
	}
	if err := workflow.SetQueryHandler(ctx, session.QuerySharedFile, s.sharedFile); err != nil {
		return fmt.Errorf("register %s: %w", session.QuerySharedFile, err)
	}

	updates := []struct {
		name      string
		handler   any
		validator any
	}{
		{session.UpdateSendMessage, s.onMessage, s.validateMessage},
		{session.UpdateApprove, s.onApprove, s.validateApprove},
		{session.UpdatePause, s.onPause, func(ctx workflow.Context, _ session.PauseRequest) error { return s.validateAlive(ctx, nil) }},
		{session.UpdateCompact, s.onCompact, s.validateCompact},
		{session.UpdateResume, s.onResume, func(ctx workflow.Context, _ session.ResumeRequest) error { return s.validateAlive(ctx, nil) }},
		{session.UpdateStop, s.onStop, s.validateStop},
		{session.UpdateDestroy, s.onDestroy, s.validateDestroy},
		{session.UpdateChatRef, s.onChatRef, s.validateChatRef},
		{session.UpdateSetBackend, s.onSetBackend, s.validateSetBackend},
		{session.UpdateFork, s.onFork, s.validateFork},
		{session.UpdateClaimFinal, s.onClaimFinal, s.validateClaimFinal},
		{session.UpdateClaimWatch, s.onClaimWatch, s.validateClaimWatch},
		{session.UpdateRewind, s.onRewind, s.validateRewind},
		{session.UpdateSetRepo, s.onSetRepo, s.validateSetRepo},
		{session.UpdateSetTitle, s.onSetTitle, s.validateSetTitle},
		{session.UpdateSetModel, s.onSetModel, s.validateSetModel},
		{session.UpdateDiff, s.onDiff, s.validateDiff},
		{session.UpdateOpenPR, s.onOpenPR, s.validateOpenPR},
	}
	for _, u := range updates {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, u.name, u.handler, workflow.UpdateHandlerOptions{Validator: u.validator}); err != nil {
			return fmt.Errorf("register %s: %w", u.name, err)
		}
	}

	ch := workflow.GetSignalChannel(ctx, session.SignalDestroy)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var req session.DestroyRequest
			ch.Receive(ctx, &req)
			// A signal has no validator, so it cannot be checked for the
			// bot's signature: anyone who reaches the frontend could
			// destroy a session with it. Runs since that change ignore it;
			// the destroy update (signed, validated) is the way.
			if workflow.GetVersion(ctx, changeSignedDecisions, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
				s.requestDestroy(req.User)
				continue
			}
			s.log.Warn("ignored a destroy signal: destroy a session with the destroy update, which the bot signs", "from", req.User.ID)
		}
	})
	return nil
}

func (s *sessionRun) validateAlive(ctx workflow.Context, _ any) error {
	if s.destroyRequested {
		return fmt.Errorf("this session has been destroyed")
	}
	return nil
}

func (s *sessionRun) validateMessage(ctx workflow.Context, req session.MessageRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	if err := session.CheckAttachments(req.Attachments); err != nil {
		return err
	}
	if n := req.MessageBytes(); n > session.MaxMessageBytes {
		return fmt.Errorf("message is %d bytes (text, thread context and attachment descriptors); the limit is %d bytes (64 KiB). Attach large content as a file in the workspace instead", n, session.MaxMessageBytes)
	}
	if strings.TrimSpace(req.Text) == "" && len(req.Attachments) == 0 {
		return fmt.Errorf("message is empty; write what you want the agent to do, or /help for commands")
	}
	if req.Model != "" {
		return s.checkModel(req.Model)
	}
	return nil
}

func (s *sessionRun) onMessage(ctx workflow.Context, req session.MessageRequest) (session.MessageResponse, error) {
	if turn, ok := s.st.seenTurn(req.EventID); ok {
		return session.MessageResponse{Turn: turn, Duplicate: true, Watch: s.watchWithMessage(ctx, req.Watch)}, nil
	}
	watch := s.watchWithMessage(ctx, req.Watch)
	s.takeRepo(req)
	if req.Model != "" {
		s.st.Model = req.Model // validated; the next turn to start takes it
	}
	s.st.Queue = append(s.st.Queue, QueuedMessage{EventID: req.EventID, User: req.User, Text: req.Text, At: workflow.Now(ctx), Ref: req.Ref, Context: req.Context, Attachments: req.Attachments})
	// A new message ends a pause: the user wants an answer.
	s.st.Paused = false
	s.pauseRequested = false
	s.touch()
	return session.MessageResponse{Turn: s.st.Turn + 1, Queued: s.turnActive, Watch: watch}, nil
}

// watchWithMessage answers a watch lease asked for with a message as
// claim_watch would (nil when none was asked for, the run keeps no lease,
// or the claim is malformed: the bot then claims on its own). It never
// refuses the message.
func (s *sessionRun) watchWithMessage(ctx workflow.Context, c *session.WatchClaim) *session.ClaimWatchResponse {
	if c == nil || !s.watchLease || c.Claimer == "" || c.For < session.WatchLeaseMin || c.For > session.WatchLeaseMax {
		return nil
	}
	r := s.claimWatch(ctx, c.Claimer, c.For)
	return &r
}

func (s *sessionRun) validateCompact(ctx workflow.Context, _ session.CompactRequest) error {
	if !s.compaction {
		return errors.New("this session's current run predates /compact; it can compact after its next continue-as-new")
	}
	return s.validateAlive(ctx, nil)
}

// onCompact asks the main loop to compact at the next turn boundary (at
// once when idle) and answers with what it did.
func (s *sessionRun) onCompact(ctx workflow.Context, _ session.CompactRequest) (session.CompactResponse, error) {
	s.compactRequested = true
	if err := workflow.Await(ctx, func() bool { return !s.compactRequested || s.destroyRequested }); err != nil {
		return session.CompactResponse{}, err
	}
	return s.compacted, nil
}

func (s *sessionRun) onPause(ctx workflow.Context, _ session.PauseRequest) (session.PauseResponse, error) {
	if !s.turnActive && len(s.st.Queue) == 0 {
		s.st.Paused = true
		s.touch()
		return session.PauseResponse{Turn: s.st.Turn}, nil
	}
	s.pauseRequested = true
	err := workflow.Await(ctx, func() bool { return s.st.Paused || s.destroyRequested || !s.pauseRequested && !s.turnActive })
	return session.PauseResponse{Turn: s.st.Turn}, err
}

func (s *sessionRun) onResume(ctx workflow.Context, _ session.ResumeRequest) (session.PauseResponse, error) {
	s.st.Paused = false
	s.pauseRequested = false
	s.touch()
	return session.PauseResponse{Turn: s.st.Turn}, nil
}

func (s *sessionRun) validateStop(ctx workflow.Context, req session.StopRequest) error {
	return s.validateAlive(ctx, nil)
}

func (s *sessionRun) onStop(ctx workflow.Context, req session.StopRequest) (session.StopResponse, error) {
	if !s.turnActive {
		return session.StopResponse{Stopped: false, Turn: s.st.Turn}, nil
	}
	u := req.User
	s.stopBy = &u
	turn := s.st.Turn
	// Shown at once ("Stopping…"), before the cancellation has reached
	// the running command; the turn's end confirms it.
	s.st.Last.Stopped = true
	s.st.Last.FinalText = fmt.Sprintf("Stopped by %s.", displayName(u))
	s.touch()
	s.cancelTurn()
	err := workflow.Await(ctx, func() bool { return !s.turnActive || s.st.Turn != turn })
	return session.StopResponse{Stopped: true, Turn: turn}, err
}

func (s *sessionRun) validateDestroy(ctx workflow.Context, req session.DestroyRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	if !s.st.mayApprove(req.User) {
		return fmt.Errorf("%s may not destroy this session: only its owner (%s) and configured approvers may", displayName(req.User), displayName(s.st.Owner))
	}
	return nil
}

func (s *sessionRun) onDestroy(ctx workflow.Context, req session.DestroyRequest) (session.DestroyResponse, error) {
	s.requestDestroy(req.User)
	err := workflow.Await(ctx, func() bool { return s.cleanedUp })
	return session.DestroyResponse{Turns: s.st.Turn}, err
}

func (s *sessionRun) requestDestroy(u session.User) {
	if s.destroyRequested {
		return
	}
	s.destroyRequested = true
	s.destroyBy = u
	if s.turnActive && s.cancelTurn != nil {
		s.stopBy = &u
		s.cancelTurn()
	}
}

func (s *sessionRun) validateChatRef(ctx workflow.Context, req session.ChatRefRequest) error {
	if req.Kind != session.ChatRefStatus && req.Kind != "final" && req.Kind != session.ChatRefApprovalNotice && req.Kind != session.ChatRefSharedFile {
		return fmt.Errorf("chat ref kind %q is unknown; use %q, \"final\", %q or %q", req.Kind, session.ChatRefStatus, session.ChatRefApprovalNotice, session.ChatRefSharedFile)
	}
	if req.Ref == "" {
		return fmt.Errorf("chat ref is empty")
	}
	if req.Kind == session.ChatRefSharedFile {
		return nil // Ref is the call ID, unique in the session
	}
	if req.Kind == "final" && s.previousTurn(req.Turn) != nil {
		return nil // posted just before the user started the next turn
	}
	if req.Turn != s.st.Last.Turn {
		return fmt.Errorf("turn %d is not the current turn (%d)", req.Turn, s.st.Last.Turn)
	}
	if req.Kind == session.ChatRefApprovalNotice && s.st.Last.ApprovalNoticed != "" {
		// The record is the claim to post the notice: two replicas that
		// both saw none (a watch taken over between them) must not both
		// post it (the chaos suite counted notices posted twice). Updates
		// run one at a time, so exactly one record is accepted per turn.
		return fmt.Errorf("%s: turn %d's approvers were told already (%s)", session.NoticeRecordedAlready, req.Turn, s.st.Last.ApprovalNoticed)
	}
	if req.Kind == session.ChatRefStatus && s.st.Last.StatusRef != "" && s.st.Last.StatusRef != req.Ref {
		// The first card recorded for a turn is the turn's card. A
		// replica held up recording its card past its watch lease finds
		// the card of the replica that took the watch over recorded
		// meanwhile (or the other way round); the chaos suite's long mode
		// saw calls shown on two cards. Refused here, like a second
		// approval notice, so the history keeps no trace; the refusal
		// names the recorded card for the refused replica to adopt. The
		// same ref again (a retried record) is accepted.
		return errors.New(session.CardRefusal(req.Turn, s.st.Last.StatusRef))
	}
	return nil
}

// onChatRef records a chat message reference. It does not bump Version:
// the reference is bookkeeping for the bot, not something to re-render.
func (s *sessionRun) onChatRef(ctx workflow.Context, req session.ChatRefRequest) (session.ChatRefResponse, error) {
	switch req.Kind {
	case session.ChatRefStatus:
		s.st.Last.StatusRef = req.Ref
	case session.ChatRefApprovalNotice:
		s.st.Last.ApprovalNoticed = req.Ref
	case session.ChatRefSharedFile:
		s.sharedPosted(req.Ref)
	case "final":
		if p := s.previousTurn(req.Turn); p != nil {
			p.FinalRef = req.Ref
			break
		}
		s.st.Last.FinalRef = req.Ref
		if s.watchLease {
			// The answer is posted: the session no longer needs a bot.
			s.index(ctx)
		}
	}
	return session.ChatRefResponse{}, nil
}

func (s *sessionRun) validateClaimWatch(ctx workflow.Context, req session.ClaimWatchRequest) error {
	if req.Claimer == "" {
		return fmt.Errorf("claim_watch needs the claiming bot replica's ID")
	}
	if req.Release {
		if w := s.st.Watch; !req.Held.IsZero() && (w.Holder != req.Claimer || !w.Until.Equal(req.Held)) {
			// A validator, not the handler: no replay effect, no history.
			return temporal.NewApplicationError(fmt.Sprintf("this release is of a hold that ended at %s; the lease is held by %q until %s",
				req.Held.Format(time.RFC3339Nano), w.Holder, w.Until.Format(time.RFC3339Nano)), session.ErrTypeStaleRelease)
		}
		return nil
	}
	if req.For < session.WatchLeaseMin || req.For > session.WatchLeaseMax {
		return fmt.Errorf("a watch lease of %s is out of bounds; ask for %s to %s", req.For, session.WatchLeaseMin, session.WatchLeaseMax)
	}
	if w := s.st.Watch; w.Holder != "" && w.Holder != req.Claimer && workflow.Now(ctx).Before(w.Until) {
		// Refused here rather than answered by the handler: a rejected
		// update is not written to the history.
		return temporal.NewApplicationError(fmt.Sprintf("the watch lease is held by %s until %s", w.Holder, w.Until.Format(time.RFC3339Nano)), session.ErrTypeWatchLeaseHeld)
	}
	return nil
}

// onClaimWatch grants, renews or releases the watch lease. The holder
// keeps it by renewing before it runs out; anyone else gets it only once
// it has (its holder died or stalled) or was released. Like chat refs it is
// bookkeeping: Version does not move.
func (s *sessionRun) onClaimWatch(ctx workflow.Context, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
	w := &s.st.Watch
	if req.Release {
		if w.Holder == req.Claimer {
			*w = WatchLease{}
		}
		return session.ClaimWatchResponse{Holder: w.Holder, Until: w.Until}, nil
	}
	return s.claimWatch(ctx, req.Claimer, req.For), nil
}

// claimWatch grants or renews the lease to claimer for d unless another
// replica's lease still runs.
func (s *sessionRun) claimWatch(ctx workflow.Context, claimer string, d time.Duration) session.ClaimWatchResponse {
	w := &s.st.Watch
	now := workflow.Now(ctx)
	if w.Holder != "" && w.Holder != claimer && now.Before(w.Until) {
		return session.ClaimWatchResponse{Holder: w.Holder, Until: w.Until}
	}
	*w = WatchLease{Holder: claimer, Until: now.Add(d)}
	return session.ClaimWatchResponse{Granted: true, Holder: w.Holder, Until: w.Until}
}

func (s *sessionRun) validateSetBackend(ctx workflow.Context, req session.SetBackendRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	if req.Backend == "" {
		return fmt.Errorf("backend name is empty; usage: /backend NAME")
	}
	if !s.st.mayApprove(req.User) {
		return fmt.Errorf("%s may not change this session's backend: only its owner (%s) and configured approvers may", displayName(req.User), displayName(s.st.Owner))
	}
	if len(s.st.Settings.Backends) > 0 && !slices.Contains(s.st.Settings.Backends, req.Backend) {
		return fmt.Errorf("backend %q is not available; available backends: %s", req.Backend, strings.Join(s.st.Settings.Backends, ", "))
	}
	return nil
}

func (s *sessionRun) onSetBackend(ctx workflow.Context, req session.SetBackendRequest) (session.SetBackendResponse, error) {
	from := s.st.Backend
	if req.Backend == from && s.st.PendingBackend == "" {
		return session.SetBackendResponse{From: from, To: from}, nil
	}
	s.st.PendingBackend = req.Backend
	s.touch()
	return session.SetBackendResponse{From: from, To: req.Backend, Deferred: s.turnActive}, nil
}

func (s *sessionRun) validateClaimFinal(ctx workflow.Context, req session.ClaimFinalRequest) error {
	if req.Claimer == "" {
		return fmt.Errorf("claim_final needs the claiming bot replica's ID")
	}
	if s.previousTurn(req.Turn) != nil {
		return nil // it has ended: the next one has begun
	}
	if req.Turn != s.st.Last.Turn {
		return fmt.Errorf("turn %d is not the current turn (%d)", req.Turn, s.st.Last.Turn)
	}
	if s.turnActive || !(s.st.Last.Status == session.StatusComplete || s.st.Last.Status == session.StatusFailed) {
		return fmt.Errorf("turn %d has not finished; there is no answer to post yet", req.Turn)
	}
	return nil
}

// onClaimFinal grants the right to post a finished turn's answer to one bot
// replica, so two replicas that both watched the turn post it once. A claim
// whose holder never recorded the post expires after
// session.FinalClaimTakeover, so a replica that died in between does not
// lose the answer. Like chat refs it is bookkeeping: Version does not move.
func (s *sessionRun) onClaimFinal(ctx workflow.Context, req session.ClaimFinalRequest) (session.ClaimFinalResponse, error) {
	if p := s.previousTurn(req.Turn); p != nil {
		// A replica that saw the turn running but not ending: the claim
		// is on the turn's carried-over bookkeeping, and the watch lease
		// (which is about the current turn) gives no right to take it.
		if p.FinalRef != "" {
			return session.ClaimFinalResponse{Posted: true, Holder: p.FinalClaim}, nil
		}
		now := workflow.Now(ctx)
		if p.FinalClaim != "" && p.FinalClaim != req.Claimer && now.Sub(p.FinalClaimAt) < session.FinalClaimTakeover {
			return session.ClaimFinalResponse{Holder: p.FinalClaim}, nil
		}
		earlier := tookOver(p.FinalClaim, req.Claimer)
		p.FinalClaim, p.FinalClaimAt = req.Claimer, now
		return session.ClaimFinalResponse{Granted: true, Earlier: earlier}, nil
	}
	last := &s.st.Last
	if last.FinalRef != "" {
		return session.ClaimFinalResponse{Posted: true, Holder: last.FinalClaim}, nil
	}
	now := workflow.Now(ctx)
	liveLease := s.watchLease && s.st.Watch.Holder != "" && now.Before(s.st.Watch.Until)
	if liveLease && s.st.Watch.Holder != req.Claimer && last.FinalClaim != req.Claimer {
		// Another replica watches the session: it posts the answer. A
		// replica that lost the lease but still finishes the turn it was
		// showing must not post too (the chaos suite saw both post).
		return session.ClaimFinalResponse{Holder: cmp.Or(last.FinalClaim, s.st.Watch.Holder)}, nil
	}
	// The holder of a live watch lease may take a claim over once the
	// claim is older than session.FinalClaimGrace: the claim's holder lost
	// the lease, so it died or stalled before posting (runs since
	// changeWatchLease). Not at once: a slow holder may still be posting.
	leased := liveLease && s.st.Watch.Holder == req.Claimer && now.Sub(last.FinalClaimAt) >= session.FinalClaimGrace
	if last.FinalClaim != "" && last.FinalClaim != req.Claimer && now.Sub(last.FinalClaimAt) < session.FinalClaimTakeover && !leased {
		return session.ClaimFinalResponse{Holder: last.FinalClaim}, nil
	}
	earlier := tookOver(last.FinalClaim, req.Claimer)
	last.FinalClaim, last.FinalClaimAt = req.Claimer, now
	return session.ClaimFinalResponse{Granted: true, Earlier: earlier}, nil
}

// tookOver is the replica whose claim a grant to claimer replaces: held
// is the claim's holder until now ("" for none, or claimer's own).
func tookOver(held, claimer string) string {
	if held == claimer {
		return ""
	}
	return held
}

func (s *sessionRun) validateSetTitle(ctx workflow.Context, req session.SetTitleRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	if !s.st.mayApprove(req.User) {
		return fmt.Errorf("%s may not rename this session: only its owner (%s) and configured approvers may", displayName(req.User), displayName(s.st.Owner))
	}
	t := strings.TrimSpace(req.Title)
	switch n := len([]rune(t)); {
	case n == 0:
		return errors.New("/title needs the new title, such as /title Fix the flaky test")
	case n > session.MaxTitleRunes:
		return fmt.Errorf("the title is %d characters; keep it to %d", n, session.MaxTitleRunes)
	case strings.ContainsAny(t, "\n\r"):
		return errors.New("a title is one line")
	}
	return nil
}

// onSetTitle renames the session (state only: nothing is scheduled).
func (s *sessionRun) onSetTitle(ctx workflow.Context, req session.SetTitleRequest) (session.SetTitleResponse, error) {
	from := s.st.Title
	s.st.Title = strings.TrimSpace(req.Title)
	s.touch()
	return session.SetTitleResponse{From: from, To: s.st.Title}, nil
}

// checkModel refuses a model the worker does not offer.
func (s *sessionRun) checkModel(m string) error {
	models := s.st.Settings.Models
	if len(models) <= 1 {
		return fmt.Errorf("this deployment offers one model (%s); an operator lists others in SANDBOT_MODEL_ALLOWED", orText(s.st.Settings.Model, "the worker's"))
	}
	if !slices.Contains(models, m) {
		return fmt.Errorf("model %q is not offered here; choose one of %s", m, strings.Join(models, ", "))
	}
	return nil
}

func orText(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// currentModel is the model the next turn uses.
func (s *sessionRun) currentModel() string {
	if s.st.Model != "" {
		return s.st.Model
	}
	return s.st.Settings.Model
}

func (s *sessionRun) validateSetModel(ctx workflow.Context, req session.SetModelRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	if !s.st.mayApprove(req.User) {
		return fmt.Errorf("%s may not change this session's model: only its owner (%s) and configured approvers may", displayName(req.User), displayName(s.st.Owner))
	}
	return s.checkModel(req.Model)
}

// onSetModel picks the model of the next turns (state only: the model
// activity takes it in its request).
func (s *sessionRun) onSetModel(ctx workflow.Context, req session.SetModelRequest) (session.SetModelResponse, error) {
	from := s.currentModel()
	s.st.Model = req.Model
	if req.Model == s.st.Settings.Model {
		s.st.Model = ""
	}
	s.touch()
	return session.SetModelResponse{From: from, To: req.Model, Deferred: s.turnActive}, nil
}

// previousTurn is the carried-over end of turn n when n is the turn just
// before the current one, else nil.
func (s *sessionRun) previousTurn(n int) *session.TurnEnd {
	if p := s.st.Last.Previous; p != nil && p.Turn == n && n == s.st.Last.Turn-1 {
		return p
	}
	return nil
}
