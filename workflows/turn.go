package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// errStopped marks a turn ended by /stop or destroy.
var errStopped = errors.New("turn stopped")

// runTurn takes every queued message as one turn and runs the agent loop
// until the model answers, the turn fails, or a user stops it.
func (s *sessionRun) runTurn(ctx workflow.Context) {
	batch := s.st.Queue
	s.st.Queue = nil
	s.st.Turn++
	now := workflow.Now(ctx)
	var prev *session.TurnEnd
	if l := s.st.Last; l.Turn > 0 {
		prev = &session.TurnEnd{Turn: l.Turn, Status: l.Status, Stopped: l.Stopped, Error: l.Error, FinalText: l.FinalText,
			FinalRef: l.FinalRef, FinalClaim: l.FinalClaim, FinalClaimAt: l.FinalClaimAt, StatusRef: l.StatusRef,
			StartedAt: l.StartedAt, EndedAt: l.EndedAt, Usage: l.Usage}
	}
	s.st.Last = session.TurnState{Turn: s.st.Turn, Status: session.StatusThinking, Backend: s.st.Backend, StartedAt: now, Previous: prev}
	multi := len(batch) > 1
	var filed []filedMessage
	for _, m := range batch {
		if m.Ref != "" && len(s.st.Last.MessageRefs) < maxMessageRefs {
			s.st.Last.MessageRefs = append(s.st.Last.MessageRefs, m.Ref)
		}
		s.st.remember(m.EventID, s.st.Turn)
		if m.Context != "" {
			s.st.appendTranscript(session.HistoryEntry{Turn: s.st.Turn, At: m.At, Msg: session.Message{Role: session.RoleUser,
				Content: contextNote(s.st.Turn) + m.Context + "\n]"}})
		}
		content := m.Text
		if multi || (m.User.ID != "" && m.User.ID != s.st.Owner.ID) {
			content = speaker(m.User, s.st.Owner) + ": " + m.Text
		}
		s.st.appendTranscript(session.HistoryEntry{Turn: s.st.Turn, At: m.At, Msg: session.Message{Role: session.RoleUser, Content: content, User: displayName(m.User)}})
		if len(m.Attachments) > 0 {
			filed = append(filed, filedMessage{pos: s.st.firstPosition() + len(s.st.Transcript) - 1, files: m.Attachments})
		}
	}
	// What happened since the last turn ended, shown on this turn's card.
	s.st.Last.Notices = append(s.st.Last.Notices, s.st.Carried...)
	s.st.Carried = nil
	if multi {
		s.st.Last.Notices = append(s.st.Last.Notices, fmt.Sprintf("%d messages were taken together in this turn.", len(batch)))
	}
	s.turnActive = true
	s.turnModel = s.st.Model
	s.turnsThisRun++
	s.stopBy = nil
	s.execRan = false
	tctx, cancel := workflow.WithCancel(ctx)
	s.cancelTurn = cancel
	s.touch()
	s.index(ctx)
	if s.st.PendingRepo != nil {
		// The first message named a repository: clone it now, so the
		// turn's card shows the clone and the model finds the checkout.
		s.setupRepo(tctx, s.st.Turn)
	}
	if len(filed) > 0 {
		s.saveAttachments(tctx, filed)
	}

	final, err := s.agentLoop(tctx)

	// Whether the turn was stopped must be read before the turn context is
	// released below; afterwards every turn context is done.
	stopped := errors.Is(err, errStopped) || temporal.IsCanceledError(err) || (ctx.Err() == nil && tctx.Err() != nil)
	s.turnActive = false
	s.cancelTurn = nil
	cancel()
	s.st.Last.Pending = nil
	// Save the workspace even after a stop: the commands that did run
	// changed it.
	if s.execRan {
		sctx, _ := workflow.NewDisconnectedContext(ctx)
		if serr := s.snapshot(sctx, false); serr != nil {
			s.st.Last.Notices = append(s.st.Last.Notices, "The workspace snapshot failed: "+userError(serr)+". The sandbox itself still has the changes.")
		}
	}
	s.st.Last.EndedAt = workflow.Now(ctx)
	switch {
	case err == nil:
		s.st.Last.Status = session.StatusComplete
		s.st.Last.FinalText = final
	case stopped:
		by := "someone"
		if s.stopBy != nil {
			by = displayName(*s.stopBy)
		}
		s.st.Last.Status = session.StatusComplete
		s.st.Last.Stopped = true
		s.st.Last.FinalText = fmt.Sprintf("Stopped by %s.", by)
		s.st.appendTranscript(session.HistoryEntry{Turn: s.st.Turn, At: s.st.Last.EndedAt, Msg: session.Message{
			Role: session.RoleUser, Content: fmt.Sprintf("[%s interrupted this turn before it finished. Commands that had not run were not run.]", by),
		}})
	default:
		s.st.Last.Status = session.StatusFailed
		s.st.Last.Error = userError(err)
		s.log.Warn("turn failed", "turn", s.st.Turn, "error", err)
	}
	if s.checkpoints {
		s.recordCheckpoint(ctx, s.saved.Files, s.saved.WorkspaceBytes)
		s.saved = sandbox.SnapshotResult{}
	}
	s.touch()
	// After the answer, so nobody waits for it: the next turn starts from
	// the summary instead of leaving exchanges out.
	if s.compaction && s.st.CompactDue && ctx.Err() == nil {
		s.compact(ctx, "it no longer fit the model's context")
	}
}

