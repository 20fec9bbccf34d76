package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// verificationToken is the deprecated per-app token Slack still puts in
// payloads; sandbot ignores it (requests are verified by signature).
const verificationToken = "fake-verification-token"

// UserMessage is a message typed by a user (or posted by another bot) in a
// channel, a DM or a thread.
type UserMessage struct {
	User        string // default "U0001"
	Channel     string // default "C0001"
	ChannelType string // "channel" (default), "group", "im", "mpim"
	Text        string
	// TS is assigned by Say when empty.
	TS       string
	ThreadTS string
	// ClientMsgID is assigned for user messages when empty.
	ClientMsgID string
	// BotID and SubType make this a bot's message ("bot_message").
	BotID   string
	SubType string
	// Blocks is the message's Block Kit JSON as posted (another app's
	// message can carry any block_id).
	Blocks string
	// Files are attached to the message (the events carry them with a
	// url_private_download the fake serves).
	Files []UserFile
}

// Said is a message as recorded by Say, with the Events API payloads Slack
// sends for it.
type Said struct {
	Message UserMessage
	// Payloads are event_callback bodies: a "message" event, preceded by an
	// "app_mention" event when the text mentions the bot outside a DM.
	Payloads []json.RawMessage
	// EventIDs are the payloads' event_id values, in the same order.
	EventIDs []string
}

// Mention returns "<@BOTUSER>", the way a mention of the bot appears in text.
func (s *Server) Mention() string { return "<@" + s.opts.BotUserID + ">" }

// Say records m in the channel (so conversations.replies sees it) and returns
// the payloads Slack would deliver for it. It sends nothing.
func (s *Server) Say(m UserMessage) Said {
	if m.User == "" && m.BotID == "" {
		m.User = "U0001"
	}
	if m.Channel == "" {
		m.Channel = "C0001"
	}
	if m.ChannelType == "" {
		m.ChannelType = "channel"
	}
	s.mu.Lock()
	if m.TS == "" {
		m.TS = s.newTSLocked()
	}
	if m.ClientMsgID == "" && m.BotID == "" {
		m.ClientMsgID = fmt.Sprintf("c0ffee00-0000-4000-8000-%012d", s.nextSeqLocked())
	}
	s.addMessageLocked(&Message{
		Channel: m.Channel, TS: m.TS, ThreadTS: m.ThreadTS, User: m.User, BotID: m.BotID,
		SubType: m.SubType, Text: m.Text, RawBlocks: m.Blocks, Updated: time.Now(),
	})
	var out Said
	out.Message = m
	files := s.sayFilesLocked(m)
	if m.ChannelType != "im" && strings.Contains(m.Text, s.Mention()) {
		ev := map[string]any{
			"type": "app_mention", "user": m.User, "text": m.Text, "ts": m.TS, "channel": m.Channel,
			"event_ts": m.TS, "team": s.opts.TeamID,
		}
		if m.ClientMsgID != "" {
			ev["client_msg_id"] = m.ClientMsgID
		}
		if m.ThreadTS != "" {
			ev["thread_ts"] = m.ThreadTS
		}
		if m.BotID != "" {
			ev["bot_id"] = m.BotID
		}
		if files != nil {
			ev["files"] = files
		}
		id, p := s.eventCallbackLocked(ev)
		out.EventIDs, out.Payloads = append(out.EventIDs, id), append(out.Payloads, p)
	}
	ev := map[string]any{
		"type": "message", "channel": m.Channel, "text": m.Text, "ts": m.TS, "event_ts": m.TS,
		"channel_type": m.ChannelType, "team": s.opts.TeamID,
	}
	if m.User != "" {
		ev["user"] = m.User
	}
	if m.ClientMsgID != "" {
		ev["client_msg_id"] = m.ClientMsgID
	}
	if m.ThreadTS != "" {
		ev["thread_ts"] = m.ThreadTS
	}
	if m.BotID != "" {
		ev["bot_id"] = m.BotID
	}
	if m.SubType != "" {
		ev["subtype"] = m.SubType
	}
	if files != nil {
		ev["files"], ev["upload"] = files, true
		if m.SubType == "" {
			ev["subtype"] = "file_share"
		}
	}
	id, p := s.eventCallbackLocked(ev)
	out.EventIDs, out.Payloads = append(out.EventIDs, id), append(out.Payloads, p)
	s.notifyLocked()
	s.mu.Unlock()
	return out
}

// Sent is what SendMessage delivered.
type Sent struct {
	Said
	Envelopes []string
}

