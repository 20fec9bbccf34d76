package fakeslack

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Slack's agent surfaces: the assistant thread status
// (assistant.threads.setStatus), agent sessions with the native stop
// button (agents.sessions.setStatus, the agent_session_stopped event) and
// streamed messages (stream.go).
//
// What the fake does as Slack documents it (docs.slack.dev, methods
// assistant.threads.setStatus, agents.sessions.setStatus, event
// agent_session_stopped):
//   - a thread status needs channel_id and thread_ts, and an empty status
//     clears it; a message the bot sends into the thread clears it too;
//   - agent sessions exist only for apps declared as agents
//     (Options.AgentApp); the call creates the session, status must be
//     active, processing, suspended or closed, and title and
//     initiator_user_id count only when it creates it;
//   - the stop button is shown only while a session is processing, and a
//     click changes nothing by itself: the app must move the session on.
//
// What Slack does not document, and the fake chooses: a non-agent app's
// agents.sessions.setStatus is answered not_allowed; a status for a
// thread that does not exist, invalid_thread_ts; a bad argument,
// invalid_arguments. Neither method is given a number by Slack for its
// rate ("special" for the status, Tier 3 for sessions in SDK tables), so
// the fake records, as budget violations, more than AgentCallsPerMinute
// calls of either in a minute.

// AgentCallsPerMinute is the per-method, per-workspace budget the fake
// checks for assistant.threads.setStatus and agents.sessions.setStatus
// (Tier 3).
const AgentCallsPerMinute = 50

// AgentSession is an agent session as Slack keeps it.
type AgentSession struct {
	Channel, ThreadTS string
	Status            string
	Title, Initiator  string
	// History is every status set, in order.
	History []string
}

// ThreadStatus is an assistant thread status as Slack shows it.
type ThreadStatus struct {
	Status          string
	LoadingMessages string
	// History is every status set, in order, "" for a clear (also the
	// clear a bot message causes).
	History []string
}

// agentState is the fake's agent-surface state; the zero value is empty.
type agentState struct {
	status   map[string]*ThreadStatus // channel/thread_ts
	sessions map[string]*AgentSession // channel/thread_ts
	streams  map[string]*Stream       // channel/ts of the streamed message
	windows  map[string][]time.Time   // method → calls in the last minute
}

func agentKey(channel, threadTS string) string { return channel + "/" + threadTS }

// agentMethodLocked serves the agent-surface methods; ok is false for any
// other method.
func (s *Server) agentMethodLocked(method string, req request, now time.Time) (result, bool) {
	switch method {
	case "assistant.threads.setStatus":
		if r, limited := s.tierLocked(method, AgentCallsPerMinute, now); limited {
			return r, true
		}
		return s.setThreadStatusLocked(req), true
	case "agents.sessions.setStatus":
		if r, limited := s.tierLocked(method, AgentCallsPerMinute, now); limited {
			return r, true
		}
		return s.setAgentStatusLocked(req), true
	case "chat.startStream", "chat.appendStream", "chat.stopStream":
		return s.streamLocked(method, req, now), true
	}
	return result{}, false
}

// tierLocked records a violation when method was called more than
// perMinute times in the last minute (workspace-wide). With
// Options.RateLimitOverBudget it answers 429 instead, as Slack does (the
// refused call does not count): limited is then true and r the answer.
func (s *Server) tierLocked(method string, perMinute int, now time.Time) (r result, limited bool) {
	if s.agent.windows == nil {
		s.agent.windows = map[string][]time.Time{}
	}
	cut := now.Add(-time.Minute)
	keep := s.agent.windows[method][:0]
	for _, t := range s.agent.windows[method] {
		if t.After(cut) {
			keep = append(keep, t)
		}
	}
	if len(keep) >= perMinute && s.opts.RateLimitOverBudget {
		s.agent.windows[method] = keep
		wait := keep[0].Add(time.Minute).Sub(now)
		return result{status: http.StatusTooManyRequests, retryAfter: int(wait/time.Second) + 1}, true
	}
	keep = append(keep, now)
	s.agent.windows[method] = keep
	if len(keep) > perMinute {
		s.viols = append(s.viols, Violation{
			Kind: "per_minute", At: now,
			Detail: fmt.Sprintf("%d %s calls within one minute (budget %d)", len(keep), method, perMinute),
		})
	}
	return result{}, false
}

// threadExistsLocked reports whether channel has a message threadTS (the
// root of the thread a status or session is for).
func (s *Server) threadExistsLocked(channel, threadTS string) bool {
	return s.findLocked(channel, threadTS) != nil
}

