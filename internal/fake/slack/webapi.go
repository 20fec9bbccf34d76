package fakeslack

import (
	"cmp"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// request is a decoded Web API request.
type request struct {
	form   url.Values
	body   []byte // JSON methods
	token  string
	bearer bool
}

// result is what a method answers.
type result struct {
	status     int
	retryAfter int
	fields     map[string]any
	err        string
}

func okResult(fields map[string]any) result { return result{status: 200, fields: fields} }

func errResult(code string) result { return result{status: 200, err: code} }

func errResultWith(code string, details []string) result {
	return result{status: 200, err: code, fields: map[string]any{
		"errors":            details,
		"response_metadata": map[string]any{"messages": prefixed("[ERROR] ", details)},
	}}
}

func prefixed(p string, in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = p + s
	}
	return out
}

func readRequest(r *http.Request) (request, error) {
	var req request
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") {
		req.token = strings.TrimPrefix(auth, "Bearer ")
		req.bearer = true
	}
	switch {
	case ct == "application/json":
		b, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
		if err != nil {
			return req, err
		}
		req.body = b
		req.form = r.URL.Query()
	default:
		if err := r.ParseForm(); err != nil {
			return req, err
		}
		req.form = r.Form
		if t := r.Form.Get("token"); t != "" && req.token == "" {
			req.token = t
		}
	}
	return req, nil
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	req, err := readRequest(r)
	if err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()

	s.mu.Lock()
	res := s.dispatchLocked(method, req, now)
	call := Call{
		Seq:    s.nextSeqLocked(),
		Method: method,
		Form:   withoutToken(req.form),
		Body:   json.RawMessage(req.body),
		Status: res.status,
		Error:  res.err,
		At:     now,
	}
	if raw := req.form.Get("blocks"); raw != "" {
		call.RawBlocks = raw
		_ = json.Unmarshal([]byte(raw), &call.Blocks)
	}
	body := res.encode()
	call.Response = body
	s.calls = append(s.calls, call)
	s.notifyLocked()
	var hold chan struct{}
	if q := s.holds[method]; len(q) > 0 {
		hold, s.holds[method] = q[0], q[1:]
	}
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}

	if res.retryAfter > 0 || res.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(res.retryAfter))
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(res.status)
	_, _ = w.Write(body)
}

func (r result) encode() []byte {
	if r.status != http.StatusOK {
		code := r.err
		if code == "" && r.status == http.StatusTooManyRequests {
			code = "ratelimited"
		} else if code == "" {
			code = "fatal_error"
		}
		b, _ := json.Marshal(map[string]any{"ok": false, "error": code})
		return b
	}
	out := map[string]any{"ok": r.err == ""}
	if r.err != "" {
		out["error"] = r.err
	}
	for k, v := range r.fields {
		out[k] = v
	}
	b, _ := json.Marshal(out)
	return b
}

func withoutToken(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		if k != "token" {
			out[k] = append([]string(nil), vs...)
		}
	}
	return out
}

// dispatchLocked authenticates, applies injected faults, and runs a method.
func (s *Server) dispatchLocked(method string, req request, now time.Time) result {
	if method == "apps.connections.open" {
		if !req.bearer || req.token == "" {
			return errResult("not_authed")
		}
		if req.token != s.opts.AppToken {
			return errResult("invalid_auth")
		}
	} else {
		if req.token == "" {
			return errResult("not_authed")
		}
		if req.token != s.opts.BotToken {
			return errResult("invalid_auth")
		}
	}
	if q := s.faults[method]; len(q) > 0 {
		f := q[0]
		s.faults[method] = q[1:]
		st := f.Status
		if st == 0 {
			st = http.StatusOK
		}
		return result{status: st, retryAfter: f.RetryAfter, err: f.Error}
	}
	switch method {
	case "auth.test":
		return okResult(map[string]any{
			"url": "https://" + s.opts.TeamDomain + ".slack.com/", "team": "Fake", "user": s.opts.BotName,
			"team_id": s.opts.TeamID, "user_id": s.opts.BotUserID, "bot_id": s.opts.BotID,
		})
	case "apps.connections.open":
		return okResult(map[string]any{"url": "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/link?ticket=" + s.newIDLocked("t")})
	case "chat.postMessage":
		return s.postMessageLocked(req, now)
	case "chat.update":
		return s.updateLocked(req, now)
	case "chat.delete":
		return s.deleteLocked(req, now)
	case "chat.postEphemeral":
		return s.postEphemeralLocked(req)
	case "chat.getPermalink":
		return s.permalinkLocked(req)
	case "views.open":
		return s.viewsOpenLocked(req, now)
	case "views.push":
		return s.viewsPushLocked(req, now)
	case "views.update":
		return s.viewsUpdateLocked(req)
	case "files.getUploadURLExternal":
		return s.uploadURLLocked(req)
	case "files.completeUploadExternal":
		return s.completeUploadLocked(req, now)
	case "conversations.replies":
		return s.repliesLocked(req)
	case "users.info":
		return s.usersInfoLocked(req)
	case "reactions.add":
		return s.reactLocked(req, true)
	case "reactions.remove":
		return s.reactLocked(req, false)
	}
	if r, ok := s.agentMethodLocked(method, req, now); ok {
		return r
	}
	return errResult("unknown_method")
}