// callModel asks the model for the next step. Runs from
// changeTranscriptRefs on send the transcript stored at the previous call
// by reference, with the entries added since; a stored transcript that has
// gone missing is answered by sending the whole transcript once more.
func (s *sessionRun) callModel(ctx workflow.Context, limitHit bool) (agent.ModelResponse, error) {
	msgs := s.modelMessages()
	var resp agent.ModelResponse
	if !s.transcriptRefs {
		req := agent.ModelRequest{Messages: agent.Budget(msgs, s.st.Settings.ContextBytes), DisableTools: limitHit, Model: s.turnModel}
		err := workflow.ExecuteActivity(modelOptions(ctx, s.st.Settings), modelActs.Complete, req).Get(ctx, &resp)
		if err == nil {
			s.countUsage(resp)
		}
		return resp, err
	}
	first := s.st.firstPosition()
	req := agent.ModelRequest{Messages: msgs, DisableTools: limitHit, Stored: true, SessionID: s.id, ContextBytes: s.st.Settings.ContextBytes, Compactable: s.compaction, Model: s.turnModel}
	baseFirst := first
	if ref := s.st.ModelRef; ref != nil {
		skip, end := first-s.st.ModelRefFirst, s.st.ModelRefFirst+ref.Count
		if skip >= 0 && skip < ref.Count && end >= first && end <= first+len(msgs) {
			req.Base, req.Skip, req.Messages, baseFirst = ref, skip, msgs[end-first:], s.st.ModelRefFirst
		}
	}
	err := workflow.ExecuteActivity(modelOptions(ctx, s.st.Settings), modelActs.CompleteStored, req).Get(ctx, &resp)
	var ae *temporal.ApplicationError
	if err != nil && s.compaction && errors.As(err, &ae) && ctx.Err() == nil &&
		(ae.Type() == agent.ErrTypeNeedsCompaction || ae.Type() == agent.ErrTypeModelContextTooLong) {
		// Compact, then ask once more with what is left; if even that
		// does not fit (or nothing could be compacted), the activity may
		// leave the oldest exchanges out.
		why := "it no longer fit the model's context"
		if ae.Type() == agent.ErrTypeModelContextTooLong {
			why = "the model refused the conversation as too long"
		}
		if s.compact(ctx, why) {
			msgs, first = s.modelMessages(), s.st.firstPosition()
		}
		req.Base, req.Skip, req.Messages, req.Compactable, baseFirst = nil, 0, msgs, false, first
		resp = agent.ModelResponse{}
		err = workflow.ExecuteActivity(modelOptions(ctx, s.st.Settings), modelActs.CompleteStored, req).Get(ctx, &resp)
	}
	if err != nil && req.Base != nil && errors.As(err, &ae) && ae.Type() == agent.ErrTypeTranscriptMissing && ctx.Err() == nil {
		s.notice("The stored copy of this conversation was missing (%s); sent it to the model in full instead.", userError(err))
		req.Base, req.Skip, req.Messages, baseFirst = nil, 0, msgs, first
		resp = agent.ModelResponse{}
		err = workflow.ExecuteActivity(modelOptions(ctx, s.st.Settings), modelActs.CompleteStored, req).Get(ctx, &resp)
	}
	if err != nil {
		return resp, err
	}
	if resp.Transcript != nil {
		s.st.ModelRef, s.st.ModelRefFirst = resp.Transcript, baseFirst+resp.Skipped
	}
	s.countUsage(resp)
	if resp.Dropped > 0 && s.compaction {
		s.st.CompactDue = true
	}
	return resp, nil
}