func (s *Server) setThreadStatusLocked(req request) result {
	ch, th := req.form.Get("channel_id"), req.form.Get("thread_ts")
	switch {
	case ch == "":
		return errResult("channel_not_found")
	case th == "" || !s.threadExistsLocked(ch, th):
		return errResult("invalid_thread_ts")
	case !req.form.Has("status"):
		return errResult("invalid_arguments")
	}
	if s.agent.status == nil {
		s.agent.status = map[string]*ThreadStatus{}
	}
	st := s.agent.status[agentKey(ch, th)]
	if st == nil {
		st = &ThreadStatus{}
		s.agent.status[agentKey(ch, th)] = st
	}
	st.Status, st.LoadingMessages = req.form.Get("status"), req.form.Get("loading_messages")
	st.History = append(st.History, st.Status)
	return okResult(map[string]any{})
}

// clearStatusLocked is Slack removing a thread's status when the bot
// sends a message into the thread.
func (s *Server) clearStatusLocked(channel, threadTS string) {
	if st := s.agent.status[agentKey(channel, threadTS)]; st != nil && st.Status != "" {
		st.Status = ""
		st.History = append(st.History, "")
	}
}

var agentStatuses = map[string]bool{"active": true, "processing": true, "suspended": true, "closed": true}

func (s *Server) setAgentStatusLocked(req request) result {
	if !s.opts.AgentApp {
		return errResult("not_allowed")
	}
	ch, th, status := req.form.Get("channel_id"), req.form.Get("thread_ts"), req.form.Get("status")
	switch {
	case !agentStatuses[status]:
		return errResult("invalid_arguments")
	case ch == "":
		return errResult("channel_not_found")
	case th == "" || !s.threadExistsLocked(ch, th):
		return errResult("invalid_thread_ts")
	case len([]rune(req.form.Get("title"))) > 200:
		return errResult("invalid_arguments")
	}
	if s.agent.sessions == nil {
		s.agent.sessions = map[string]*AgentSession{}
	}
	as := s.agent.sessions[agentKey(ch, th)]
	if as == nil {
		as = &AgentSession{Channel: ch, ThreadTS: th, Title: req.form.Get("title"), Initiator: req.form.Get("initiator_user_id")}
		s.agent.sessions[agentKey(ch, th)] = as
	}
	as.Status = status
	as.History = append(as.History, status)
	out := map[string]any{"status": status, "agent_status": status}
	if as.Title != "" {
		out["title"] = as.Title
	}
	return okResult(out)
}

// ThreadStatus returns the assistant status of a thread, if one was ever
// set.
func (s *Server) ThreadStatus(channel, threadTS string) (ThreadStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.agent.status[agentKey(channel, threadTS)]
	if st == nil {
		return ThreadStatus{}, false
	}
	out := *st
	out.History = append([]string(nil), st.History...)
	return out, true
}

// AgentSession returns the agent session of a thread, if there is one.
func (s *Server) AgentSession(channel, threadTS string) (AgentSession, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	as := s.agent.sessions[agentKey(channel, threadTS)]
	if as == nil {
		return AgentSession{}, false
	}
	out := *as
	out.History = append([]string(nil), as.History...)
	return out, true
}

// ClickNativeStop is a user clicking the stop button Slack shows on a
// processing agent session: the agent_session_stopped event goes out over
// Socket Mode (its envelope ID is returned). Slack shows no button on a
// session that is not processing, so that is an error. streams are the
// bot's streams Slack halted (their ts).
func (s *Server) ClickNativeStop(ctx context.Context, user, channel, threadTS string) (string, error) {
	p, err := s.NativeStopPayload(user, channel, threadTS)
	if err != nil {
		return "", err
	}
	return s.SendEvent(ctx, p)
}

// NativeStopPayload is the event_callback of a click on a processing
// session's stop button (see ClickNativeStop); the click halts the bot's
// streams in the thread that are still streaming, as Slack does.
func (s *Server) NativeStopPayload(user, channel, threadTS string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	as := s.agent.sessions[agentKey(channel, threadTS)]
	if as == nil || as.Status != "processing" {
		st := "none"
		if as != nil {
			st = as.Status
		}
		return nil, fmt.Errorf("fakeslack: no stop button in %s/%s: the agent session is %s, not processing", channel, threadTS, st)
	}
	halted := s.haltStreamsLocked(channel, threadTS)
	evTS := s.newTSLocked()
	_, p := s.eventCallbackLocked(map[string]any{
		"type": "agent_session_stopped", "channel": channel, "thread_ts": threadTS,
		"user": user, "streaming_message_ts": halted, "event_ts": evTS,
	})
	s.notifyLocked()
	return p, nil
}