// checkContent applies Slack's text and block limits.
func (s *Server) checkContent(form url.Values) result {
	text, blocks := form.Get("text"), form.Get("blocks")
	if text == "" && blocks == "" {
		return errResult("no_text")
	}
	if TextLen(text) > s.opts.TextLimit {
		return errResult("msg_too_long")
	}
	if blocks != "" {
		if errs := ValidateBlocks([]byte(blocks)); len(errs) > 0 {
			return errResultWith("invalid_blocks", errs)
		}
	}
	return result{}
}

func (s *Server) findLocked(channel, ts string) *Message {
	for _, m := range s.msgs[channel] {
		if m.TS == ts {
			return m
		}
	}
	return nil
}

func (s *Server) addMessageLocked(m *Message) {
	if m.Posted.IsZero() {
		m.Posted = m.Updated
	}
	ms := append(s.msgs[m.Channel], m)
	sort.SliceStable(ms, func(i, j int) bool { return tsLess(ms[i].TS, ms[j].TS) })
	s.msgs[m.Channel] = ms
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		if root := s.findLocked(m.Channel, m.ThreadTS); root != nil && root.ThreadTS == "" {
			root.ThreadTS = root.TS
		}
	}
}

// tsLess orders Slack timestamps ("seconds.micros") numerically.
func tsLess(a, b string) bool {
	split := func(ts string) (int64, int64) {
		sec, frac, _ := strings.Cut(ts, ".")
		s, _ := strconv.ParseInt(sec, 10, 64)
		f, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
		return s, f
	}
	as, af := split(a)
	bs, bf := split(b)
	if as != bs {
		return as < bs
	}
	if af != bf {
		return af < bf
	}
	return a < b
}

func (s *Server) postMessageLocked(req request, now time.Time) result {
	ch := req.form.Get("channel")
	if ch == "" {
		return errResult("channel_not_found")
	}
	if r := s.checkContent(req.form); r.err != "" {
		return r
	}
	m := &Message{
		Channel: ch, TS: s.newTSLocked(), ThreadTS: req.form.Get("thread_ts"),
		User: s.opts.BotUserID, BotID: s.opts.BotID,
		Text: req.form.Get("text"), RawBlocks: req.form.Get("blocks"), Updated: now,
	}
	s.addMessageLocked(m)
	if m.ThreadTS != "" {
		s.clearStatusLocked(ch, m.ThreadTS) // a reply clears the thread's status
	}
	return okResult(map[string]any{"channel": ch, "ts": m.TS, "message": s.messageJSON(m)})
}

func (s *Server) updateLocked(req request, now time.Time) result {
	ch, ts := req.form.Get("channel"), req.form.Get("ts")
	m := s.findLocked(ch, ts)
	if m == nil {
		return errResult("message_not_found")
	}
	if m.BotID != s.opts.BotID {
		return errResult("cant_update_message")
	}
	if r := s.budgetLocked(ch, ts, now); r.status != 0 {
		return r
	}
	if r := s.checkContent(req.form); r.err != "" {
		return r
	}
	m.Text = req.form.Get("text")
	m.RawBlocks = req.form.Get("blocks")
	m.Updates++
	m.Updated = now
	return okResult(map[string]any{"channel": ch, "ts": ts, "text": m.Text, "message": s.messageJSON(m)})
}

func (s *Server) postEphemeralLocked(req request) result {
	if req.form.Get("channel") == "" {
		return errResult("channel_not_found")
	}
	if req.form.Get("user") == "" {
		return errResult("user_not_in_channel")
	}
	if r := s.checkContent(req.form); r.err != "" {
		return r
	}
	return okResult(map[string]any{"message_ts": s.newTSLocked()})
}

