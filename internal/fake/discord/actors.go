package fakediscord

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// Users' actions. Each stores what Discord would store and dispatches the
// gateway event a bot receives. They fail, as the Discord client would not
// let a user do it, when the channel, message, button, command or modal
// does not exist.

var mentionRE = regexp.MustCompile(`<@!?(\d+)>`)

// UserMessage posts content as from in a channel, DM or thread and
// dispatches MESSAGE_CREATE. Mentions (<@id>) are resolved; <@AppID>
// mentions the bot.
func (s *Server) UserMessage(channelID string, from Member, content string) (Message, error) {
	if TextLen(content) > MaxContent {
		return Message{}, fmt.Errorf("fake discord: user message of %d characters exceeds %d", TextLen(content), MaxContent)
	}
	s.mu.Lock()
	c, ok := s.channels[channelID]
	if !ok {
		s.mu.Unlock()
		return Message{}, fmt.Errorf("fake discord: unknown channel %s", channelID)
	}
	m := &Message{ID: s.newID(), ChannelID: c.ID, GuildID: c.GuildID, Author: from.User, Content: content, Created: time.Now()}
	if c.GuildID != "" {
		mem := from
		m.Member = &mem
	}
	for _, sm := range mentionRE.FindAllStringSubmatch(content, -1) {
		if sm[1] == s.opts.AppID {
			m.Mentions = append(m.Mentions, s.BotUser())
		} else {
			m.Mentions = append(m.Mentions, User{ID: sm[1], Username: "user" + sm[1]})
		}
	}
	out, dispatch := s.postLocked(m, c)
	s.mu.Unlock()
	dispatch()
	return out, nil
}

// AppMessage stores a message another app's bot (from) posted in a
// channel or thread, embeds as it sent them, and dispatches MESSAGE_CREATE:
// a message the bot under test must tell from its own.
func (s *Server) AppMessage(channelID string, from User, content string, embeds json.RawMessage) (Message, error) {
	s.mu.Lock()
	c, ok := s.channels[channelID]
	if !ok {
		s.mu.Unlock()
		return Message{}, fmt.Errorf("fake discord: unknown channel %s", channelID)
	}
	from.Bot = true
	m := &Message{ID: s.newID(), ChannelID: c.ID, GuildID: c.GuildID, Author: from, Content: content, Embeds: embeds, Created: time.Now()}
	out, dispatch := s.postLocked(m, c)
	s.mu.Unlock()
	dispatch()
	return out, nil
}

// postLocked stores m, a user's or another app's new message in c, and
// returns the stored copy and the MESSAGE_CREATE dispatch to make once
// s.mu is released. Callers hold s.mu.
func (s *Server) postLocked(m *Message, c *Channel) (Message, func()) {
	s.storeMessage(m)
	wire := m.wire()
	cc := *c
	return m.clone(), func() { s.gw.dispatchMessage("MESSAGE_CREATE", wire, &cc, true) }
}

// CommandOption is an option value of a slash command invocation.
type CommandOption struct {
	Name  string
	Value any
}

type registered struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Options []commandOption `json:"options"`
}

// SlashCommand invokes a registered chat-input command (guild commands of
// the channel's guild first, then global ones) and dispatches
// INTERACTION_CREATE. It returns the interaction ID. Like Discord's client,
// it refuses unknown commands, unknown options, missing required options
// and values outside an option's choices.
func (s *Server) SlashCommand(channelID string, from Member, name string, opts ...CommandOption) (string, error) {
	s.mu.Lock()
	c, ok := s.channels[channelID]
	if !ok {
		s.mu.Unlock()
		return "", fmt.Errorf("fake discord: unknown channel %s", channelID)
	}
	var cmd *registered
	for _, scope := range []string{scopeKey(c.GuildID), "global"} {
		for _, raw := range s.commands[scope] {
			var rc registered
			if json.Unmarshal(raw, &rc) == nil && rc.Name == name {
				cmd = &rc
				break
			}
		}
		if cmd != nil {
			break
		}
	}
	if cmd == nil {
		s.mu.Unlock()
		return "", fmt.Errorf("fake discord: command /%s is not registered for guild %q or globally", name, c.GuildID)
	}
	wireOpts, err := commandOptions(cmd, opts)
	if err != nil {
		s.mu.Unlock()
		return "", err
	}
	data := map[string]any{"id": cmd.ID, "name": cmd.Name, "type": 1, "options": wireOpts}
	if c.GuildID != "" {
		data["guild_id"] = c.GuildID
	}
	return s.interactLocked(c, from, InteractionCommand, data, nil)
}