// SendMessage is Say followed by delivery of every payload over Socket Mode.
func (s *Server) SendMessage(ctx context.Context, m UserMessage) (Sent, error) {
	out := Sent{Said: s.Say(m)}
	for _, p := range out.Payloads {
		id, err := s.SendEvent(ctx, p)
		if err != nil {
			return out, err
		}
		out.Envelopes = append(out.Envelopes, id)
	}
	return out, nil
}

// EditPayload records an edit of a stored message and returns the
// message_changed event Slack sends for it.
func (s *Server) EditPayload(channel, ts, newText string) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(channel, ts)
	if m == nil {
		return nil, fmt.Errorf("fakeslack: edit: no message %s in %s", ts, channel)
	}
	prev := s.messageJSON(m)
	m.Text = newText
	m.Updates++
	cur := s.messageJSON(m)
	evTS := s.newTSLocked()
	ev := map[string]any{
		"type": "message", "subtype": "message_changed", "hidden": true, "channel": m.Channel,
		"channel_type": "channel", "ts": evTS, "event_ts": evTS, "message": cur, "previous_message": prev,
	}
	_, p := s.eventCallbackLocked(ev)
	s.notifyLocked()
	return p, nil
}

// EventCallback wraps an inner event in an event_callback payload with a
// fresh event_id.
func (s *Server) EventCallback(event map[string]any) (eventID string, payload json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eventCallbackLocked(event)
}

func (s *Server) eventCallbackLocked(event map[string]any) (string, json.RawMessage) {
	id := s.newIDLocked("Ev")
	p := map[string]any{
		"token": verificationToken, "team_id": s.opts.TeamID, "api_app_id": s.opts.AppID,
		"event": event, "type": "event_callback", "event_id": id, "event_time": time.Now().Unix(),
		"authorizations": []any{map[string]any{
			"enterprise_id": nil, "team_id": s.opts.TeamID, "user_id": s.opts.BotUserID, "is_bot": true, "is_enterprise_install": false,
		}},
		"is_ext_shared_channel": false, "event_context": "4-fake-" + id,
	}
	b, _ := json.Marshal(p)
	return id, b
}

// URLVerification is the payload Slack sends when an Events API request URL
// is configured.
func URLVerification(challenge string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"token": verificationToken, "challenge": challenge, "type": "url_verification"})
	return b
}

func (s *Server) userJSON(id string) map[string]any {
	name := s.handleLocked(id)
	return map[string]any{"id": id, "username": name, "name": name, "team_id": s.opts.TeamID}
}

func (s *Server) teamJSON() map[string]any {
	return map[string]any{"id": s.opts.TeamID, "domain": s.opts.TeamDomain}
}

func (s *Server) newTriggerLocked() string {
	t := fmt.Sprintf("%d.%d.fake%06d", 1700000000, 42, s.nextSeqLocked())
	s.trigs[t] = time.Now()
	return t
}

func (s *Server) responseURLLocked() string {
	return s.srv.URL + "/response/" + s.newIDLocked("R")
}

// Click describes a button click on a message the bot posted.
type Click struct {
	User      string // default "U0001"
	Channel   string
	MessageTS string
	// ActionID picks the button; Value, when set, overrides the button's
	// value (to simulate a stale or forged click).
	ActionID string
	Value    *string
}

// ClickPayload builds the block_actions payload Slack sends when c.User
// clicks a button of a stored message. It fails if the message or the button
// does not exist, so a test cannot click a button the bot never showed.
func (s *Server) ClickPayload(c Click) (json.RawMessage, error) {
	if c.User == "" {
		c.User = "U0001"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(c.Channel, c.MessageTS)
	if m == nil {
		return nil, fmt.Errorf("fakeslack: click: no message %s in %s", c.MessageTS, c.Channel)
	}
	var btn *Button
	for _, b := range m.Buttons() {
		if b.ActionID == c.ActionID {
			b := b
			btn = &b
			break
		}
	}
	if btn == nil {
		return nil, fmt.Errorf("fakeslack: click: message %s has no button %q (buttons: %v)", c.MessageTS, c.ActionID, m.Buttons())
	}
	value := btn.Value
	if c.Value != nil {
		value = *c.Value
	}
	action := map[string]any{
		"type": "button", "action_id": btn.ActionID, "block_id": btn.BlockID, "value": value,
		"text": map[string]any{"type": "plain_text", "text": btn.Text, "emoji": true}, "action_ts": s.newTSLocked(),
	}
	if btn.Style != "" {
		action["style"] = btn.Style
	}
	container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": m.Channel, "is_ephemeral": false}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	p := map[string]any{
		"type": "block_actions", "user": s.userJSON(c.User), "api_app_id": s.opts.AppID, "token": verificationToken,
		"container": container, "trigger_id": s.newTriggerLocked(), "team": s.teamJSON(), "enterprise": nil,
		"is_enterprise_install": false, "channel": map[string]any{"id": m.Channel, "name": "general"},
		"message": s.messageJSON(m), "state": map[string]any{"values": map[string]any{}},
		"response_url": s.responseURLLocked(), "actions": []any{action},
	}
	b, err := json.Marshal(p)
	return b, err
}

