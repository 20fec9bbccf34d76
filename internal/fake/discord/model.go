package fakediscord

import (
	"encoding/json"
	"sort"
	"strings"
	"time"
)

// Channel types used by the fake (Discord's numeric values).
const (
	ChannelText          = 0
	ChannelDM            = 1
	ChannelPublicThread  = 11
	ChannelPrivateThread = 12
)

// Message flags.
const (
	FlagEphemeral = 1 << 6
)

// User is a Discord user.
type User struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Bot      bool   `json:"bot,omitempty"`
}

func (u User) wire() map[string]any {
	m := map[string]any{"id": u.ID, "username": u.Username, "discriminator": "0", "global_name": u.Username, "avatar": nil}
	if u.Bot {
		m["bot"] = true
	}
	return m
}

// Member is a user acting in a guild, with the IDs of their roles.
type Member struct {
	User  User
	Roles []string
}

func (m Member) wire(withUser bool) map[string]any {
	roles := m.Roles
	if roles == nil {
		roles = []string{}
	}
	w := map[string]any{"roles": roles, "joined_at": "2024-01-01T00:00:00Z", "deaf": false, "mute": false, "permissions": "0", "nick": nil}
	if withUser {
		w["user"] = m.User.wire()
	}
	return w
}

// Role is a guild role.
type Role struct {
	ID   string
	Name string
}

// Guild is a Discord server.
type Guild struct {
	ID    string
	Name  string
	Roles []Role
}

// Channel is a channel, DM or thread.
type Channel struct {
	ID      string
	Type    int
	GuildID string
	Name    string
	// ParentID is the channel a thread lives in.
	ParentID string
	// OwnerID is who created a thread.
	OwnerID string
	// StarterMessageID is the message a thread was started from ("" for a
	// thread without a message).
	StarterMessageID string
	// AutoArchive is the thread's auto-archive duration in minutes.
	AutoArchive int
	Recipients  []User
	CreatedAt   time.Time
}

// IsThread reports whether the channel is a thread.
func (c Channel) IsThread() bool {
	return c.Type == ChannelPublicThread || c.Type == ChannelPrivateThread || c.Type == 10
}

func (c Channel) wire() map[string]any {
	w := map[string]any{"id": c.ID, "type": c.Type, "name": c.Name, "flags": 0}
	if c.GuildID != "" {
		w["guild_id"] = c.GuildID
	}
	if c.ParentID != "" {
		w["parent_id"] = c.ParentID
	}
	if c.IsThread() {
		w["owner_id"] = c.OwnerID
		w["message_count"] = 0
		w["member_count"] = 1
		w["thread_metadata"] = map[string]any{"archived": false, "auto_archive_duration": c.AutoArchive, "archive_timestamp": c.CreatedAt.Format(time.RFC3339Nano), "locked": false}
	}
	if len(c.Recipients) > 0 {
		rs := make([]any, len(c.Recipients))
		for i, r := range c.Recipients {
			rs[i] = r.wire()
		}
		w["recipients"] = rs
	}
	return w
}

func sortChannels(cs []Channel) {
	sort.Slice(cs, func(i, j int) bool {
		if len(cs[i].ID) != len(cs[j].ID) {
			return len(cs[i].ID) < len(cs[j].ID)
		}
		return cs[i].ID < cs[j].ID
	})
}

// Attachment is a file uploaded with a message.
type Attachment struct {
	ID          string
	Filename    string
	ContentType string
	Data        []byte
	// URL, when set, is the attachment's url and proxy_url on the wire
	// (a user's attachment the fake serves, see UserMessageWithFiles);
	// otherwise they name Discord's CDN.
	URL string
}