// compactKeep is how many of the latest exchanges compaction leaves as
// they are.
const compactKeep = 2

// compact replaces the oldest part of the transcript, all but the last
// compactKeep exchanges, with a summary the model writes of it, and
// reports whether it did. The summary is an entry of the transcript like
// any other, so it is made once and carried through continue-as-new.
func (s *sessionRun) compact(ctx workflow.Context, why string) bool {
	s.st.CompactDue = false
	cut, starts := 0, 0
	for i := len(s.st.Transcript) - 1; i > 0; i-- {
		e := s.st.Transcript[i]
		if e.Msg.Role == session.RoleUser && s.st.Transcript[i-1].Msg.Role != session.RoleUser {
			if starts++; starts == compactKeep {
				cut = i
				break
			}
		}
	}
	s.compacted = session.CompactResponse{}
	if cut < 2 {
		return false // too little before the kept exchanges to be worth it
	}
	old := make([]session.Message, 0, cut)
	for _, e := range s.st.Transcript[:cut] {
		old = append(old, e.Msg)
	}
	var res agent.CompactResponse
	if err := workflow.ExecuteActivity(modelOptions(ctx, s.st.Settings), modelActs.Compact, agent.CompactRequest{Messages: old}).Get(ctx, &res); err != nil {
		if ctx.Err() == nil {
			s.compacted.Error = userError(err)
			s.notice("Could not compact the conversation (%s): %s. The oldest messages are left out of what the model sees instead.", why, userError(err))
		}
		return false
	}
	s.st.Usage = s.st.Usage.Add(res.Usage.PromptTokens, res.Usage.CompletionTokens)
	first, last := s.st.Transcript[0].Turn, s.st.Transcript[cut-1].Turn
	note := session.HistoryEntry{Turn: last, At: workflow.Now(ctx), Msg: session.Message{
		Role:    session.RoleUser,
		Content: fmt.Sprintf("%s turns %d to %d]\n%s", agent.CompactNotePrefix, first, last, res.Summary),
	}}
	s.st.Transcript = append([]session.HistoryEntry{note}, s.st.Transcript[cut:]...)
	// Positions moved: the next call sends the transcript in full once.
	s.st.ModelRef = nil
	s.st.Compactions++
	s.compacted = session.CompactResponse{Compacted: true, Summary: res.Summary}
	s.notice("Compacted turns %d to %d into a summary (%s); the conversation goes on from it.", first, last, why)
	s.touch()
	return true
}