// ClickButton builds a click with ClickPayload and sends it over Socket Mode.
func (s *Server) ClickButton(ctx context.Context, c Click) (string, error) {
	p, err := s.ClickPayload(c)
	if err != nil {
		return "", err
	}
	return s.SendInteraction(ctx, p)
}

// SubmitPayload builds the view_submission Slack sends when user submits an
// opened modal, with values keyed by the inputs' action_id.
func (s *Server) SubmitPayload(viewID, user string, values map[string]string) (json.RawMessage, error) {
	if user == "" {
		user = "U0001"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.views[viewID]
	if v == nil {
		return nil, fmt.Errorf("fakeslack: submit: no view %q", viewID)
	}
	state := map[string]any{}
	for _, in := range v.inputs {
		val, ok := values[in.ActionID]
		var field any
		if ok {
			field = val
		}
		state[in.BlockID] = map[string]any{in.ActionID: map[string]any{"type": in.Type, "value": field}}
	}
	view := map[string]any{}
	_ = json.Unmarshal(v.Raw, &view)
	view["id"], view["team_id"], view["app_id"], view["bot_id"] = v.ID, s.opts.TeamID, s.opts.AppID, s.opts.BotID
	view["state"] = map[string]any{"values": state}
	view["hash"] = viewHash(v)
	p := map[string]any{
		"type": "view_submission", "team": s.teamJSON(), "user": s.userJSON(user), "api_app_id": s.opts.AppID,
		"token": verificationToken, "trigger_id": s.newTriggerLocked(), "view": view, "response_urls": []any{},
		"is_enterprise_install": false, "enterprise": nil,
	}
	return json.Marshal(p)
}

// SubmitView builds a submission with SubmitPayload and sends it over Socket
// Mode.
func (s *Server) SubmitView(ctx context.Context, viewID, user string, values map[string]string) (string, error) {
	p, err := s.SubmitPayload(viewID, user, values)
	if err != nil {
		return "", err
	}
	return s.SendInteraction(ctx, p)
}

// ShortcutPayload builds the message_action payload of a message shortcut
// (callbackID) used by user on a stored message.
func (s *Server) ShortcutPayload(callbackID, user, channel, messageTS string) (json.RawMessage, error) {
	if user == "" {
		user = "U0001"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(channel, messageTS)
	if m == nil {
		return nil, fmt.Errorf("fakeslack: shortcut: no message %s in %s", messageTS, channel)
	}
	p := map[string]any{
		"type": "message_action", "token": verificationToken, "action_ts": s.newTSLocked(), "team": s.teamJSON(),
		"user": s.userJSON(user), "channel": map[string]any{"id": channel, "name": "general"},
		"is_enterprise_install": false, "enterprise": nil, "callback_id": callbackID,
		"trigger_id": s.newTriggerLocked(), "response_url": s.responseURLLocked(),
		"message_ts": m.TS, "message": s.messageJSON(m),
	}
	return json.Marshal(p)
}

// UseShortcut builds a shortcut with ShortcutPayload and sends it over Socket
// Mode.
func (s *Server) UseShortcut(ctx context.Context, callbackID, user, channel, messageTS string) (string, error) {
	p, err := s.ShortcutPayload(callbackID, user, channel, messageTS)
	if err != nil {
		return "", err
	}
	return s.SendInteraction(ctx, p)
}

// SlashCommand is a slash command typed by a user at channel level.
type SlashCommand struct {
	User        string // default "U0001"
	Channel     string // default "C0001"
	ChannelName string // default "general"
	Command     string // for example "/sandbot"
	Text        string
}

// slashPayload builds the fields Slack sends for a slash command (the same
// names in the Socket Mode JSON and the HTTP form).
func (s *Server) slashPayload(c SlashCommand) map[string]string {
	if c.User == "" {
		c.User = "U0001"
	}
	if c.Channel == "" {
		c.Channel = "C0001"
	}
	if c.ChannelName == "" {
		c.ChannelName = "general"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]string{
		"token": verificationToken, "team_id": s.opts.TeamID, "team_domain": s.opts.TeamDomain,
		"channel_id": c.Channel, "channel_name": c.ChannelName, "user_id": c.User, "user_name": s.handleLocked(c.User),
		"command": c.Command, "text": c.Text, "api_app_id": s.opts.AppID, "is_enterprise_install": "false",
		"response_url": s.responseURLLocked(), "trigger_id": s.newTriggerLocked(),
	}
}
