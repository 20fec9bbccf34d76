package fakeslack

import (
	"encoding/json"
	"strings"
	"time"
)

// Streamed messages (chat.startStream, chat.appendStream, chat.stopStream),
// as docs.slack.dev documents them: markdown_text of at most 12,000
// characters a call; chunks of type markdown_text, task_update (merged by
// id, the newest status wins), plan_update and blocks; recipient_user_id
// and recipient_team_id required outside DMs; blocks and session_status on
// chat.stopStream. A streamed message is an ordinary bot message of the
// thread (Snapshot.BotMessages shows it, its Text the Markdown so far), so
// a test sees one answer, however it was posted.
//
// Rates as SDK tables give them: chat.startStream and chat.stopStream Tier
// 2, chat.appendStream Tier 4; more calls a minute are recorded as budget
// violations. An append to a stream that was stopped (by the bot, or by a
// user's native stop) is answered message_not_in_streaming_state.

// Stream budgets per workspace and minute.
const (
	StreamStartsPerMinute  = 20  // chat.startStream, chat.stopStream (Tier 2)
	StreamAppendsPerMinute = 100 // chat.appendStream (Tier 4)
	maxStreamMarkdown      = 12000
)

// Stream is a streamed message.
type Stream struct {
	Channel, TS, ThreadTS string
	Recipient, Team       string
	Markdown              string
	// Tasks are the task_update chunks by first appearance, each with its
	// newest fields.
	Tasks []Task
	// Streaming is false once stopped (State says how).
	Streaming bool
	// State is "streaming", "stopped" (chat.stopStream) or "halted" (a
	// user's native stop).
	State string
	// SessionStatus is chat.stopStream's session_status, if given.
	SessionStatus string
	// Appends counts chat.appendStream calls.
	Appends int
	// RawBlocks are the blocks chat.stopStream attached.
	RawBlocks string
}

// Task is a task_update chunk.
type Task struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Status  string `json:"status"`
	Details string `json:"details,omitempty"`
	Output  string `json:"output,omitempty"`
}

var taskStatuses = map[string]bool{"pending": true, "in_progress": true, "complete": true, "error": true}

func (s *Server) streamLocked(method string, req request, now time.Time) result {
	if method == "chat.appendStream" {
		s.tierLocked(method, StreamAppendsPerMinute, now)
	} else {
		s.tierLocked("chat.startStream+stopStream", StreamStartsPerMinute, now)
	}
	ch, md := req.form.Get("channel"), req.form.Get("markdown_text")
	if ch == "" {
		return errResult("channel_not_found")
	}
	if TextLen(md) > maxStreamMarkdown {
		return errResult("msg_too_long")
	}
	var chunks []map[string]any
	if raw := req.form.Get("chunks"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &chunks); err != nil {
			return errResultWith("invalid_chunks", []string{err.Error()})
		}
	}
	for _, c := range chunks {
		if c["type"] == "task_update" {
			if id, _ := c["id"].(string); id == "" {
				return errResultWith("invalid_chunks", []string{"task_update needs an id"})
			}
			if st, _ := c["status"].(string); st != "" && !taskStatuses[st] {
				return errResultWith("invalid_chunks", []string{"task_update status " + st})
			}
		}
	}
	if s.agent.streams == nil {
		s.agent.streams = map[string]*Stream{}
	}
	if method == "chat.startStream" {
		return s.startStreamLocked(req, ch, md, chunks, now)
	}
	ts := req.form.Get("ts")
	st := s.agent.streams[agentKey(ch, ts)]
	m := s.findLocked(ch, ts)
	if st == nil || m == nil {
		return errResult("message_not_found")
	}
	if !st.Streaming {
		return errResult("message_not_in_streaming_state")
	}
	if method == "chat.stopStream" {
		if raw := req.form.Get("blocks"); raw != "" {
			if errs := ValidateBlocks([]byte(raw)); len(errs) > 0 {
				return errResultWith("invalid_blocks", errs)
			}
			st.RawBlocks, m.RawBlocks = raw, raw
		}
		if ss := req.form.Get("session_status"); ss != "" {
			if !agentStatuses[ss] {
				return errResult("invalid_arguments")
			}
			st.SessionStatus = ss
			if as := s.agent.sessions[agentKey(ch, st.ThreadTS)]; as != nil {
				as.Status = ss
				as.History = append(as.History, ss)
			}
		}
	} else {
		st.Appends++
	}
	if TextLen(st.Markdown+md) > 40000 {
		return errResult("msg_too_long")
	}
	apply(st, md, chunks)
	m.Text, m.Updated = st.Markdown, now
	if method == "chat.stopStream" {
		st.Streaming, st.State = false, "stopped"
	}
	return okResult(map[string]any{"channel": ch, "ts": ts})
}

