package fakediscord

import (
	"encoding/json"
	"net/http"
	"time"
)

// Interaction callback types.
const (
	CallbackMessage        = 4
	CallbackDeferMessage   = 5
	CallbackDeferUpdate    = 6
	CallbackUpdateMessage  = 7
	CallbackModal          = 9
	flagLoading            = 1 << 7
	interactionTokenPrefix = "itok-"
)

type callback struct {
	Type int             `json:"type"`
	Data json.RawMessage `json:"data"`
}

// handleCallback is the initial interaction response. It is accepted once,
// within AckDeadline of the dispatch, and only with a type that fits the
// interaction.
func (s *Server) handleCallback(w http.ResponseWriter, r *http.Request, req *request) {
	var cb callback
	if err := json.Unmarshal(req.JSON, &cb); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body", nil)
		return
	}
	var p payload
	if len(cb.Data) > 0 && string(cb.Data) != "null" {
		var err error
		if p, err = decodePayload(cb.Data); err != nil {
			writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Invalid Form Body", nil)
			return
		}
	}
	fe := formErrors{}
	switch cb.Type {
	case CallbackMessage, CallbackUpdateMessage:
		checkMessage(p, fe)
	case CallbackModal:
		checkModal(cb.Data, fe)
	case CallbackDeferMessage, CallbackDeferUpdate:
	default:
		fe.add([]string{"type"}, "BASE_TYPE_CHOICES", "Value must be one of {4, 5, 6, 7, 9}.")
	}
	if fe.write(w) {
		return
	}

	s.mu.Lock()
	in, ok := s.inters[r.PathValue("id")]
	switch {
	case !ok || in.Token != r.PathValue("token") || time.Since(in.Created) > s.opts.AckDeadline:
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, CodeUnknownInteraction, "Unknown interaction", nil)
		return
	case in.Acked:
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, CodeAlreadyAcked, "Interaction has already been acknowledged.", nil)
		return
	case (cb.Type == CallbackDeferUpdate || cb.Type == CallbackUpdateMessage) && in.MessageID == "":
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "Interaction response type is only valid for component interactions", nil)
		return
	case cb.Type == CallbackModal && in.Type == InteractionModal:
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, CodeInvalidFormBody, "A modal cannot answer a modal submit", nil)
		return
	case cb.Type == CallbackMessage && isEmpty(p, len(req.Files)):
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, CodeEmptyMessage, "Cannot send an empty message", nil)
		return
	}
	flags := 0
	if p.Flags != nil {
		flags = *p.Flags
	}
	var created map[string]any
	var updated map[string]any
	switch cb.Type {
	case CallbackMessage, CallbackDeferMessage:
		m := s.responseMessage(in)
		applyPayload(m, p)
		m.Flags = flags & FlagEphemeral
		if cb.Type == CallbackDeferMessage {
			m.Flags |= flagLoading
		}
		s.addFiles(m, req.Files)
		s.storeMessage(m)
		in.OriginalID = m.ID
		if cb.Type == CallbackMessage && !m.Ephemeral() {
			created = m.wire()
		}
	case CallbackDeferUpdate:
		in.OriginalID = in.MessageID
	case CallbackUpdateMessage:
		in.OriginalID = in.MessageID
		m := s.messages[in.MessageID]
		wire, ok := s.editLocked(w, m, p, req.Files, "interaction")
		if !ok {
			s.mu.Unlock()
			return
		}
		updated = wire
	case CallbackModal:
		in.Modal = append(json.RawMessage(nil), cb.Data...)
	}
	in.Acked = true
	in.AckedAfter = time.Since(in.Created)
	in.ResponseType = cb.Type
	in.ResponseFlags = flags
	c := s.channels[in.ChannelID]
	s.bump()
	s.mu.Unlock()
	if created != nil && c != nil {
		s.gw.dispatchMessage("MESSAGE_CREATE", created, c, true)
	}
	if updated != nil && c != nil {
		s.gw.dispatchMessage("MESSAGE_UPDATE", updated, c, false)
	}
	w.WriteHeader(http.StatusNoContent)
}

// responseMessage makes a message sent by the app on behalf of an
// interaction. Callers hold s.mu.
func (s *Server) responseMessage(in *Interaction) *Message {
	return &Message{ID: s.newID(), ChannelID: in.ChannelID, GuildID: in.GuildID, Author: s.BotUser(),
		Created: time.Now(), Interaction: in.ID, Webhook: s.opts.AppID}
}