// Message is a stored message.
type Message struct {
	ID        string
	ChannelID string
	GuildID   string
	Author    User
	Member    *Member
	Content   string
	// Components and Embeds are the JSON arrays as last sent (nil if never).
	Components  json.RawMessage
	Embeds      json.RawMessage
	Attachments []Attachment
	Flags       int
	Created     time.Time
	Edited      time.Time
	// Interaction is the ID of the interaction this message answers, if any.
	Interaction string
	// Webhook is set for interaction responses and follow-ups.
	Webhook  string
	Mentions []User
	// Pinged are the users a bot message's content notified, as Discord
	// works it out from <@id> mentions and allowed_mentions.
	Pinged  []string
	Deleted bool
	// DeletedAt is when a DELETE took the message out (zero when another
	// path deleted it), so a check can tell a message deleted at once from
	// one people read for minutes.
	DeletedAt time.Time
	// ThreadID is the thread started from this message, if any.
	ThreadID string
	// Reactions are the message's reactions, in the order their emoji
	// were first added.
	Reactions []Reaction
}

// Ephemeral reports whether only the interacting user sees the message.
func (m Message) Ephemeral() bool { return m.Flags&FlagEphemeral != 0 }

// Loading reports whether the message is a deferred interaction response
// still showing "thinking…": nothing has edited it yet.
func (m Message) Loading() bool { return m.Flags&flagLoading != 0 }

func (m *Message) clone() Message {
	c := *m
	c.Attachments = append([]Attachment(nil), m.Attachments...)
	c.Mentions = append([]User(nil), m.Mentions...)
	c.Pinged = append([]string(nil), m.Pinged...)
	c.Reactions = nil
	for _, r := range m.Reactions {
		r.Users = append([]string(nil), r.Users...)
		c.Reactions = append(c.Reactions, r)
	}
	return c
}

func (m *Message) wire() map[string]any {
	w := map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "author": m.Author.wire(), "content": m.Content,
		"timestamp": m.Created.Format(time.RFC3339Nano), "edited_timestamp": nil, "tts": false,
		"mention_everyone": false, "mention_roles": []string{}, "pinned": false, "type": 0, "flags": m.Flags,
	}
	if m.GuildID != "" {
		w["guild_id"] = m.GuildID
	}
	if !m.Edited.IsZero() {
		w["edited_timestamp"] = m.Edited.Format(time.RFC3339Nano)
	}
	if m.Member != nil {
		w["member"] = m.Member.wire(false)
	}
	ments := make([]any, len(m.Mentions))
	for i, u := range m.Mentions {
		ments[i] = u.wire()
	}
	w["mentions"] = ments
	w["components"] = rawOrEmpty(m.Components)
	w["embeds"] = rawOrEmpty(m.Embeds)
	atts := make([]any, len(m.Attachments))
	for i, a := range m.Attachments {
		atts[i] = map[string]any{"id": a.ID, "filename": a.Filename, "size": len(a.Data), "content_type": a.ContentType,
			"url":       "https://cdn.discordapp.com/attachments/" + m.ChannelID + "/" + a.ID + "/" + a.Filename,
			"proxy_url": "https://media.discordapp.net/attachments/" + m.ChannelID + "/" + a.ID + "/" + a.Filename}
		if a.URL != "" {
			atts[i].(map[string]any)["url"], atts[i].(map[string]any)["proxy_url"] = a.URL, a.URL
		}
	}
	w["attachments"] = atts
	if len(m.Reactions) > 0 {
		w["reactions"] = reactionsWire(m.Reactions)
	}
	if m.Webhook != "" {
		w["webhook_id"] = m.Webhook
		w["application_id"] = m.Webhook
	}
	return w
}

func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 || string(r) == "null" {
		return json.RawMessage("[]")
	}
	return r
}

// Interaction types.
const (
	InteractionCommand   = 2
	InteractionComponent = 3
	InteractionModal     = 5
)