func (s *Server) startStreamLocked(req request, ch, md string, chunks []map[string]any, now time.Time) result {
	user, team := req.form.Get("recipient_user_id"), req.form.Get("recipient_team_id")
	if !strings.HasPrefix(ch, "D") && (user == "" || team == "") {
		return errResultWith("invalid_arguments", []string{"recipient_user_id and recipient_team_id are required when streaming to channels"})
	}
	th := req.form.Get("thread_ts")
	if th != "" && !s.threadExistsLocked(ch, th) {
		return errResult("invalid_thread_ts")
	}
	m := &Message{Channel: ch, TS: s.newTSLocked(), ThreadTS: th, User: s.opts.BotUserID, BotID: s.opts.BotID, Updated: now}
	st := &Stream{Channel: ch, TS: m.TS, ThreadTS: th, Recipient: user, Team: team, Streaming: true, State: "streaming"}
	apply(st, md, chunks)
	m.Text = st.Markdown
	s.addMessageLocked(m)
	s.agent.streams[agentKey(ch, m.TS)] = st
	if th != "" {
		s.clearStatusLocked(ch, th)
	}
	return okResult(map[string]any{"channel": ch, "ts": m.TS})
}

// apply adds a call's markdown_text and chunks to a stream.
func apply(st *Stream, md string, chunks []map[string]any) {
	st.Markdown += md
	for _, c := range chunks {
		switch c["type"] {
		case "markdown_text":
			t, _ := c["text"].(string)
			st.Markdown += t
		case "task_update":
			b, _ := json.Marshal(c)
			var t Task
			_ = json.Unmarshal(b, &t)
			i := -1
			for j := range st.Tasks {
				if st.Tasks[j].ID == t.ID {
					i = j
				}
			}
			if i < 0 {
				st.Tasks = append(st.Tasks, t)
				continue
			}
			old := &st.Tasks[i]
			if t.Title != "" {
				old.Title = t.Title
			}
			if t.Status != "" {
				old.Status = t.Status
			}
			if t.Details != "" {
				old.Details = t.Details
			}
			if t.Output != "" {
				old.Output = t.Output
			}
		}
	}
}

// haltStreamsLocked stops the bot's streams in a thread, as a user's
// native stop does, and returns their ts.
func (s *Server) haltStreamsLocked(channel, threadTS string) []string {
	halted := []string{}
	for _, st := range s.agent.streams {
		if st.Channel == channel && st.ThreadTS == threadTS && st.Streaming {
			st.Streaming, st.State = false, "halted"
			halted = append(halted, st.TS)
		}
	}
	return halted
}

// Streams returns the streamed messages of a thread, oldest first.
func (s *Server) Streams(channel, threadTS string) []Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Stream
	for _, m := range s.msgs[channel] {
		if st := s.agent.streams[agentKey(channel, m.TS)]; st != nil && st.ThreadTS == threadTS {
			c := *st
			c.Tasks = append([]Task(nil), st.Tasks...)
			out = append(out, c)
		}
	}
	return out
}