// webhookInteraction finds the interaction behind a webhook token and
// answers the errors Discord gives for a wrong app, an unknown or
// unanswered interaction, and an expired token. Callers hold s.mu; on
// failure it has written the response.
func (s *Server) webhookInteraction(w http.ResponseWriter, r *http.Request) *Interaction {
	in, ok := s.byToken[r.PathValue("token")]
	switch {
	case !ok || r.PathValue("app") != s.opts.AppID:
		writeError(w, http.StatusNotFound, CodeUnknownWebhook, "Unknown Webhook", nil)
		return nil
	case in.expired || time.Since(in.Created) > s.opts.TokenLifetime:
		writeError(w, http.StatusUnauthorized, CodeInvalidToken, "Invalid Webhook Token", nil)
		return nil
	case !in.Acked:
		writeError(w, http.StatusNotFound, CodeUnknownWebhook, "Unknown Webhook", nil)
		return nil
	}
	return in
}

// webhookMessage resolves "@original" or a follow-up ID. Callers hold s.mu.
func (s *Server) webhookMessage(w http.ResponseWriter, in *Interaction, id string) *Message {
	if id == "@original" {
		id = in.OriginalID
	}
	m, ok := s.messages[id]
	if !ok || m.Deleted || (m.Interaction != in.ID && id != in.MessageID) {
		writeError(w, http.StatusNotFound, CodeUnknownMessage, "Unknown Message", nil)
		return nil
	}
	return m
}

func (s *Server) handleFollowUp(w http.ResponseWriter, r *http.Request, req *request) {
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
	in := s.webhookInteraction(w, r)
	if in == nil {
		s.mu.Unlock()
		return
	}
	if orig := s.messages[in.OriginalID]; in.ResponseType == CallbackDeferMessage && orig != nil && !orig.Deleted && orig.Flags&flagLoading != 0 {
		// Discord, for compatibility: a follow-up while the deferred
		// "thinking…" message still loads edits that message instead,
		// and its visibility stays what the deferral chose; the follow-up's
		// ephemeral flag is ignored.
		p.Flags = nil
		wire, ok := s.editLocked(w, orig, p, req.Files, "webhook")
		if ok {
			orig.Flags &^= flagLoading
			wire["flags"] = orig.Flags
		}
		c := s.channels[orig.ChannelID]
		eph := orig.Ephemeral()
		s.mu.Unlock()
		if !ok {
			return
		}
		if !eph && c != nil {
			s.gw.dispatchMessage("MESSAGE_UPDATE", wire, c, false)
		}
		if r.URL.Query().Get("wait") == "true" {
			writeJSON(w, http.StatusOK, wire)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	m := s.responseMessage(in)
	applyPayload(m, p)
	m.Flags &= FlagEphemeral
	s.addFiles(m, req.Files)
	s.storeMessage(m)
	in.FollowUps = append(in.FollowUps, m.ID)
	wire := m.wire()
	c := s.channels[in.ChannelID]
	s.mu.Unlock()
	if !m.Ephemeral() && c != nil {
		s.gw.dispatchMessage("MESSAGE_CREATE", wire, c, true)
	}
	if r.URL.Query().Get("wait") == "true" {
		writeJSON(w, http.StatusOK, wire)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleWebhookGet(w http.ResponseWriter, r *http.Request, _ *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.webhookInteraction(w, r)
	if in == nil {
		return
	}
	m := s.webhookMessage(w, in, r.PathValue("message"))
	if m == nil {
		return
	}
	writeJSON(w, http.StatusOK, m.wire())
}

func (s *Server) handleWebhookEdit(w http.ResponseWriter, r *http.Request, req *request) {
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
	p.Flags = nil // flags cannot be changed by an edit
	s.mu.Lock()
	in := s.webhookInteraction(w, r)
	if in == nil {
		s.mu.Unlock()
		return
	}
	m := s.webhookMessage(w, in, r.PathValue("message"))
	if m == nil {
		s.mu.Unlock()
		return
	}
	m.Flags &^= flagLoading
	wire, ok := s.editLocked(w, m, p, req.Files, "webhook")
	c := s.channels[m.ChannelID]
	eph := m.Ephemeral()
	s.mu.Unlock()
	if !ok {
		return
	}
	if !eph && c != nil {
		s.gw.dispatchMessage("MESSAGE_UPDATE", wire, c, false)
	}
	writeJSON(w, http.StatusOK, wire)
}

func (s *Server) handleWebhookDelete(w http.ResponseWriter, r *http.Request, _ *request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.webhookInteraction(w, r)
	if in == nil {
		return
	}
	m := s.webhookMessage(w, in, r.PathValue("message"))
	if m == nil {
		return
	}
	m.Deleted = true
	s.bump()
	w.WriteHeader(http.StatusNoContent)
}

// Interaction returns a copy of an interaction and how it was answered.
func (s *Server) Interaction(id string) (Interaction, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.inters[id]
	if !ok {
		return Interaction{}, false
	}
	c := *in
	c.FollowUps = append([]string(nil), in.FollowUps...)
	return c, true
}

// ExpireInteraction makes an interaction's token invalid now, as if its
// lifetime had passed: webhook edits and follow-ups get 401 Invalid Webhook
// Token (code 50027).
func (s *Server) ExpireInteraction(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.inters[id]; ok {
		in.expired = true
		s.bump()
	}
}
