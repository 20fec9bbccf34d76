// Package chattest holds the test doubles of the chat core, shared by the
// tests of chat and of every adapter: Sessions, an in-memory stand-in for
// the session workflows behind a real chat.Core, and Core, a recording
// stand-in for the core behind a real adapter.
package chattest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

// Sessions is an in-memory chat.Sessions: the session workflows as the
// core sees them. By default it behaves like the workflow in miniature:
// Send starts a session or a new turn (a redelivered event ID answers with
// its first turn), Approve checks the pending call and who may decide it
// (the owner, Approvers, holders of ApproverRoles), RecordChatRef stores
// the turn's message refs, and a test moves turns along with Set. A
// session nobody sent to is ErrNoSession.
//
// Each method's Fn field, if set, replaces that default (the call is still
// recorded), so a test can script answers or inject failures. Every call is
// recorded as a short line ("send <event>", "turn_state", "approve <call>
// <decision> <user>", "stop", "pause", "resume", "destroy", "set_backend
// <name>", "fork", "chat_ref <kind>", "info", "history", "list") for
// Calls and Count. The zero value is ready to use; it is safe for
// concurrent use, and Fn hooks run without its lock held.
type Sessions struct {
	// Approvers (user IDs) and ApproverRoles may decide approvals in every
	// session, like session.Settings.
	Approvers, ApproverRoles []string

	SendFn       func(session.SessionInput, session.MessageRequest) (session.MessageResponse, error)
	TurnStateFn  func(id string) (session.TurnState, error)
	ApproveFn    func(id string, req session.ApproveRequest) (session.ApproveResponse, error)
	StopFn       func(id string) (session.StopResponse, error)
	PauseFn      func(id string) (session.PauseResponse, error)
	ResumeFn     func(id string) (session.PauseResponse, error)
	CompactFn    func(id string) (session.CompactResponse, error)
	RewindFn     func(id string, req session.RewindRequest) (session.RewindResponse, error)
	DestroyFn    func(id string) (session.DestroyResponse, error)
	SetBackendFn func(id string, req session.SetBackendRequest) (session.SetBackendResponse, error)
	ForkFn       func(id string, req session.ForkRequest) (session.ForkResponse, error)
	InfoFn       func(id string) (session.Info, error)
	HistoryFn    func(id string, req session.HistoryRequest) ([]session.HistoryEntry, error)
	// SharedFileFn answers SharedFile (default: the file is gone).
	SharedFileFn func(id string, req session.SharedFileRequest) (session.SharedFileData, error)
	ListFn       func(f chat.ListFilter) ([]chat.SessionSummary, error)
	RecordFn     func(id string, req session.ChatRefRequest) error
	ClaimFn      func(id string, req session.ClaimFinalRequest) (session.ClaimFinalResponse, error)
	// WatchFn, if set, answers ClaimWatch; by default every claim is
	// granted (one replica).
	WatchFn func(id string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error)

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change
	sessions  map[string]*fakeSession
	calls     []string
	sent      []session.MessageRequest
	approvals []session.ApproveRequest
	refs      []session.ChatRefRequest
	claims    map[string]string // "<id>#<turn>" → claimer
	posted    map[string]bool   // "<id>#<turn>" → a final ref was recorded
}

var _ chat.Sessions = (*Sessions)(nil)

// fakeSession is one session of the default behaviour.
type fakeSession struct {
	start  session.SessionInput
	ts     session.TurnState
	events map[string]int // event ID → its turn
}

// noSession is what the workflow client answers for a thread without a
// session.
func noSession(id string) error {
	return &chat.UserError{Msg: "There is no session in this thread.", Err: fmt.Errorf("%w: %s", chat.ErrNoSession, id)}
}

// record notes a call; it takes the lock.
func (f *Sessions) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

// bumpLocked wakes Changed's waiters; f.mu is held.
func (f *Sessions) bumpLocked() {
	if f.changed != nil {
		close(f.changed)
	}
	f.changed = make(chan struct{})
}

