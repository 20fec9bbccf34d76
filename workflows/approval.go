package workflows

import (
	"fmt"
	"strings"

	"github.com/sandbot/sandbot/session"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// approval asks for a decision on a call and waits for it, for the
// configured expiry, or for the turn to be stopped. A standing "approve
// always" for every command of the call answers at once.
func (s *sessionRun) approval(ctx workflow.Context, callID string, commands []string) (session.DecisionRecord, error) {
	now := workflow.Now(ctx)
	command := strings.Join(commands, "\n")
	if s.st.alwaysApproved(commands) {
		d := session.DecisionRecord{CallID: callID, Command: command, Decision: session.DecisionApprove, At: now, Auto: true, Turn: s.st.Turn}
		s.record(d)
		return d, nil
	}
	timeout := s.st.Settings.ApprovalTimeout
	s.decision = nil
	s.st.Last.Pending = &session.PendingApproval{
		CallID: callID, Command: command,
		Reason:  "only read-only commands run without asking, and this one may change something",
		AskedAt: now, ExpiresAt: now.Add(timeout),
	}
	if s.st.Settings.ApprovalMode == session.ApproveAlways {
		s.st.Last.Pending.Reason = "this session asks before every command"
	}
	s.st.Last.Status = session.StatusAwaitingApproval
	if c := s.call(callID); c != nil {
		c.Status = session.CallAwaitingApproval
	}
	s.touch()

	ok, err := workflow.AwaitWithTimeout(ctx, timeout, func() bool { return s.decision != nil })
	s.st.Last.Pending = nil
	s.st.Last.Status = session.StatusThinking
	if err != nil || ctx.Err() != nil {
		s.touch()
		return session.DecisionRecord{}, errStopped
	}
	var d session.DecisionRecord
	if ok {
		d = *s.decision
	} else {
		d = session.DecisionRecord{
			CallID: callID, Command: command, Decision: session.DecisionReject, At: workflow.Now(ctx), Expired: true, Turn: s.st.Turn,
			Reason: fmt.Sprintf("nobody decided within %s", timeout),
		}
		s.st.Last.Notices = append(s.st.Last.Notices, fmt.Sprintf("The approval request for `%s` expired after %s; the command was not run.", oneLine(command), timeout))
	}
	s.decision = nil
	if d.Decision == session.DecisionApproveAlways {
		s.st.addAlwaysApproved(commands)
	}
	s.record(d)
	return d, nil
}

func (s *sessionRun) record(d session.DecisionRecord) {
	s.st.recordDecision(d)
	if c := s.call(d.CallID); c != nil {
		dc := d
		c.Decision = &dc
		if d.Decision != session.DecisionReject {
			c.Status = session.CallPending
		}
	}
	s.touch()
}

func (s *sessionRun) validateApprove(ctx workflow.Context, req session.ApproveRequest) error {
	if err := s.validateAlive(ctx, nil); err != nil {
		return err
	}
	switch req.Decision {
	case session.DecisionApprove, session.DecisionApproveAlways, session.DecisionReject:
	default:
		return fmt.Errorf("decision %q is unknown; use %q, %q or %q", req.Decision, session.DecisionApprove, session.DecisionApproveAlways, session.DecisionReject)
	}
	p := s.st.Last.Pending
	if p == nil || p.CallID != req.CallID || s.decision != nil {
		if d := s.sameClick(req); d != nil {
			// Another bot replica's copy of the click that decided: the
			// click did what it asked, so this is no refusal to show.
			return temporal.NewApplicationError(fmt.Sprintf("this click decided the call already (%s by %s)", d.Decision, displayName(d.User)), session.ErrTypeClickDecided)
		}
		if d := s.decided(req.CallID); d != nil {
			if d.Expired {
				return fmt.Errorf("this approval request expired at %s; the command was not run", d.At.UTC().Format("15:04 MST"))
			}
			verb := map[session.Decision]string{session.DecisionApprove: "approved", session.DecisionApproveAlways: "approved (always)", session.DecisionReject: "rejected"}[d.Decision]
			return fmt.Errorf("already decided: %s by %s", verb, displayName(d.User))
		}
		if s.decision != nil && p != nil && p.CallID == req.CallID {
			return fmt.Errorf("already decided by %s", displayName(s.decision.User))
		}
		return fmt.Errorf("unknown or stale approval request %q: nothing is waiting for approval under that ID", req.CallID)
	}
	if !workflow.Now(ctx).Before(p.ExpiresAt) {
		return fmt.Errorf("this approval request expired at %s; the command was not run", p.ExpiresAt.UTC().Format("15:04 MST"))
	}
	if !s.st.mayApprove(req.User) {
		return fmt.Errorf("%s may not approve commands in this session: only its owner (%s) and configured approvers may", displayName(req.User), displayName(s.st.Owner))
	}
	return nil
}

// sameClick finds the decision req's click took already: the one waiting
// for the turn to take it, or one recorded, on the same call with the same
// decision by the same user. nil when req carries no click.
func (s *sessionRun) sameClick(req session.ApproveRequest) *session.DecisionRecord {
	if req.Click == "" {
		return nil
	}
	d := s.decision
	if d == nil || d.CallID != req.CallID {
		d = s.decided(req.CallID)
	}
	if d == nil || d.Click != req.Click || d.Decision != req.Decision || d.User.ID != req.User.ID {
		return nil
	}
	return d
}

// decided finds a decision on callID in this turn or the log.
func (s *sessionRun) decided(callID string) *session.DecisionRecord {
	if c := s.call(callID); c != nil && c.Decision != nil {
		return c.Decision
	}
	for i := len(s.st.Decisions) - 1; i >= 0; i-- {
		if s.st.Decisions[i].CallID == callID {
			return &s.st.Decisions[i]
		}
	}
	return nil
}

func (s *sessionRun) onApprove(ctx workflow.Context, req session.ApproveRequest) (session.ApproveResponse, error) {
	p := s.st.Last.Pending
	d := session.DecisionRecord{
		CallID: req.CallID, Command: p.Command, Decision: req.Decision, Reason: req.Reason,
		User: req.User, At: workflow.Now(ctx), Turn: s.st.Turn, Click: req.Click,
	}
	s.decision = &d
	return session.ApproveResponse{Command: p.Command}, nil
}
