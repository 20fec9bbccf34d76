package fakediscord

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
)

func (s *Server) handleGetChannel(w http.ResponseWriter, r *http.Request, _ *request) {
	s.mu.Lock()
	c, ok := s.channels[r.PathValue("channel")]
	var wire map[string]any
	if ok {
		wire = c.wire()
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, CodeUnknownChannel, "Unknown Channel", nil)
		return
	}
	writeJSON(w, http.StatusOK, wire)
}

// handleEditChannel renames a channel or thread (PATCH /channels/{id} with
// {"name"}): only threads the bot created may be renamed without Manage
// Threads, which the bot does not ask for; names are 1 to 100 characters.
func (s *Server) handleEditChannel(w http.ResponseWriter, r *http.Request, req *request) {
	var body struct {
		Name *string `json:"name"`
	}
	if err := json.Unmarshal(req.JSON, &body); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body", nil)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[r.PathValue("channel")]
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, CodeUnknownChannel, "Unknown Channel", nil)
		return
	case c.ParentID == "" || c.OwnerID != s.opts.AppID:
		writeError(w, http.StatusForbidden, 50013, "Missing Permissions", nil)
		return
	case body.Name == nil || len([]rune(*body.Name)) < 1 || len([]rune(*body.Name)) > 100:
		writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body", map[string]any{"name": map[string]any{"_errors": []map[string]string{{"code": "BASE_TYPE_BAD_LENGTH", "message": "Must be between 1 and 100 in length."}}}})
		return
	}
	c.Name = *body.Name
	writeJSON(w, http.StatusOK, c.wire())
}

func (s *Server) handleCreateMessage(w http.ResponseWriter, r *http.Request, req *request) {
	p, err := decodePayload(req.JSON)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body", nil)
		return
	}
	fe := formErrors{}
	checkMessage(p, fe)
	if fe.write(w) {
		return
	}
	if isEmpty(p, len(req.Files)) {
		writeError(w, http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message", nil)
		return
	}
	s.mu.Lock()
	c, ok := s.channels[r.PathValue("channel")]
	if !ok {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, CodeUnknownChannel, "Unknown Channel", nil)
		return
	}
	m := &Message{ID: s.newID(), ChannelID: c.ID, GuildID: c.GuildID, Author: s.BotUser(), Created: time.Now()}
	applyPayload(m, p)
	m.Pinged = pinged(m.Content, p)
	m.Flags &^= FlagEphemeral // only interaction responses can be ephemeral
	s.addFiles(m, req.Files)
	s.storeMessage(m)
	wire := m.wire()
	s.mu.Unlock()
	s.gw.dispatchMessage("MESSAGE_CREATE", wire, c, true)
	writeJSON(w, http.StatusOK, wire)
}

// applyPayload applies present fields of p to m.
func applyPayload(m *Message, p payload) {
	if p.Content != nil {
		m.Content = *p.Content
	}
	if p.Components != nil {
		m.Components = append(json.RawMessage(nil), *p.Components...)
	}
	if p.Embeds != nil {
		m.Embeds = append(json.RawMessage(nil), *p.Embeds...)
	}
	if p.Flags != nil {
		m.Flags = *p.Flags
	}
}

// keepAttachments drops attachments not listed in an edit's "attachments"
// array, which is how Discord removes files from a message.
func keepAttachments(m *Message, p payload) {
	if p.Attachments == nil {
		return
	}
	var keep []struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(*p.Attachments, &keep)
	ids := map[string]bool{}
	for _, k := range keep {
		ids[k.ID] = true
	}
	var out []Attachment
	for _, a := range m.Attachments {
		if ids[a.ID] {
			out = append(out, a)
		}
	}
	m.Attachments = out
}

// addFiles attaches uploaded files. Callers hold s.mu.
func (s *Server) addFiles(m *Message, files []File) {
	for _, f := range files {
		m.Attachments = append(m.Attachments, Attachment{ID: s.newID(), Filename: f.Name, ContentType: f.ContentType, Data: f.Data})
	}
}

// storeMessage adds a new message. Callers hold s.mu.
func (s *Server) storeMessage(m *Message) {
	s.messages[m.ID] = m
	s.order = append(s.order, m.ID)
	s.byChannel[m.ChannelID] = append(s.byChannel[m.ChannelID], m.ID)
	s.bump()
}