func (s *Server) permalinkLocked(req request) result {
	ch, ts := req.form.Get("channel"), req.form.Get("message_ts")
	m := s.findLocked(ch, ts)
	if m == nil {
		return errResult("message_not_found")
	}
	link := "https://" + s.opts.TeamDomain + ".slack.com/archives/" + ch + "/p" + strings.ReplaceAll(ts, ".", "")
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		link += "?thread_ts=" + m.ThreadTS + "&cid=" + ch
	}
	return okResult(map[string]any{"channel": ch, "permalink": link})
}

func (s *Server) repliesLocked(req request) result {
	ch, ts := req.form.Get("channel"), req.form.Get("ts")
	root := s.findLocked(ch, ts)
	if root == nil {
		return errResult("thread_not_found")
	}
	limit, _ := strconv.Atoi(req.form.Get("limit"))
	if limit <= 0 {
		limit = 1000
	}
	// oldest: only replies after it, latest: only replies before it (at
	// them too with inclusive), as Slack does; the thread's root message
	// always comes first.
	oldest, latest := req.form.Get("oldest"), req.form.Get("latest")
	inclusive := req.form.Get("inclusive") == "true" || req.form.Get("inclusive") == "1"
	msgs := []any{}
	for _, m := range s.msgs[ch] {
		if m.TS != ts && oldest != "" {
			if c := compareTS(m.TS, oldest); c < 0 || (c == 0 && !inclusive) {
				continue
			}
		}
		if m.TS != ts && latest != "" {
			if c := compareTS(m.TS, latest); c > 0 || (c == 0 && !inclusive) {
				continue
			}
		}
		if m.TS == ts || m.ThreadTS == ts {
			if len(msgs) == limit {
				break
			}
			msgs = append(msgs, s.messageJSON(m))
		}
	}
	return okResult(map[string]any{"messages": msgs, "has_more": false, "response_metadata": map[string]any{"next_cursor": ""}})
}

// compareTS orders two message timestamps ("seconds.micros"), -1, 0 or 1.
func compareTS(a, b string) int {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	ai, _ := strconv.ParseInt(as, 10, 64)
	bi, _ := strconv.ParseInt(bs, 10, 64)
	if c := cmp.Compare(ai, bi); c != 0 {
		return c
	}
	af += strings.Repeat("0", max(0, 6-len(af)))
	bf += strings.Repeat("0", max(0, 6-len(bf)))
	return cmp.Compare(af, bf)
}

func (s *Server) messageJSON(m *Message) map[string]any {
	out := map[string]any{"type": "message", "text": m.Text, "ts": m.TS}
	if m.User != "" {
		out["user"] = m.User
	}
	if m.BotID != "" {
		out["bot_id"] = m.BotID
		out["app_id"] = s.opts.AppID
	}
	if m.SubType != "" {
		out["subtype"] = m.SubType
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if m.RawBlocks != "" {
		out["blocks"] = json.RawMessage(m.RawBlocks)
	}
	if m.Updates > 0 {
		out["edited"] = map[string]any{"user": m.User, "ts": s.newTSLocked()}
	}
	if len(m.Files) > 0 {
		files := make([]any, len(m.Files))
		for i, id := range m.Files {
			files[i] = map[string]any{"id": id}
		}
		out["files"] = files
	}
	return out
}

// reactLocked is reactions.add and reactions.remove on a message: Slack
// answers message_not_found, already_reacted, no_reaction and invalid_name
// as these do.
func (s *Server) reactLocked(req request, add bool) result {
	ch, ts, name := req.form.Get("channel"), req.form.Get("timestamp"), req.form.Get("name")
	if ch == "" || ts == "" {
		return errResult("no_item_specified")
	}
	if name == "" || strings.ContainsAny(name, ": ") {
		return errResult("invalid_name")
	}
	m := s.findLocked(ch, ts)
	if m == nil {
		return errResult("message_not_found")
	}
	i := slices.Index(m.Reactions, name)
	switch {
	case add && i >= 0:
		return errResult("already_reacted")
	case add:
		m.Reactions = append(m.Reactions, name)
	case i < 0:
		return errResult("no_reaction")
	default:
		m.Reactions = slices.Delete(m.Reactions, i, i+1)
	}
	return okResult(map[string]any{})
}
