package chat

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sandbot/sandbot/chat/internal/lru"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/session"
)

// MeterSessions returns s with sandbot's turn metrics counted from what
// passes through it (the bot counts what its watchers see, so workflow
// code stays free of metrics):
//
//   - turns by outcome and tool calls by final status, from the turn states
//     read while this replica holds the session's watch lease (or the
//     session keeps none), so of several replicas only the one rendering a
//     turn counts it; a turn counts only if this replica saw it running or
//     sent the message that asked for it, so a restart does not count old
//     turns again;
//   - approvals by decision with the time from the request to the
//     decision, when the session accepts one; expired approvals when a
//     call's recorded decision says so.
//
// A turn that ends and is followed by the next between two polls is not
// seen ended and not counted. The result is safe for concurrent use.
func MeterSessions(s Sessions) Sessions {
	return &meteredSessions{Sessions: s, seen: lru.New[string, *meterState](meterSessions)}
}

// meterSessions bounds how many sessions the meter remembers.
const meterSessions = 10000

type meteredSessions struct {
	Sessions
	mu   sync.Mutex
	seen *lru.Cache[string, *meterState]
}

// meterState is what the meter knows of one session.
type meterState struct {
	// held: this replica holds the watch lease (or the session has none).
	held bool
	// expectFrom is the lowest turn a message sent here asked for (0:
	// none); turns from it on are this replica's to count.
	expectFrom int
	// last is the latest turn state read, counted once the lease is held.
	last *session.TurnState
	// turn is the turn number the fields below describe.
	turn      int
	sawActive bool
	ended     bool
	calls     map[string]bool // final calls counted
	pending   *session.PendingApproval
}

// stateLocked returns id's state, creating it.
func (m *meteredSessions) stateLocked(id string) *meterState {
	st, ok := m.seen.Get(id)
	if !ok {
		st = &meterState{}
		m.seen.Put(id, st)
	}
	return st
}

func (m *meteredSessions) Send(ctx context.Context, start session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
	resp, err := m.Sessions.Send(ctx, start, req)
	if err != nil {
		return resp, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.stateLocked(start.Location.ID())
	if !resp.Duplicate && resp.Turn > 0 && (st.expectFrom == 0 || resp.Turn < st.expectFrom) {
		st.expectFrom = resp.Turn
	}
	if resp.Watch != nil {
		// The lease came with the message: the watcher will not claim it
		// (see ClaimWatch below).
		claimer := ""
		if req.Watch != nil {
			claimer = req.Watch.Claimer
		}
		st.held = resp.Watch.GrantedTo(claimer)
		if st.held {
			st.count()
		}
	}
	return resp, err
}

func (m *meteredSessions) TurnState(ctx context.Context, id string) (session.TurnState, error) {
	ts, err := m.Sessions.TurnState(ctx, id)
	if err == nil {
		m.mu.Lock()
		st := m.stateLocked(id)
		if ts.Pending != nil {
			p := *ts.Pending
			st.pending = &p
		}
		st.last = &ts
		if st.held {
			st.count()
		}
		m.mu.Unlock()
	}
	return ts, err
}

func (m *meteredSessions) ClaimWatch(ctx context.Context, id string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
	res, err := m.Sessions.ClaimWatch(ctx, id, req)
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.stateLocked(id)
	switch {
	case errors.Is(err, ErrNoWatchLease):
		st.held = true
	case err != nil:
		return res, err // unknown: keep what was known
	case req.Release:
		st.held = false
	default:
		st.held = res.Granted
	}
	if st.held {
		// The state read just before the claim is the first this replica
		// may count.
		st.count()
	}
	return res, err
}

func (m *meteredSessions) Approve(ctx context.Context, id string, req session.ApproveRequest) (session.ApproveResponse, error) {
	asked := m.askedAt(id, req.CallID)
	if asked.IsZero() {
		// Nobody here watched the request come in: read it.
		if ts, err := m.Sessions.TurnState(ctx, id); err == nil && ts.Pending != nil && ts.Pending.CallID == req.CallID {
			asked = ts.Pending.AskedAt
		}
	}
	resp, err := m.Sessions.Approve(ctx, id, req)
	if err == nil {
		var waited time.Duration
		if !asked.IsZero() {
			waited = time.Since(asked)
		}
		metrics.ApprovalDecided(string(req.Decision), waited)
	}
	return resp, err
}

// askedAt is when the pending approval of callID was asked for, if the
// meter saw it.
func (m *meteredSessions) askedAt(id, callID string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st, ok := m.seen.Get(id); ok && st.pending != nil && st.pending.CallID == callID {
		return st.pending.AskedAt
	}
	return time.Time{}
}

// count counts what st.last shows that was not counted yet: calls that
// reached a final status and the turn's end, if the turn is this
// replica's (seen running, or asked for by a message sent here).
func (st *meterState) count() {
	ts := st.last
	if ts == nil || ts.Turn == 0 {
		return
	}
	if ts.Turn != st.turn {
		st.turn, st.sawActive, st.ended, st.calls = ts.Turn, false, false, map[string]bool{}
	}
	if ts.Status.Active() {
		st.sawActive = true
	}
	if !st.sawActive && (st.expectFrom == 0 || ts.Turn < st.expectFrom) {
		return
	}
	for _, c := range ts.ToolCalls {
		switch c.Status {
		case session.CallCompleted, session.CallRejected, session.CallFailed:
		default:
			continue
		}
		if st.calls[c.CallID] {
			continue
		}
		st.calls[c.CallID] = true
		metrics.ToolCallEnded(string(c.Status))
		if c.Decision != nil && c.Decision.Expired {
			metrics.ApprovalDecided("expired", 0)
		}
	}
	if !st.ended && (ts.Status == session.StatusComplete || ts.Status == session.StatusFailed) {
		st.ended = true
		switch {
		case ts.Stopped:
			metrics.TurnEnded(metrics.TurnStopped)
		case ts.Status == session.StatusFailed:
			metrics.TurnEnded(metrics.TurnFailed)
		default:
			metrics.TurnEnded(metrics.TurnComplete)
		}
	}
}