// Changed is closed at the next change of a session (a turn, an approval,
// a recorded ref), for tests that wait on the sessions and something else.
func (f *Sessions) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return f.changed
}

// Calls returns the recorded calls, oldest first.
func (f *Sessions) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Count counts recorded calls starting with prefix.
func (f *Sessions) Count(prefix string) int {
	n := 0
	for _, c := range f.Calls() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// Sent returns the messages Send accepted (not redeliveries), oldest first.
func (f *Sessions) Sent() []session.MessageRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// Approvals returns the decisions Approve accepted, oldest first.
func (f *Sessions) Approvals() []session.ApproveRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.approvals)
}

// Refs returns every RecordChatRef request, oldest first.
func (f *Sessions) Refs() []session.ChatRefRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.refs)
}

// Get returns session id's turn state (zero if there is none).
func (f *Sessions) Get(id string) session.TurnState {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.sessions[id]; s != nil {
		return cloneTurnState(s.ts)
	}
	return session.TurnState{}
}

// Set changes session id's turn state as the workflow would, bumping its
// version. It fails the call's goroutine with a panic if id has no session:
// tests set only sessions they started.
func (f *Sessions) Set(id string, change func(ts *session.TurnState)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[id]
	if s == nil {
		panic("chattest: Set on session " + id + ", which nobody started")
	}
	change(&s.ts)
	s.ts.Version++
	f.bumpLocked()
}

// sessionLocked returns session id, or the no-session error; f.mu is held.
func (f *Sessions) sessionLocked(id string) (*fakeSession, error) {
	if s := f.sessions[id]; s != nil {
		return s, nil
	}
	return nil, noSession(id)
}