// handleListMessages is GET /channels/{id}/messages?before=ID&limit=N (or
// after=ID) as Discord answers it: limit 1 to 100 (default 50), ephemeral
// and deleted ones left out, newest first. With before, the newest
// messages older than ID; with after, the oldest messages newer than ID
// (the page right after it), still sorted newest first.
func (s *Server) handleListMessages(w http.ResponseWriter, r *http.Request, _ *request) {
	limit := 50
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body", map[string]any{"limit": map[string]any{"_errors": []map[string]string{{"code": "NUMBER_TYPE_MAX", "message": "int value should be less than or equal to 100."}}}})
			return
		}
		limit = n
	}
	before := r.URL.Query().Get("before")
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := r.PathValue("channel")
	if _, ok := s.channels[ch]; !ok {
		writeError(w, http.StatusNotFound, CodeUnknownChannel, "Unknown Channel", nil)
		return
	}
	listed := func(m *Message) bool { return m.ChannelID == ch && !m.Deleted && !m.Ephemeral() }
	out := []map[string]any{}
	if after := r.URL.Query().Get("after"); after != "" && before == "" {
		for _, id := range s.order {
			if len(out) == limit {
				break
			}
			if m := s.messages[id]; listed(m) && snowflakeBefore(after, m.ID) {
				out = append(out, m.wire())
			}
		}
		slices.Reverse(out)
		writeJSON(w, http.StatusOK, out)
		return
	}
	for i := len(s.order) - 1; i >= 0 && len(out) < limit; i-- {
		m := s.messages[s.order[i]]
		if !listed(m) {
			continue
		}
		if before != "" && !snowflakeBefore(m.ID, before) {
			continue
		}
		out = append(out, m.wire())
	}
	writeJSON(w, http.StatusOK, out)
}

// snowflakeBefore reports whether snowflake a is older than b.
func snowflakeBefore(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

func (s *Server) handleGetMessage(w http.ResponseWriter, r *http.Request, _ *request) {
	s.mu.Lock()
	m, ok := s.messages[r.PathValue("message")]
	var wire map[string]any
	if ok && m.ChannelID == r.PathValue("channel") && !m.Deleted && !m.Ephemeral() {
		wire = m.wire()
	}
	s.mu.Unlock()
	if wire == nil {
		writeError(w, http.StatusNotFound, CodeUnknownMessage, "Unknown Message", nil)
		return
	}
	writeJSON(w, http.StatusOK, wire)
}

func (s *Server) handleEditMessage(w http.ResponseWriter, r *http.Request, req *request) {
	p, err := decodePayload(req.JSON)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body", nil)
		return
	}
	fe := formErrors{}
	checkMessage(p, fe)
	if fe.write(w) {
		return
	}
	s.mu.Lock()
	c, cok := s.channels[r.PathValue("channel")]
	m, ok := s.messages[r.PathValue("message")]
	switch {
	case !cok:
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, CodeUnknownChannel, "Unknown Channel", nil)
		return
	case !ok || m.ChannelID != c.ID || m.Deleted || m.Ephemeral():
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, CodeUnknownMessage, "Unknown Message", nil)
		return
	case m.Author.ID != s.opts.AppID || m.Webhook != "":
		s.mu.Unlock()
		writeError(w, http.StatusForbidden, CodeCannotEditOthers, "Cannot edit a message authored by another user", nil)
		return
	}
	wire, ok := s.editLocked(w, m, p, req.Files, "channel")
	s.mu.Unlock()
	if !ok {
		return
	}
	s.gw.dispatchMessage("MESSAGE_UPDATE", wire, c, false)
	writeJSON(w, http.StatusOK, wire)
}

