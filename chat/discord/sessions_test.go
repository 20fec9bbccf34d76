package discord_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	fake "github.com/sandbot/sandbot/internal/fake/discord"
	"github.com/sandbot/sandbot/session"
)

// fakeSessions is an in-memory chat.Sessions: the session workflows as
// the core sees them, driven by the test through set. Send dedupes event
// IDs and Approve validates like the workflow's update validator, so the
// real chat.Core can run against it without Temporal.
type fakeSessions struct {
	mu            sync.Mutex
	changed       chan struct{} // closed and replaced on every change
	approverRoles []string
	sessions      map[string]*fsession
	sends         []session.MessageRequest
	approvals     []session.ApproveRequest
}

type fsession struct {
	start  session.SessionInput
	ts     session.TurnState
	events map[string]int
}

var _ chat.Sessions = (*fakeSessions)(nil)

func newFakeSessions(approverRoles ...string) *fakeSessions {
	return &fakeSessions{approverRoles: approverRoles, sessions: map[string]*fsession{}, changed: make(chan struct{})}
}

// bump wakes waiters; callers hold f.mu.
func (f *fakeSessions) bump() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitBoth blocks until cond holds, re-checking after every change of the
// Discord fake or of the sessions.
func waitBoth(t testing.TB, f *fake.Server, fs *fakeSessions, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		fch := f.Changed()
		fs.mu.Lock()
		sch := fs.changed
		fs.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-fch:
		case <-sch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// statusRef waits until the session id has recorded its status message.
func (f *fakeSessions) statusRef(t testing.TB, df *fake.Server, id string) string {
	t.Helper()
	var ref string
	waitBoth(t, df, f, "status message recorded", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if s := f.sessions[id]; s != nil {
			ref = s.ts.StatusRef
		}
		return ref != ""
	})
	return ref
}

// set changes a session's turn state as the workflow would, bumping its
// version.
func (f *fakeSessions) set(id string, change func(ts *session.TurnState)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[id]
	change(&s.ts)
	s.ts.Version++
	f.bump()
}

// decided returns the approvals the sessions accepted.
func (f *fakeSessions) decided() []session.ApproveRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]session.ApproveRequest(nil), f.approvals...)
}

func (f *fakeSessions) get(id string) session.TurnState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions[id].ts
}

func (f *fakeSessions) Send(_ context.Context, start session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := start.Location.ID()
	s := f.sessions[id]
	if s == nil {
		s = &fsession{start: start, events: map[string]int{}, ts: session.TurnState{Backend: "local"}}
		f.sessions[id] = s
	}
	if turn, ok := s.events[req.EventID]; ok {
		return session.MessageResponse{Turn: turn, Duplicate: true}, nil
	}
	f.sends = append(f.sends, req)
	s.ts = session.TurnState{Turn: s.ts.Turn + 1, Version: s.ts.Version + 1, Status: session.StatusThinking,
		Backend: "local", StartedAt: time.Now()}
	s.events[req.EventID] = s.ts.Turn
	f.bump()
	return session.MessageResponse{Turn: s.ts.Turn}, nil
}

func (f *fakeSessions) session(id string) (*fsession, error) {
	s := f.sessions[id]
	if s == nil {
		return nil, &chat.UserError{Msg: "There is no session in this thread.", Err: chat.ErrNoSession}
	}
	return s, nil
}

func (f *fakeSessions) TurnState(_ context.Context, id string) (session.TurnState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(id)
	if err != nil {
		return session.TurnState{}, err
	}
	return s.ts, nil
}

func (f *fakeSessions) Approve(_ context.Context, id string, req session.ApproveRequest) (session.ApproveResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(id)
	if err != nil {
		return session.ApproveResponse{}, err
	}
	p := s.ts.Pending
	if p == nil || p.CallID != req.CallID {
		return session.ApproveResponse{}, &chat.UserError{Msg: "This approval is no longer pending."}
	}
	allowed := req.User.ID == s.start.Owner.ID
	for _, r := range req.User.Roles {
		allowed = allowed || slices.Contains(f.approverRoles, r)
	}
	if !allowed {
		return session.ApproveResponse{}, &chat.UserError{Msg: "You may not approve commands in this session."}
	}
	f.approvals = append(f.approvals, req)
	for i := range s.ts.ToolCalls {
		c := &s.ts.ToolCalls[i]
		if c.CallID == req.CallID {
			c.Decision = &session.DecisionRecord{CallID: c.CallID, Command: p.Command, Decision: req.Decision, Reason: req.Reason, User: req.User, At: time.Now(), Turn: s.ts.Turn}
			c.Status = session.CallRunning
			if req.Decision == session.DecisionReject {
				c.Status = session.CallRejected
			}
		}
	}
	s.ts.Pending = nil
	s.ts.Status = session.StatusThinking
	s.ts.Version++
	f.bump()
	return session.ApproveResponse{Command: p.Command}, nil
}

func (f *fakeSessions) RecordChatRef(_ context.Context, id string, req session.ChatRefRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(id)
	if err != nil {
		return err
	}
	if req.Turn == s.ts.Turn {
		if req.Kind == "status" {
			s.ts.StatusRef = req.Ref
		} else {
			s.ts.FinalRef = req.Ref
		}
		f.bump()
	}
	return nil
}

func (f *fakeSessions) Info(_ context.Context, id string) (session.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(id)
	if err != nil {
		return session.Info{}, err
	}
	return session.Info{WorkflowID: id, Location: s.start.Location, Owner: s.start.Owner, Title: s.start.Title,
		Backend: s.ts.Backend, Turns: s.ts.Turn, Status: s.ts.Status}, nil
}

func (f *fakeSessions) List(_ context.Context, flt chat.ListFilter) ([]chat.SessionSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []chat.SessionSummary
	for id, s := range f.sessions {
		if flt.Platform == "" || s.start.Location.Platform == flt.Platform {
			out = append(out, chat.SessionSummary{WorkflowID: id, Location: s.start.Location, Running: true})
		}
	}
	return out, nil
}

func (f *fakeSessions) History(context.Context, string, session.HistoryRequest) ([]session.HistoryEntry, error) {
	return nil, nil
}

func (f *fakeSessions) Stop(_ context.Context, id string, _ session.StopRequest) (session.StopResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(id)
	if err != nil {
		return session.StopResponse{}, err
	}
	return session.StopResponse{Stopped: s.ts.Status.Active(), Turn: s.ts.Turn}, nil
}

func (f *fakeSessions) Pause(context.Context, string, session.PauseRequest) (session.PauseResponse, error) {
	return session.PauseResponse{}, nil
}

func (f *fakeSessions) Resume(context.Context, string, session.ResumeRequest) (session.PauseResponse, error) {
	return session.PauseResponse{}, nil
}

func (f *fakeSessions) Destroy(context.Context, string, session.DestroyRequest) (session.DestroyResponse, error) {
	return session.DestroyResponse{}, nil
}

func (f *fakeSessions) SetBackend(_ context.Context, _ string, req session.SetBackendRequest) (session.SetBackendResponse, error) {
	return session.SetBackendResponse{From: "local", To: req.Backend}, nil
}

func (f *fakeSessions) Fork(_ context.Context, _ string, req session.ForkRequest) (session.ForkResponse, error) {
	return session.ForkResponse{WorkflowID: req.Location.ID(), Backend: "local"}, nil
}