func commandOptions(cmd *registered, opts []CommandOption) ([]any, error) {
	given := map[string]CommandOption{}
	for _, o := range opts {
		given[o.Name] = o
	}
	var out []any
	for _, def := range cmd.Options {
		o, ok := given[def.Name]
		if !ok {
			if def.Required {
				return nil, fmt.Errorf("fake discord: /%s needs option %q", cmd.Name, def.Name)
			}
			continue
		}
		delete(given, def.Name)
		if len(def.Choices) > 0 {
			found := false
			for _, ch := range def.Choices {
				if fmt.Sprint(ch.Value) == fmt.Sprint(o.Value) {
					found = true
				}
			}
			if !found {
				return nil, fmt.Errorf("fake discord: /%s option %q: %v is not one of the choices", cmd.Name, def.Name, o.Value)
			}
		}
		out = append(out, map[string]any{"name": def.Name, "type": def.Type, "value": o.Value})
	}
	for n := range given {
		return nil, fmt.Errorf("fake discord: /%s has no option %q", cmd.Name, n)
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

// ClickButton clicks the button with customID on a message and dispatches
// INTERACTION_CREATE (type 3). It returns the interaction ID.
func (s *Server) ClickButton(messageID string, from Member, customID string) (string, error) {
	s.mu.Lock()
	m, ok := s.messages[messageID]
	if !ok || m.Deleted {
		s.mu.Unlock()
		return "", fmt.Errorf("fake discord: unknown message %s", messageID)
	}
	var rows []component
	_ = json.Unmarshal(rawOrEmpty(m.Components), &rows)
	found := false
	for _, r := range rows {
		for _, b := range r.Components {
			if b.Type == 2 && b.CustomID != nil && *b.CustomID == customID {
				found = true
			}
		}
	}
	if !found {
		s.mu.Unlock()
		return "", fmt.Errorf("fake discord: message %s has no button %q", messageID, customID)
	}
	c := s.channels[m.ChannelID]
	return s.interactLocked(c, from, InteractionComponent, map[string]any{"custom_id": customID, "component_type": 2}, m)
}

// ForgeClick dispatches a component interaction (type 3) on a message with
// a custom_id that the message need not carry: what a modified client or a
// replayed, edited payload would send, for attack tests. It returns the
// interaction ID.
func (s *Server) ForgeClick(messageID string, from Member, customID string) (string, error) {
	s.mu.Lock()
	m, ok := s.messages[messageID]
	if !ok || m.Deleted {
		s.mu.Unlock()
		return "", fmt.Errorf("fake discord: unknown message %s", messageID)
	}
	c := s.channels[m.ChannelID]
	return s.interactLocked(c, from, InteractionComponent, map[string]any{"custom_id": customID, "component_type": 2}, m)
}

// SubmitModal submits the modal that the bot opened in answer to
// interaction openedBy, with values keyed by text input custom_id, and
// dispatches INTERACTION_CREATE (type 5). It returns the new interaction ID.
func (s *Server) SubmitModal(openedBy string, from Member, values map[string]string) (string, error) {
	return s.SubmitModalWith(openedBy, from, ModalSubmission{Values: values})
}

// ModalSubmission is a modal submit that need not match the modal the bot
// opened, for the shapes a bot meets besides the usual one.
type ModalSubmission struct {
	// Values are keyed by text input custom_id, as for SubmitModal.
	Values map[string]string
	// Inputs, when not nil, are the text inputs the submit carries, in
	// order, instead of the modal's own: a modal of another shape coming
	// back, as one opened by an earlier version of the bot does. An empty
	// non-nil list sends no inputs at all.
	Inputs []string
	// NoMessage leaves out the interaction's message, as for a modal
	// opened from a slash command rather than from a button.
	NoMessage bool
}

// SubmitModalWith submits the modal that interaction openedBy opened in
// the shape sub describes and dispatches INTERACTION_CREATE (type 5). It
// returns the new interaction ID.
func (s *Server) SubmitModalWith(openedBy string, from Member, sub ModalSubmission) (string, error) {
	s.mu.Lock()
	in, ok := s.inters[openedBy]
	if !ok || in.ResponseType != CallbackModal {
		s.mu.Unlock()
		return "", fmt.Errorf("fake discord: interaction %s did not open a modal", openedBy)
	}
	var md modalData
	_ = json.Unmarshal(in.Modal, &md)
	inputs := sub.Inputs
	maxLen := map[string]int{}
	for _, r := range md.Components {
		ti := r.Components[0]
		maxLen[*ti.CustomID] = ti.MaxLength
		if sub.Inputs == nil {
			inputs = append(inputs, *ti.CustomID)
		}
	}
	rows := []any{}
	for _, id := range inputs {
		v := sub.Values[id]
		if n := maxLen[id]; n > 0 && TextLen(v) > n {
			s.mu.Unlock()
			return "", fmt.Errorf("fake discord: value for %q exceeds max_length %d", id, n)
		}
		rows = append(rows, map[string]any{"type": 1, "components": []any{map[string]any{"type": 4, "custom_id": id, "value": v}}})
	}
	c := s.channels[in.ChannelID]
	var msg *Message
	if in.MessageID != "" && !sub.NoMessage {
		msg = s.messages[in.MessageID]
	}
	return s.interactLocked(c, from, InteractionModal, map[string]any{"custom_id": md.CustomID, "components": rows}, msg)
}

// interactLocked creates and dispatches an interaction. Callers hold s.mu;
// it unlocks.
func (s *Server) interactLocked(c *Channel, from Member, typ int, data map[string]any, msg *Message) (string, error) {
	id := s.newID()
	in := &Interaction{ID: id, Token: interactionTokenPrefix + id, Type: typ, ChannelID: c.ID, GuildID: c.GuildID,
		Member: from, Created: time.Now()}
	in.Data, _ = json.Marshal(data)
	wire := map[string]any{
		"id": id, "application_id": s.opts.AppID, "type": typ, "token": in.Token, "version": 1,
		"channel_id": c.ID, "channel": c.wire(), "data": data, "locale": "en-US", "app_permissions": "0",
		"entitlements": []any{},
	}
	if c.GuildID != "" {
		wire["guild_id"] = c.GuildID
		wire["guild_locale"] = "en-US"
		wire["member"] = from.wire(true)
		wire["context"] = 0
	} else {
		wire["user"] = from.User.wire()
		wire["context"] = 1
	}
	if msg != nil {
		in.MessageID = msg.ID
		wire["message"] = msg.wire()
	}
	s.inters[id] = in
	s.byToken[in.Token] = in
	s.bump()
	s.mu.Unlock()
	s.gw.dispatch("INTERACTION_CREATE", 0, func(int) any { return wire })
	return id, nil
}

// UserEdit changes the content of a user's message and dispatches
// MESSAGE_UPDATE, as when someone edits what they wrote.
func (s *Server) UserEdit(messageID, content string) error {
	s.mu.Lock()
	m, ok := s.messages[messageID]
	if !ok || m.Deleted || m.Author.Bot {
		s.mu.Unlock()
		return fmt.Errorf("fake discord: no user message %s", messageID)
	}
	m.Content = content
	m.Edited = time.Now()
	s.bump()
	wire := m.wire()
	c := *s.channels[m.ChannelID]
	s.mu.Unlock()
	s.gw.dispatchMessage("MESSAGE_UPDATE", wire, &c, false)
	return nil
}

// Redispatch sends MESSAGE_CREATE for a stored message again, with a new
// sequence number, to every live gateway session: Discord redelivering an
// event, as a bot that restarted between handling a message and
// persisting that it did would see it.
func (s *Server) Redispatch(messageID string) error {
	s.mu.Lock()
	m, ok := s.messages[messageID]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("fake discord: no message %s", messageID)
	}
	wire := m.wire()
	c := *s.channels[m.ChannelID]
	s.mu.Unlock()
	s.gw.dispatchMessage("MESSAGE_CREATE", wire, &c, true)
	return nil
}
