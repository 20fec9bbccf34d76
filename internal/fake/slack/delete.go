package fakeslack

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// DefaultDeletesPerMinute is the workspace's chat.delete budget unless
// Options.DeletesPerMinute says otherwise: Slack's Tier 3, about 50 a
// minute.
const DefaultDeletesPerMinute = 50

// param is a request parameter, from the form (or query) or, for a JSON
// body, its top-level string field: Slack accepts chat.delete either way.
func (req request) param(name string) string {
	if v := req.form.Get(name); v != "" {
		return v
	}
	if len(req.body) > 0 {
		var fields map[string]any
		if json.Unmarshal(req.body, &fields) == nil {
			if v, ok := fields[name].(string); ok {
				return v
			}
		}
	}
	return ""
}

// deleteLocked is chat.delete: a bot token deletes the bot's own messages
// (another's answers cant_delete_message; one that is gone, or never was,
// message_not_found). A deleted reply leaves the thread as Slack shows it
// (conversations.replies, Snapshot.Messages no longer list it); a thread's
// parent with replies stays as Slack's tombstone ("This message was
// deleted.", subtype tombstone). Either way the message, as it was when
// deleted, goes to Snapshot.Deleted with its Deleted time, so a check can
// tell a message deleted at once from one that was read for minutes.
// Calls beyond Options.DeletesPerMinute in a minute are violations (Tier 3),
// or 429s with RateLimitOverBudget.
func (s *Server) deleteLocked(req request, now time.Time) result {
	ch, ts := req.param("channel"), req.param("ts")
	if ch == "" {
		return errResult("channel_not_found")
	}
	m := s.findLocked(ch, ts)
	if m == nil || m.SubType == "tombstone" {
		return errResult("message_not_found")
	}
	if m.BotID != s.opts.BotID {
		return errResult("cant_delete_message")
	}
	if r := s.deleteBudgetLocked(ch, ts, now); r.status != 0 {
		return r
	}
	gone := *m
	gone.Reactions = slices.Clone(m.Reactions)
	gone.Deleted = now
	s.deleted[ch] = append(s.deleted[ch], &gone)
	hasReplies := false
	for _, r := range s.msgs[ch] {
		if r.ThreadTS == m.TS && r.TS != m.TS {
			hasReplies = true
			break
		}
	}
	if hasReplies {
		*m = Message{Channel: ch, TS: ts, ThreadTS: m.ThreadTS, SubType: "tombstone", Text: "This message was deleted.", Posted: m.Posted, Updated: now}
	} else {
		s.msgs[ch] = slices.DeleteFunc(s.msgs[ch], func(x *Message) bool { return x == m })
	}
	return okResult(map[string]any{"channel": ch, "ts": ts})
}

// deleteBudgetLocked accounts one chat.delete against the workspace's
// per-minute budget; a zero result means it may proceed.
func (s *Server) deleteBudgetLocked(channel, ts string, now time.Time) result {
	return s.perMinuteLocked(&s.deletes, "chat.delete", s.opts.DeletesPerMinute, channel, ts, now)
}

// perMinuteLocked accounts one call of method against a workspace budget
// of calls a minute, whose recent calls are *window. Over budget it
// answers 429 (RateLimitOverBudget) or records a violation and lets the
// call through; a zero result means the call may proceed.
func (s *Server) perMinuteLocked(window *[]time.Time, method string, budget int, channel, ts string, now time.Time) result {
	cut := now.Add(-time.Minute)
	*window = slices.DeleteFunc(*window, func(t time.Time) bool { return !t.After(cut) })
	if len(*window) >= budget {
		if s.opts.RateLimitOverBudget {
			wait := (*window)[0].Add(time.Minute).Sub(now)
			return result{status: http.StatusTooManyRequests, retryAfter: int(wait/time.Second) + 1}
		}
		s.viols = append(s.viols, Violation{
			Kind: "per_minute", Channel: channel, TS: ts, At: now,
			Detail: fmt.Sprintf("%d %s calls within one minute (budget %d)", len(*window)+1, method, budget),
		})
	}
	*window = append(*window, now)
	return result{}
}