// editLocked applies an edit, records it and returns the new wire form.
// It answers 400 itself (and returns false) if the result would be empty.
// Callers hold s.mu.
func (s *Server) editLocked(w http.ResponseWriter, m *Message, p payload, files []File, via string) (map[string]any, bool) {
	next := m.clone()
	applyPayload(&next, p)
	keepAttachments(&next, p)
	s.addFiles(&next, files)
	np := payload{Content: &next.Content}
	if len(next.Embeds) > 0 {
		np.Embeds = &next.Embeds
	}
	if len(next.Components) > 0 {
		np.Components = &next.Components
	}
	if isEmpty(np, len(next.Attachments)) {
		writeError(w, http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message", nil)
		return nil, false
	}
	next.Edited = time.Now()
	*m = next
	s.edits = append(s.edits, Edit{At: next.Edited, ChannelID: m.ChannelID, MessageID: m.ID, Content: m.Content,
		Components: rawOrEmpty(m.Components), Embeds: rawOrEmpty(m.Embeds), Via: via})
	s.bump()
	return m.wire(), true
}

func (s *Server) handleDeleteMessage(w http.ResponseWriter, r *http.Request, _ *request) {
	s.mu.Lock()
	m, ok := s.messages[r.PathValue("message")]
	if !ok || m.ChannelID != r.PathValue("channel") || m.Deleted {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, CodeUnknownMessage, "Unknown Message", nil)
		return
	}
	m.Deleted, m.DeletedAt = true, time.Now()
	s.bump()
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

type threadStart struct {
	Name        string `json:"name"`
	AutoArchive int    `json:"auto_archive_duration"`
	Type        int    `json:"type"`
}

func decodeThreadStart(req *request, fe formErrors) threadStart {
	var ts threadStart
	if err := json.Unmarshal(req.JSON, &ts); err != nil {
		fe.add(nil, "MODEL_TYPE_CONVERT", "Expected an object")
		return ts
	}
	if ts.Name == "" || TextLen(ts.Name) > 100 {
		fe.add([]string{"name"}, "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
	}
	switch ts.AutoArchive {
	case 0:
		ts.AutoArchive = 4320
	case 60, 1440, 4320, 10080:
	default:
		fe.add([]string{"auto_archive_duration"}, "BASE_TYPE_CHOICES", "Value must be one of {60, 1440, 4320, 10080}.")
	}
	return ts
}

// handleStartThread starts a public thread from a message. As on Discord,
// the thread's ID is the starter message's ID, and a message can start only
// one thread.
func (s *Server) handleStartThread(w http.ResponseWriter, r *http.Request, req *request) {
	fe := formErrors{}
	ts := decodeThreadStart(req, fe)
	if fe.write(w) {
		return
	}
	s.mu.Lock()
	parent, ok := s.channels[r.PathValue("channel")]
	if !ok || parent.Type != ChannelText {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, CodeUnknownChannel, "Unknown Channel", nil)
		return
	}
	m, ok := s.messages[r.PathValue("message")]
	if !ok || m.ChannelID != parent.ID || m.Deleted {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, CodeUnknownMessage, "Unknown Message", nil)
		return
	}
	if m.ThreadID != "" {
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, CodeThreadExists, "A thread has already been created for this message", nil)
		return
	}
	th := &Channel{ID: m.ID, Type: ChannelPublicThread, GuildID: parent.GuildID, Name: ts.Name, ParentID: parent.ID,
		OwnerID: s.opts.AppID, StarterMessageID: m.ID, AutoArchive: ts.AutoArchive, CreatedAt: time.Now()}
	m.ThreadID = th.ID
	s.channels[th.ID] = th
	s.bump()
	wire := th.wire()
	s.mu.Unlock()
	s.dispatchThreadCreate(wire)
	writeJSON(w, http.StatusCreated, wire)
}

// handleStartThreadBare starts a thread without a starter message.
func (s *Server) handleStartThreadBare(w http.ResponseWriter, r *http.Request, req *request) {
	fe := formErrors{}
	ts := decodeThreadStart(req, fe)
	if ts.Type == 0 {
		ts.Type = ChannelPrivateThread // Discord's default in API v9
	}
	if ts.Type != ChannelPublicThread && ts.Type != ChannelPrivateThread {
		fe.add([]string{"type"}, "BASE_TYPE_CHOICES", "Value must be one of {11, 12}.")
	}
	if fe.write(w) {
		return
	}
	s.mu.Lock()
	parent, ok := s.channels[r.PathValue("channel")]
	if !ok || parent.Type != ChannelText {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, CodeUnknownChannel, "Unknown Channel", nil)
		return
	}
	th := &Channel{ID: s.newID(), Type: ts.Type, GuildID: parent.GuildID, Name: ts.Name, ParentID: parent.ID,
		OwnerID: s.opts.AppID, AutoArchive: ts.AutoArchive, CreatedAt: time.Now()}
	s.channels[th.ID] = th
	s.bump()
	wire := th.wire()
	s.mu.Unlock()
	s.dispatchThreadCreate(wire)
	writeJSON(w, http.StatusCreated, wire)
}

func (s *Server) dispatchThreadCreate(wire map[string]any) {
	d := map[string]any{}
	for k, v := range wire {
		d[k] = v
	}
	d["newly_created"] = true
	s.gw.dispatch("THREAD_CREATE", intentGuilds, func(int) any { return d })
}

// userMention is <@id> or <@!id> in message content.
var userMention = regexp.MustCompile(`<@!?(\d+)>`)

// pinged are the users content notifies: every one mentioned when
// allowed_mentions is absent or parses "users", else only those it lists.
func pinged(content string, p payload) []string {
	var out []string
	for _, m := range userMention.FindAllStringSubmatch(content, -1) {
		id := m[1]
		am := p.AllowedMentions
		if am == nil || slices.Contains(am.Parse, "users") || slices.Contains(am.Users, id) {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}