// Send implements chat.Sessions.
func (f *Sessions) Send(_ context.Context, start session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
	f.record("send " + req.EventID)
	if f.SendFn != nil {
		return f.SendFn(start, req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id := start.Location.ID()
	if f.sessions == nil {
		f.sessions = map[string]*fakeSession{}
	}
	s := f.sessions[id]
	if s == nil {
		backend := start.Backend
		if backend == "" {
			backend = "local"
		}
		s = &fakeSession{start: start, events: map[string]int{}, ts: session.TurnState{Backend: backend}}
		f.sessions[id] = s
	}
	if turn, ok := s.events[req.EventID]; ok {
		return session.MessageResponse{Turn: turn, Duplicate: true}, nil
	}
	f.sent = append(f.sent, req)
	s.ts = session.TurnState{Turn: s.ts.Turn + 1, Version: s.ts.Version + 1, Status: session.StatusThinking,
		Backend: s.ts.Backend, StartedAt: time.Now()}
	s.events[req.EventID] = s.ts.Turn
	f.bumpLocked()
	return session.MessageResponse{Turn: s.ts.Turn}, nil
}

// TurnState implements chat.Sessions.
func (f *Sessions) TurnState(_ context.Context, id string) (session.TurnState, error) {
	f.record("turn_state")
	if f.TurnStateFn != nil {
		return f.TurnStateFn(id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sessionLocked(id)
	if err != nil {
		return session.TurnState{}, err
	}
	return cloneTurnState(s.ts), nil
}

// cloneTurnState copies ts the way a query answer is a fresh decoding:
// the caller may read it while the fake moves the session on.
func cloneTurnState(ts session.TurnState) session.TurnState {
	ts.ToolCalls = slices.Clone(ts.ToolCalls)
	for i := range ts.ToolCalls {
		if d := ts.ToolCalls[i].Decision; d != nil {
			dc := *d
			ts.ToolCalls[i].Decision = &dc
		}
		ts.ToolCalls[i].Commands = slices.Clone(ts.ToolCalls[i].Commands)
	}
	ts.Notices = slices.Clone(ts.Notices)
	if ts.Pending != nil {
		p := *ts.Pending
		ts.Pending = &p
	}
	return ts
}

// Approve implements chat.Sessions, validating like the workflow's update
// validator.
func (f *Sessions) Approve(_ context.Context, id string, req session.ApproveRequest) (session.ApproveResponse, error) {
	f.record(fmt.Sprintf("approve %s %s %s", req.CallID, req.Decision, req.User.ID))
	if f.ApproveFn != nil {
		return f.ApproveFn(id, req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sessionLocked(id)
	if err != nil {
		return session.ApproveResponse{}, err
	}
	p := s.ts.Pending
	if p == nil || p.CallID != req.CallID {
		for _, c := range s.ts.ToolCalls {
			if d := c.Decision; req.Click != "" && c.CallID == req.CallID && d != nil && d.Click == req.Click && d.Decision == req.Decision && d.User.ID == req.User.ID {
				// A copy of the click that decided (the workflow's
				// ErrTypeClickDecided, as TemporalSessions reports it).
				return session.ApproveResponse{Repeat: true}, nil
			}
		}
		return session.ApproveResponse{}, &chat.UserError{Msg: "This approval is no longer pending."}
	}
	allowed := req.User.ID == s.start.Owner.ID || slices.Contains(f.Approvers, req.User.ID)
	for _, r := range req.User.Roles {
		allowed = allowed || slices.Contains(f.ApproverRoles, r)
	}
	if !allowed {
		return session.ApproveResponse{}, &chat.UserError{Msg: "You may not approve commands in this session."}
	}
	f.approvals = append(f.approvals, req)
	for i := range s.ts.ToolCalls {
		c := &s.ts.ToolCalls[i]
		if c.CallID == req.CallID {
			c.Decision = &session.DecisionRecord{CallID: c.CallID, Command: p.Command, Decision: req.Decision, Reason: req.Reason, User: req.User, At: time.Now(), Turn: s.ts.Turn, Click: req.Click}
			c.Status = session.CallRunning
			if req.Decision == session.DecisionReject {
				c.Status = session.CallRejected
			}
		}
	}
	s.ts.Pending = nil
	s.ts.Status = session.StatusThinking
	s.ts.Version++
	f.bumpLocked()
	return session.ApproveResponse{Command: p.Command}, nil
}

// Stop implements chat.Sessions: it reports whether a turn was running.
func (f *Sessions) Stop(_ context.Context, id string, _ session.StopRequest) (session.StopResponse, error) {
	f.record("stop")
	if f.StopFn != nil {
		return f.StopFn(id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sessionLocked(id)
	if err != nil {
		return session.StopResponse{}, err
	}
	return session.StopResponse{Stopped: s.ts.Status.Active(), Turn: s.ts.Turn}, nil
}

// Pause implements chat.Sessions.
func (f *Sessions) Pause(_ context.Context, id string, _ session.PauseRequest) (session.PauseResponse, error) {
	f.record("pause")
	if f.PauseFn != nil {
		return f.PauseFn(id)
	}
	return session.PauseResponse{Turn: f.Get(id).Turn}, nil
}

// Compact implements chat.Sessions.
func (f *Sessions) Compact(_ context.Context, id string, _ session.CompactRequest) (session.CompactResponse, error) {
	f.record("compact")
	if f.CompactFn != nil {
		return f.CompactFn(id)
	}
	return session.CompactResponse{Compacted: true, Summary: "summary"}, nil
}

// Rewind implements chat.Sessions.
func (f *Sessions) Rewind(_ context.Context, id string, req session.RewindRequest) (session.RewindResponse, error) {
	f.record("rewind")
	if f.RewindFn != nil {
		return f.RewindFn(id, req)
	}
	return session.RewindResponse{Turn: req.Turn, Undone: f.Get(id).Turn - req.Turn}, nil
}

// SetModel implements chat.Sessions.
func (f *Sessions) SetModel(_ context.Context, id string, req session.SetModelRequest) (session.SetModelResponse, error) {
	f.record("set_model " + req.Model)
	return session.SetModelResponse{To: req.Model}, nil
}

// SetTitle implements chat.Sessions.
func (f *Sessions) SetTitle(_ context.Context, id string, req session.SetTitleRequest) (session.SetTitleResponse, error) {
	f.record("set_title " + req.Title)
	return session.SetTitleResponse{To: req.Title}, nil
}

// SetRepo implements chat.Sessions.
func (f *Sessions) SetRepo(_ context.Context, id string, req session.SetRepoRequest) (session.SetRepoResponse, error) {
	f.record("set_repo " + req.Repo.URL)
	return session.SetRepoResponse{Repo: session.Repo{URL: req.Repo.URL, Name: req.Repo.Name(), Branch: req.Repo.Branch}}, nil
}

// Diff implements chat.Sessions.
func (f *Sessions) Diff(_ context.Context, id string, _ session.DiffRequest) (session.DiffResponse, error) {
	f.record("diff")
	return session.DiffResponse{}, nil
}

// OpenPR implements chat.Sessions.
func (f *Sessions) OpenPR(_ context.Context, id string, req session.OpenPRRequest) (session.OpenPRResponse, error) {
	f.record("open_pr " + req.Title)
	return session.OpenPRResponse{}, nil
}

// Resume implements chat.Sessions.
func (f *Sessions) Resume(_ context.Context, id string, _ session.ResumeRequest) (session.PauseResponse, error) {
	f.record("resume")
	if f.ResumeFn != nil {
		return f.ResumeFn(id)
	}
	return session.PauseResponse{Turn: f.Get(id).Turn}, nil
}

// Destroy implements chat.Sessions.
func (f *Sessions) Destroy(_ context.Context, id string, _ session.DestroyRequest) (session.DestroyResponse, error) {
	f.record("destroy")
	if f.DestroyFn != nil {
		return f.DestroyFn(id)
	}
	return session.DestroyResponse{Turns: f.Get(id).Turn}, nil
}

// SetBackend implements chat.Sessions: the switch is immediate.
func (f *Sessions) SetBackend(_ context.Context, id string, req session.SetBackendRequest) (session.SetBackendResponse, error) {
	f.record("set_backend " + req.Backend)
	if f.SetBackendFn != nil {
		return f.SetBackendFn(id, req)
	}
	from := f.Get(id).Backend
	if from == "" {
		from = "local"
	}
	return session.SetBackendResponse{From: from, To: req.Backend}, nil
}

// Fork implements chat.Sessions.
func (f *Sessions) Fork(_ context.Context, id string, req session.ForkRequest) (session.ForkResponse, error) {
	f.record("fork")
	if f.ForkFn != nil {
		return f.ForkFn(id, req)
	}
	return session.ForkResponse{WorkflowID: req.Location.ID(), Backend: "local", AtTurn: f.Get(id).Turn}, nil
}

// RecordChatRef implements chat.Sessions: the ref is recorded, and stored
// in the turn state if it is for the current turn. Like the workflow, a
// session keeps the first status card recorded for a turn: another is
// refused with session.CardRefusal (and RecordFn is not called).
func (f *Sessions) RecordChatRef(_ context.Context, id string, req session.ChatRefRequest) error {
	f.record("chat_ref " + req.Kind)
	f.mu.Lock()
	f.refs = append(f.refs, req)
	if s := f.sessions[id]; s != nil && req.Kind == session.ChatRefStatus && req.Turn == s.ts.Turn && s.ts.StatusRef != "" && s.ts.StatusRef != req.Ref {
		first := s.ts.StatusRef
		f.mu.Unlock()
		return errors.New(session.CardRefusal(req.Turn, first))
	}
	if req.Kind == "final" {
		if f.posted == nil {
			f.posted = map[string]bool{}
		}
		f.posted[fmt.Sprintf("%s#%d", id, req.Turn)] = true
	}
	if s := f.sessions[id]; s != nil && req.Turn == s.ts.Turn {
		switch req.Kind {
		case session.ChatRefStatus:
			s.ts.StatusRef = req.Ref
		case session.ChatRefApprovalNotice:
			s.ts.ApprovalNoticed = req.Ref
		default:
			s.ts.FinalRef = req.Ref
		}
	}
	f.bumpLocked()
	f.mu.Unlock()
	if f.RecordFn != nil {
		return f.RecordFn(id, req)
	}
	return nil
}

// ClaimFinal implements chat.Sessions like the workflow: the first
// claimer of a turn is granted it, others are not, and nobody once that
// turn's final ref is recorded. It works for scripted sessions
// (TurnStateFn) too, keyed by session and turn.
func (f *Sessions) ClaimFinal(_ context.Context, id string, req session.ClaimFinalRequest) (session.ClaimFinalResponse, error) {
	f.record("claim_final " + req.Claimer)
	if f.ClaimFn != nil {
		return f.ClaimFn(id, req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := fmt.Sprintf("%s#%d", id, req.Turn)
	holder := f.claims[key]
	if f.posted[key] {
		return session.ClaimFinalResponse{Posted: true, Holder: holder}, nil
	}
	if holder != "" && holder != req.Claimer {
		return session.ClaimFinalResponse{Holder: holder}, nil
	}
	if f.claims == nil {
		f.claims = map[string]string{}
	}
	f.claims[key] = req.Claimer
	return session.ClaimFinalResponse{Granted: true}, nil
}

// ClaimWatch implements chat.Sessions: WatchFn's answer, or granted.
func (f *Sessions) ClaimWatch(_ context.Context, id string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
	if f.WatchFn != nil {
		return f.WatchFn(id, req)
	}
	return session.ClaimWatchResponse{Granted: !req.Release, Holder: req.Claimer}, nil
}

// Info implements chat.Sessions.
func (f *Sessions) Info(_ context.Context, id string) (session.Info, error) {
	f.record("info")
	if f.InfoFn != nil {
		return f.InfoFn(id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.sessionLocked(id)
	if err != nil {
		return session.Info{}, err
	}
	return session.Info{WorkflowID: id, Location: s.start.Location, Owner: s.start.Owner, Title: s.start.Title,
		Backend: s.ts.Backend, Turns: s.ts.Turn, Status: s.ts.Status}, nil
}

// History implements chat.Sessions (no transcript by default).
func (f *Sessions) History(_ context.Context, id string, req session.HistoryRequest) ([]session.HistoryEntry, error) {
	f.record("history")
	if f.HistoryFn != nil {
		return f.HistoryFn(id, req)
	}
	return nil, nil
}

// SharedFile implements chat.Sessions.
func (f *Sessions) SharedFile(_ context.Context, id string, req session.SharedFileRequest) (session.SharedFileData, error) {
	if f.SharedFileFn != nil {
		return f.SharedFileFn(id, req)
	}
	return session.SharedFileData{SharedFile: session.SharedFile{CallID: req.CallID}, Gone: true}, nil
}

// List implements chat.Sessions: the sessions started so far whose
// location and owner match fl.
func (f *Sessions) List(_ context.Context, fl chat.ListFilter) ([]chat.SessionSummary, error) {
	f.record("list")
	if f.ListFn != nil {
		return f.ListFn(fl)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []chat.SessionSummary
	for id, s := range f.sessions {
		loc := s.start.Location
		if (fl.Platform == "" || fl.Platform == loc.Platform) && (fl.Workspace == "" || fl.Workspace == loc.Workspace) &&
			(fl.Channel == "" || fl.Channel == loc.Channel) && (fl.Owner == "" || fl.Owner == s.start.Owner.ID) {
			out = append(out, chat.SessionSummary{WorkflowID: id, Location: loc, Running: true})
		}
	}
	slices.SortFunc(out, func(a, b chat.SessionSummary) int { return strings.Compare(a.WorkflowID, b.WorkflowID) })
	return out, nil
}
