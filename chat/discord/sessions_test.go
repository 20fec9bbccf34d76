package discord_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	fake "github.com/sandbot/sandbot/internal/fake/discord"
	"github.com/sandbot/sandbot/workflows"
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
	sends         []workflows.MessageRequest
	approvals     []workflows.ApproveRequest
}

type fsession struct {
	start  workflows.SessionInput
	ts     workflows.TurnState
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
func (f *fakeSessions) set(id string, change func(ts *workflows.TurnState)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[id]
	change(&s.ts)
	s.ts.Version++
	f.bump()
}

// decided returns the approvals the sessions accepted.
func (f *fakeSessions) decided() []workflows.ApproveRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]workflows.ApproveRequest(nil), f.approvals...)
}

func (f *fakeSessions) get(id string) workflows.TurnState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions[id].ts
}

func (f *fakeSessions) Send(_ context.Context, start workflows.SessionInput, req workflows.MessageRequest) (workflows.MessageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := start.Location.ID()
	s := f.sessions[id]
	if s == nil {
		s = &fsession{start: start, events: map[string]int{}, ts: workflows.TurnState{Backend: "local"}}
		f.sessions[id] = s
	}
	if turn, ok := s.events[req.EventID]; ok {
		return workflows.MessageResponse{Turn: turn, Duplicate: true}, nil
	}
	f.sends = append(f.sends, req)
	s.ts = workflows.TurnState{Turn: s.ts.Turn + 1, Version: s.ts.Version + 1, Status: workflows.StatusThinking,
		Backend: "local", StartedAt: time.Now()}
	s.events[req.EventID] = s.ts.Turn
	f.bump()
	return workflows.MessageResponse{Turn: s.ts.Turn}, nil
}

func (f *fakeSessions) session(id string) (*fsession, error) {
	s := f.sessions[id]
	if s == nil {
		return nil, &chat.UserError{Msg: "There is no session in this thread.", Err: chat.ErrNoSession}
	}
	return s, nil
}

func (f *fakeSessions) TurnState(_ context.Context, id string) (workflows.TurnState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(id)
	if err != nil {
		return workflows.TurnState{}, err
	}
	return s.ts, nil
}

func (f *fakeSessions) Approve(_ context.Context, id string, req workflows.ApproveRequest) (workflows.ApproveResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(id)
	if err != nil {
		return workflows.ApproveResponse{}, err
	}
	p := s.ts.Pending
	if p == nil || p.CallID != req.CallID {
		return workflows.ApproveResponse{}, &chat.UserError{Msg: "This approval is no longer pending."}
	}
	allowed := req.User.ID == s.start.Owner.ID
	for _, r := range req.User.Roles {
		allowed = allowed || slices.Contains(f.approverRoles, r)
	}
	if !allowed {
		return workflows.ApproveResponse{}, &chat.UserError{Msg: "You may not approve commands in this session."}
	}
	f.approvals = append(f.approvals, req)
	for i := range s.ts.ToolCalls {
		c := &s.ts.ToolCalls[i]
		if c.CallID == req.CallID {
			c.Decision = &workflows.DecisionRecord{CallID: c.CallID, Command: p.Command, Decision: req.Decision, Reason: req.Reason, User: req.User, At: time.Now(), Turn: s.ts.Turn}
			c.Status = workflows.CallRunning
			if req.Decision == workflows.DecisionReject {
				c.Status = workflows.CallRejected
			}
		}
	}
	s.ts.Pending = nil
	s.ts.Status = workflows.StatusThinking
	s.ts.Version++
	f.bump()
	return workflows.ApproveResponse{Command: p.Command}, nil
}

func (f *fakeSessions) RecordChatRef(_ context.Context, id string, req workflows.ChatRefRequest) error {
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

func (f *fakeSessions) Info(_ context.Context, id string) (workflows.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(id)
	if err != nil {
		return workflows.Info{}, err
	}
	return workflows.Info{WorkflowID: id, Location: s.start.Location, Owner: s.start.Owner, Title: s.start.Title,
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

func (f *fakeSessions) History(context.Context, string, workflows.HistoryRequest) ([]workflows.HistoryEntry, error) {
	return nil, nil
}

func (f *fakeSessions) Stop(_ context.Context, id string, _ workflows.StopRequest) (workflows.StopResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.session(id)
	if err != nil {
		return workflows.StopResponse{}, err
	}
	return workflows.StopResponse{Stopped: s.ts.Status.Active(), Turn: s.ts.Turn}, nil
}

func (f *fakeSessions) Pause(context.Context, string, workflows.PauseRequest) (workflows.PauseResponse, error) {
	return workflows.PauseResponse{}, nil
}

func (f *fakeSessions) Resume(context.Context, string, workflows.ResumeRequest) (workflows.PauseResponse, error) {
	return workflows.PauseResponse{}, nil
}

func (f *fakeSessions) Destroy(context.Context, string, workflows.DestroyRequest) (workflows.DestroyResponse, error) {
	return workflows.DestroyResponse{}, nil
}

func (f *fakeSessions) SetBackend(_ context.Context, _ string, req workflows.SetBackendRequest) (workflows.SetBackendResponse, error) {
	return workflows.SetBackendResponse{From: "local", To: req.Backend}, nil
}

func (f *fakeSessions) Fork(_ context.Context, _ string, req workflows.ForkRequest) (workflows.ForkResponse, error) {
	return workflows.ForkResponse{WorkflowID: req.Location.ID(), Backend: "local"}, nil
}