// Interaction is an interaction the fake dispatched, with how the bot
// answered it.
type Interaction struct {
	ID        string
	Token     string
	Type      int
	ChannelID string
	GuildID   string
	Member    Member
	// MessageID is the message whose component was used (components and
	// modal submits from a component).
	MessageID string
	Data      json.RawMessage
	Created   time.Time

	// Acked is set once the initial response (callback) was accepted.
	Acked bool
	// AckedAfter is the time from dispatch to the accepted callback.
	AckedAfter time.Duration
	// ResponseType is the callback type (4, 5, 6, 7 or 9).
	ResponseType int
	// ResponseFlags are the flags of the callback data (64: ephemeral).
	ResponseFlags int
	// OriginalID is the message that holds the response (@original).
	OriginalID string
	// Modal is the modal the bot opened (type 9), as sent.
	Modal json.RawMessage
	// FollowUps are IDs of follow-up messages.
	FollowUps []string
	// expired forces token expiry regardless of age.
	expired bool
}

// Edit is one accepted message edit, stamped when the fake received it.
type Edit struct {
	At        time.Time
	ChannelID string
	MessageID string
	Content   string
	// Components and Embeds are the message's components and embeds after
	// the edit.
	Components json.RawMessage
	Embeds     json.RawMessage
	// Via is "channel" (PATCH /channels/.../messages/...), "webhook"
	// (PATCH /webhooks/.../messages/...) or "interaction" (callback type 7).
	Via string
}

// File is an uploaded file part of a multipart request.
type File struct {
	Name        string
	ContentType string
	Data        []byte
}

// Record is one REST request the fake answered.
type Record struct {
	At     time.Time
	Method string
	// Path is the URL path, for example "/api/v9/channels/5/messages".
	Path   string
	Query  string
	Status int
	// Body is the JSON body (payload_json for multipart requests).
	Body  json.RawMessage
	Files []File
	// Auth is the Authorization header.
	Auth string
}

// embedText is the visible text of embeds JSON: titles, descriptions,
// field names and values, and footers, one per line.
func embedText(raw json.RawMessage) string {
	var es []embed
	if json.Unmarshal(rawOrEmpty(raw), &es) != nil {
		return ""
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Title, e.Description)
		for _, f := range e.Fields {
			out = append(out, f.Name, f.Value)
		}
		if e.Footer != nil {
			out = append(out, e.Footer.Text)
		}
	}
	return strings.Join(out, "\n")
}

// customIDs lists the custom_id of every component in components JSON.
func customIDs(raw json.RawMessage) []string {
	var rows []component
	if json.Unmarshal(rawOrEmpty(raw), &rows) != nil {
		return nil
	}
	var out []string
	for _, r := range rows {
		for _, c := range r.Components {
			if c.CustomID != nil {
				out = append(out, *c.CustomID)
			}
		}
	}
	return out
}

// EmbedText is the visible text of the message's embeds (decoded, so
// "<@id>" reads as sent rather than JSON-escaped).
func (m Message) EmbedText() string { return embedText(m.Embeds) }

// CustomIDs lists the custom_id of the message's buttons, in order.
func (m Message) CustomIDs() []string { return customIDs(m.Components) }

// EmbedText is the visible text of the edited message's embeds.
func (e Edit) EmbedText() string { return embedText(e.Embeds) }

// CustomIDs lists the custom_id of the edited message's buttons, in order.
func (e Edit) CustomIDs() []string { return customIDs(e.Components) }

// embedFooters lists the footer text of every embed that has one.
func embedFooters(raw json.RawMessage) []string {
	var es []embed
	if json.Unmarshal(rawOrEmpty(raw), &es) != nil {
		return nil
	}
	var out []string
	for _, e := range es {
		if e.Footer != nil {
			out = append(out, e.Footer.Text)
		}
	}
	return out
}

// EmbedFooters lists the footer text of the message's embeds that have
// one. Discord shows footers as plain text, without Markdown.
func (m Message) EmbedFooters() []string { return embedFooters(m.Embeds) }

// EmbedFooters lists the footer text of the edited message's embeds.
func (e Edit) EmbedFooters() []string { return embedFooters(e.Embeds) }