// countUsage adds a model call's reported tokens to the turn and the
// session.
func (s *sessionRun) countUsage(resp agent.ModelResponse) {
	s.st.Last.Usage = s.st.Last.Usage.Add(resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
	s.st.Usage = s.st.Usage.Add(resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
}

// agentLoop is model → tools → model until the model answers.
func (s *sessionRun) agentLoop(ctx workflow.Context) (string, error) {
	calls := 0
	limitHit := false
	for {
		if b := s.st.Settings.TokenBudget; b > 0 && s.st.Usage.Total() >= b {
			// Checked before every call: a turn stops where the budget
			// ran out, with the reason in the thread.
			return "", fmt.Errorf("this session has used %d tokens, and its budget is %d (SANDBOT_SESSION_TOKEN_BUDGET); an operator can raise it, or start a new session", s.st.Usage.Total(), b)
		}
		resp, err := s.callModel(ctx, limitHit)
		if err != nil {
			if ctx.Err() != nil {
				return "", errStopped
			}
			return "", fmt.Errorf("model call failed: %w", err)
		}
		if limitHit {
			resp.ToolCalls = nil
		}
		s.st.appendTranscript(session.HistoryEntry{Turn: s.st.Turn, At: workflow.Now(ctx), Msg: session.Message{
			Role: session.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls,
		}})
		if len(resp.ToolCalls) == 0 {
			if strings.TrimSpace(resp.Content) == "" {
				return "(The model finished without a written answer.)", nil
			}
			return resp.Content, nil
		}
		for i, tc := range resp.ToolCalls {
			if ctx.Err() != nil {
				s.skipCalls(ctx, resp.ToolCalls[i:], "not run: the turn was stopped by the user")
				return "", errStopped
			}
			calls++
			if calls > s.st.Settings.MaxToolCalls {
				limitHit = true
				s.failCall(ctx, tc, fmt.Sprintf("not run: this turn reached its limit of %d tool calls. Summarize what you did and what is left; the user can ask you to continue.", s.st.Settings.MaxToolCalls))
				continue
			}
			if err := s.toolCall(ctx, tc); err != nil {
				// Every call of the assistant message needs a tool result,
				// or the next model request is invalid; that includes this
				// one if it was stopped before it produced one.
				s.skipCalls(ctx, resp.ToolCalls[i:], "not run: the turn was stopped by the user")
				return "", err
			}
		}
		if limitHit {
			s.notice("This turn reached its limit of %d tool calls; asking the model to wrap up.", s.st.Settings.MaxToolCalls)
		}
	}
}

// toolResult appends the tool message the model sees for a call.
func (s *sessionRun) toolResult(ctx workflow.Context, callID, content string) {
	s.toolResultNamed(ctx, callID, session.ShellToolName, content)
}

// toolResultNamed is toolResult for a call of the named tool.
func (s *sessionRun) toolResultNamed(ctx workflow.Context, callID, tool, content string) {
	s.st.appendTranscript(session.HistoryEntry{Turn: s.st.Turn, At: workflow.Now(ctx), Msg: session.Message{
		Role: session.RoleTool, ToolCallID: callID, Name: tool,
		Content: agent.CapToolResult(content, agent.MaxToolResultBytes),
	}})
}

func (s *sessionRun) callIndex(callID string) int {
	for i := range s.st.Last.ToolCalls {
		if s.st.Last.ToolCalls[i].CallID == callID {
			return i
		}
	}
	return -1
}

func (s *sessionRun) call(callID string) *session.ToolCallState {
	if i := s.callIndex(callID); i >= 0 {
		return &s.st.Last.ToolCalls[i]
	}
	return nil
}

func (s *sessionRun) addCall(tc session.ToolCall) *session.ToolCallState {
	if c := s.call(tc.ID); c != nil {
		return c
	}
	s.st.Last.ToolCalls = append(s.st.Last.ToolCalls, session.ToolCallState{CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments, Status: session.CallPending})
	s.touch()
	return &s.st.Last.ToolCalls[len(s.st.Last.ToolCalls)-1]
}

func (s *sessionRun) failCall(ctx workflow.Context, tc session.ToolCall, why string) {
	c := s.addCall(tc)
	c.Status = session.CallFailed
	c.Error = why
	c.EndedAt = workflow.Now(ctx)
	s.touch()
	s.toolResult(ctx, tc.ID, why)
}

func (s *sessionRun) skipCalls(ctx workflow.Context, calls []session.ToolCall, why string) {
	for _, tc := range calls {
		c := s.addCall(tc)
		if c.Status == session.CallPending || c.Status == session.CallAwaitingApproval || c.Status == session.CallRunning {
			c.Status = session.CallFailed
			c.Error = why
			c.EndedAt = workflow.Now(ctx)
		}
		if !s.hasToolResult(tc.ID) {
			s.toolResult(ctx, tc.ID, why)
		}
	}
	s.touch()
}

// hasToolResult reports whether the current turn already answered callID.
func (s *sessionRun) hasToolResult(callID string) bool {
	for i := len(s.st.Transcript) - 1; i >= 0; i-- {
		e := s.st.Transcript[i]
		if e.Turn != s.st.Turn {
			return false
		}
		if e.Msg.Role == session.RoleTool && e.Msg.ToolCallID == callID {
			return true
		}
	}
	return false
}

// toolCall runs one tool call: validate, maybe ask for approval, execute.
// It returns an error only when the turn must end (stop or destroy).
func (s *sessionRun) toolCall(ctx workflow.Context, tc session.ToolCall) error {
	s.addCall(tc)
	if tc.Name == session.ShareFileToolName {
		return s.shareFile(ctx, tc)
	}
	if tc.Name != session.ShellToolName {
		s.failCall(ctx, tc, fmt.Sprintf("unknown tool %q; the only tool is %q", tc.Name, session.ShellToolName))
		return nil
	}
	args, err := agent.ParseShellArgs(tc.Arguments)
	if err != nil {
		s.failCall(ctx, tc, err.Error())
		return nil
	}
	c := s.call(tc.ID)
	c.Commands = args.Commands
	s.touch()

	timeout := s.st.Settings.CommandTimeout
	if args.TimeoutMs > 0 {
		timeout = time.Duration(args.TimeoutMs) * time.Millisecond
		if timeout > s.st.Settings.MaxCommandTimeout {
			timeout = s.st.Settings.MaxCommandTimeout
		}
	}

	if s.needsApproval(ctx, args.Commands) {
		d, err := s.approval(ctx, tc.ID, args.Commands)
		if err != nil {
			return errStopped
		}
		if d.Decision == session.DecisionReject {
			c = s.call(tc.ID)
			c.Status = session.CallRejected
			c.EndedAt = workflow.Now(ctx)
			s.touch()
			s.toolResult(ctx, tc.ID, rejectionText(d))
			return nil
		}
	}
	return s.exec(ctx, tc.ID, args.Commands, timeout)
}

func rejectionText(d session.DecisionRecord) string {
	if d.Expired {
		return "The command was not run: nobody approved it before the approval request expired. Do not retry it unless the user asks."
	}
	msg := fmt.Sprintf("The command was not run: %s rejected it.", displayName(d.User))
	if r := strings.TrimSpace(d.Reason); r != "" {
		msg += " Reason: " + r
		if !strings.ContainsAny(r[len(r)-1:], ".!?") {
			msg += "."
		}
	}
	return msg + " Adjust your approach accordingly."
}

// exec runs the commands of one call in the sandbox.
func (s *sessionRun) exec(ctx workflow.Context, callID string, commands []string, timeout time.Duration) error {
	handle, err := s.ensureSandbox(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return errStopped
		}
		msg := fmt.Sprintf("sandbox unavailable on backend %q: %s", s.st.Backend, userError(err))
		s.notice("%s. Use /backend to move the session to another backend.", msg)
		s.failCall(ctx, session.ToolCall{ID: callID}, "not run: "+msg)
		return nil
	}
	c := s.call(callID)
	c.Status = session.CallRunning
	c.StartedAt = workflow.Now(ctx)
	s.touch()
	s.execRan = true

	req := sandbox.ExecRequest{Handle: handle, CallID: callID, Commands: commands, Timeout: timeout, OutputCap: agent.MaxToolResultBytes}
	var res sandbox.ExecResult
	err = workflow.ExecuteActivity(execOptions(ctx, req, s.st.Settings.ExecHeartbeat), sandboxActs.Exec, req).Get(ctx, &res)
	var te *temporal.TimeoutError
	var ae *temporal.ApplicationError
	notStarted := err != nil && ((errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START) ||
		(errors.As(err, &ae) && ae.Type() == sandbox.ErrTypeNotFound))
	if notStarted && ctx.Err() == nil {
		// Nothing ran: the holding worker never picked the call up, or the
		// sandbox vanished. Restore the sandbox and run the call there.
		if te != nil {
			// The host is unreachable: restore elsewhere at once rather
			// than wait for it again.
			s.notice("The worker holding this session's sandbox is unreachable; restoring the workspace from the last snapshot elsewhere.")
			s.st.Handle = nil
		} else {
			// Keep the handle, so Ensure sees it is gone and says so.
			s.forceEnsure = true
		}
		if handle, err = s.ensureSandbox(ctx); err == nil {
			req.Handle = handle
			err = workflow.ExecuteActivity(execOptions(ctx, req, s.st.Settings.ExecHeartbeat), sandboxActs.Exec, req).Get(ctx, &res)
		}
	}
	c = s.call(callID)
	c.EndedAt = workflow.Now(ctx)
	c.Duration = c.EndedAt.Sub(c.StartedAt)
	if err != nil {
		recovered, ok := sandbox.RecoverExec(req, err)
		stopped := ctx.Err() != nil
		lost := errors.As(err, &te)
		c.Status = session.CallFailed
		switch {
		case stopped:
			c.Error = "stopped by the user while running; the command was killed"
		case ok || lost:
			c.Error = "interrupted: the worker running this command stopped responding; the command was not re-run"
			s.notice("A worker stopped while running `%s`; it was not re-run.", oneLine(strings.Join(commands, "; ")))
		default:
			c.Error = "sandbox error: " + userError(err)
			if errors.As(err, &ae) && ae.Type() == sandbox.ErrTypeUnavailable {
				// The backend itself is down (a provider outage, the
				// daemon gone): say so where the user can act on it.
				s.notice("sandbox unavailable on backend %q: %s. Use /backend to move the session to another backend.", s.st.Backend, userError(err))
			}
		}
		var result string
		if ok {
			c.Output = session.CallOutput(agent.FormatShellResult(recovered.Results))
			result = agent.FormatShellResult(recovered.Results)
			if stopped {
				result += "\n[The user stopped the turn while this call was running.]"
			}
		} else if stopped {
			result = "interrupted: the user stopped the turn while this command was running; it was killed."
		} else if lost {
			result = "interrupted: the worker running these commands died mid-command. The commands were NOT re-run; their effects are unknown. Inspect the workspace before retrying."
		} else {
			result = c.Error
		}
		s.touch()
		s.toolResult(ctx, callID, result)
		if stopped {
			return errStopped
		}
		return nil
	}
	c.Status = session.CallCompleted
	code := 0
	for _, r := range res.Results {
		if r.ExitCode != 0 || r.Interrupted {
			code = r.ExitCode
			if r.Interrupted && code == 0 {
				code = -1
			}
		}
	}
	c.ExitCode = &code
	c.Output = session.CallOutput(agent.FormatShellResult(res.Results))
	s.touch()
	s.toolResult(ctx, callID, agent.FormatShellResult(res.Results))
	return nil
}

// ensureSandbox returns a live sandbox for this turn, creating or restoring
// it on first use.
func (s *sessionRun) ensureSandbox(ctx workflow.Context) (sandbox.Handle, error) {
	// A known sandbox is used as is: if it was lost, Exec answers
	// ErrTypeNotFound without running anything and exec comes back here
	// with the handle cleared. That saves an activity on every turn.
	if s.st.Handle != nil && s.st.Handle.Backend == s.st.Backend && !s.st.Suspended && !s.forceEnsure {
		return *s.st.Handle, nil
	}
	s.forceEnsure = false
	req := sandbox.EnsureRequest{
		SessionID: s.id, Backend: s.st.Backend, Handle: s.st.Handle, Snapshot: s.st.Snapshot,
		Labels: map[string]string{"sandbot.platform": s.st.Location.Platform},
	}
	var res sandbox.EnsureResult
	var err error
	ensure := sandboxActs.Ensure
	if s.checkpoints {
		ensure = sandboxActs.EnsureWorkspace // snapshots may be manifests
	}
	if s.st.Handle != nil && s.st.Handle.TaskQueue != "" && s.st.Handle.Backend == s.st.Backend {
		err = workflow.ExecuteActivity(ensureOptions(ctx, s.st.Handle.TaskQueue, true), ensure, req).Get(ctx, &res)
		var te *temporal.TimeoutError
		if err != nil && errors.As(err, &te) && ctx.Err() == nil {
			s.notice("The worker holding this session's sandbox is unreachable; restoring the workspace elsewhere.")
			req.Handle = nil
			err = workflow.ExecuteActivity(ensureOptions(ctx, session.BackendQueue(s.queue, s.st.Backend), false), ensure, req).Get(ctx, &res)
		}
	} else {
		if s.st.Handle != nil && s.st.Handle.Backend != s.st.Backend {
			req.Handle = nil
		}
		err = workflow.ExecuteActivity(ensureOptions(ctx, session.BackendQueue(s.queue, s.st.Backend), false), ensure, req).Get(ctx, &res)
	}
	if err != nil {
		return sandbox.Handle{}, err
	}
	h := res.Handle
	s.st.Handle = &h
	if s.st.Suspended && !res.Created && res.Notice == "" {
		res.Notice = "Resumed this session's sandbox; it had been suspended while idle."
	}
	s.st.Suspended = false
	if res.Notice != "" {
		s.notice("%s", res.Notice)
	}
	if res.Confinement != "" {
		s.st.Confinement, s.st.SandboxWarning = res.Confinement, res.Warning
	}
	if res.Created && res.Warning != "" {
		s.notice("%s", res.Warning)
	}
	return h, nil
}

// snapshot saves the workspace if it changed since the last snapshot.
func (s *sessionRun) snapshot(ctx workflow.Context, force bool) error {
	if s.st.Handle == nil {
		return nil
	}
	prev := s.st.Fingerprint
	if force {
		prev = ""
	}
	req := sandbox.SnapshotRequest{Handle: *s.st.Handle, Key: sandbox.SnapshotKey(s.id, s.st.Turn), PrevFingerprint: prev}
	var res sandbox.SnapshotResult
	if s.checkpoints {
		// Incremental: the previous snapshot is the base, and it stays as
		// a checkpoint (recordCheckpoint decides when it goes).
		req.Base = s.st.Snapshot
		if err := workflow.ExecuteActivity(housekeepingOptions(ctx, s.st.Handle.TaskQueue), sandboxActs.SaveWorkspace, req).Get(ctx, &res); err != nil {
			return err
		}
		if res.Written {
			s.st.Snapshot = res.Key
			s.saved = res
		}
		s.st.Fingerprint = res.Fingerprint
		return nil
	}
	if err := workflow.ExecuteActivity(housekeepingOptions(ctx, s.st.Handle.TaskQueue), sandboxActs.Snapshot, req).Get(ctx, &res); err != nil {
		return err
	}
	if res.Written {
		if s.st.Snapshot != "" && s.st.Snapshot != res.Key {
			s.st.Stale = append(s.st.Stale, s.st.Snapshot)
		}
		s.st.Snapshot = res.Key
	}
	s.st.Fingerprint = res.Fingerprint
	return nil
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > 80 {
		s = string(r[:77]) + "…"
	}
	return s
}

// needsApproval applies the approval policy to a call. The answer is
// recorded in history (a side effect), so a later change to the policy code
// or the read-only allowlist cannot change what a replay of this session
// schedules. Histories from before that change compute it inline, as they
// did when they were recorded.
func (s *sessionRun) needsApproval(ctx workflow.Context, commands []string) bool {
	mode := s.st.Settings.ApprovalMode
	if workflow.GetVersion(ctx, changeFrozenApproval, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return agent.NeedsApproval(mode, commands)
	}
	var needs bool
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		return agent.NeedsApproval(mode, commands)
	}).Get(&needs)
	if err != nil {
		// A recorded answer that does not decode: ask, never skip asking.
		s.log.Error("approval decision unreadable; asking for approval", "error", err)
		return true
	}
	return needs
}

// speaker names who wrote a message for the model: the display name, plus
// the chat ID when someone other than the owner goes by the owner's name
// (display names are not unique, and anyone can pick one).
func speaker(u, owner session.User) string {
	name := displayName(u)
	if u.ID != owner.ID && u.ID != "" && strings.EqualFold(strings.TrimSpace(name), strings.TrimSpace(displayName(owner))) {
		return name + " (" + u.ID + ")"
	}
	return name
}

// maxMessageRefs bounds the messages a turn's state names for reactions.
const maxMessageRefs = 20

// contextNote introduces what a chat thread said that was not addressed to
// sandbot: before it was first mentioned, or (where only mentions reach
// it) since its last turn.
func contextNote(turn int) string {
	if turn <= 1 {
		return "[Earlier in this chat thread, before sandbot was mentioned (for context; the request follows):\n"
	}
	return "[Said in this chat thread since the last turn, not addressed to sandbot (for context; the request follows):\n"
}
