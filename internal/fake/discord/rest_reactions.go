package fakediscord

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
)

// MaxReactions is how many different emoji one message can carry.
const MaxReactions = 20

// Gateway intents of reaction events.
const (
	intentGuildMessageReactions  = 1 << 10
	intentDirectMessageReactions = 1 << 13
)

// Reaction is one emoji on a message and the users who added it, in the
// order they did.
type Reaction struct {
	// Emoji is the unicode emoji, or name:id for a custom one.
	Emoji string
	Users []string
	// Me is whether the bot is among Users (Discord's "me").
	Me bool
}

// ReactionEvent is one accepted reaction change, stamped when the fake
// received it.
type ReactionEvent struct {
	At        time.Time
	ChannelID string
	MessageID string
	Emoji     string
	UserID    string
	// Removed is false for an added reaction, true for a removed one.
	Removed bool
}

// customEmojiRE is how a custom emoji is named in a reaction route.
var customEmojiRE = regexp.MustCompile(`^[A-Za-z0-9_]{2,32}:\d{1,20}$`)

// validEmoji reports whether Discord would take e as a reaction: a custom
// emoji as name:id, or unicode emoji. A shortcode such as ":eyes:" or a
// word is Unknown Emoji, as on Discord. The unicode check is loose (any
// symbol, with keycap digits, #, * and joiners); Discord checks its list.
func validEmoji(e string) bool {
	if customEmojiRE.MatchString(e) {
		return true
	}
	symbol := false
	for _, r := range e {
		switch {
		case r == '#' || r == '*' || (r >= '0' && r <= '9'):
			// keycaps: "#️⃣", "1️⃣"
		case r == 0x20e3:
			symbol = true // the keycap that makes "#️⃣" an emoji
		case r == 0x200d || r == 0xfe0f || (r >= 0x1f3fb && r <= 0x1f3ff):
			// joiner, variation selector, skin tones
		case r > unicode.MaxASCII && (unicode.Is(unicode.So, r) || unicode.Is(unicode.Sk, r) || unicode.Is(unicode.Sm, r) ||
			unicode.Is(unicode.Regional_Indicator, r) || (r >= 0xe0020 && r <= 0xe007f)):
			symbol = true
		default:
			return false
		}
	}
	return symbol
}

// reactionTarget resolves the channel and message of a reaction route
// and answers Discord's errors for them. Callers hold s.mu; on failure it
// has written the response.
func (s *Server) reactionTarget(w http.ResponseWriter, r *http.Request) (*Channel, *Message, string) {
	c, ok := s.channels[r.PathValue("channel")]
	if !ok {
		writeError(w, http.StatusNotFound, CodeUnknownChannel, "Unknown Channel", nil)
		return nil, nil, ""
	}
	m, ok := s.messages[r.PathValue("message")]
	if !ok || m.ChannelID != c.ID || m.Deleted || m.Ephemeral() {
		writeError(w, http.StatusNotFound, CodeUnknownMessage, "Unknown Message", nil)
		return nil, nil, ""
	}
	emoji := r.PathValue("emoji")
	if !validEmoji(emoji) {
		writeError(w, http.StatusBadRequest, CodeUnknownEmoji, "Unknown Emoji", nil)
		return nil, nil, ""
	}
	return c, m, emoji
}

// handleAddReaction is PUT …/reactions/{emoji}/@me: the bot reacts. It is
// idempotent, as on Discord: reacting again changes nothing.
func (s *Server) handleAddReaction(w http.ResponseWriter, r *http.Request, _ *request) {
	s.mu.Lock()
	c, m, emoji := s.reactionTarget(w, r)
	if m == nil {
		s.mu.Unlock()
		return
	}
	i := slices.IndexFunc(m.Reactions, func(x Reaction) bool { return x.Emoji == emoji })
	switch {
	case i >= 0 && slices.Contains(m.Reactions[i].Users, s.opts.AppID):
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	case i < 0 && len(m.Reactions) >= MaxReactions:
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, CodeMaxReactions, "Maximum number of reactions reached (20)", nil)
		return
	case i < 0:
		m.Reactions = append(m.Reactions, Reaction{Emoji: emoji})
		i = len(m.Reactions) - 1
	}
	m.Reactions[i].Users = append(m.Reactions[i].Users, s.opts.AppID)
	m.Reactions[i].Me = true
	ev := s.reactionEvent(c, m, emoji, false)
	s.mu.Unlock()
	s.dispatchReaction("MESSAGE_REACTION_ADD", c, ev)
	w.WriteHeader(http.StatusNoContent)
}

// handleRemoveReaction is DELETE …/reactions/{emoji}/@me: the bot takes
// its reaction back. Removing a reaction the bot never added is 204 too.
func (s *Server) handleRemoveReaction(w http.ResponseWriter, r *http.Request, _ *request) {
	s.mu.Lock()
	c, m, emoji := s.reactionTarget(w, r)
	if m == nil {
		s.mu.Unlock()
		return
	}
	i := slices.IndexFunc(m.Reactions, func(x Reaction) bool { return x.Emoji == emoji })
	if i < 0 || !slices.Contains(m.Reactions[i].Users, s.opts.AppID) {
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	m.Reactions[i].Users = slices.DeleteFunc(m.Reactions[i].Users, func(u string) bool { return u == s.opts.AppID })
	m.Reactions[i].Me = false
	if len(m.Reactions[i].Users) == 0 {
		m.Reactions = slices.Delete(m.Reactions, i, i+1)
	}
	ev := s.reactionEvent(c, m, emoji, true)
	s.mu.Unlock()
	s.dispatchReaction("MESSAGE_REACTION_REMOVE", c, ev)
	w.WriteHeader(http.StatusNoContent)
}

// reactionEvent records a change by the bot. Callers hold s.mu.
func (s *Server) reactionEvent(c *Channel, m *Message, emoji string, removed bool) ReactionEvent {
	ev := ReactionEvent{At: time.Now(), ChannelID: c.ID, MessageID: m.ID, Emoji: emoji, UserID: s.opts.AppID, Removed: removed}
	s.reactions = append(s.reactions, ev)
	s.bump()
	return ev
}

// dispatchReaction sends MESSAGE_REACTION_ADD or _REMOVE to sessions with
// the reaction intent of the channel's kind.
func (s *Server) dispatchReaction(event string, c *Channel, ev ReactionEvent) {
	need := intentGuildMessageReactions
	if c.Type == ChannelDM {
		need = intentDirectMessageReactions
	}
	d := map[string]any{"user_id": ev.UserID, "channel_id": ev.ChannelID, "message_id": ev.MessageID, "emoji": emojiWire(ev.Emoji), "burst": false, "type": 0}
	if c.GuildID != "" {
		d["guild_id"] = c.GuildID
	}
	s.gw.dispatch(event, need, func(int) any { return d })
}

// emojiWire is Discord's partial emoji object for a reaction's emoji.
func emojiWire(e string) map[string]any {
	if name, id, ok := strings.Cut(e, ":"); ok && customEmojiRE.MatchString(e) {
		return map[string]any{"id": id, "name": name}
	}
	return map[string]any{"id": nil, "name": e}
}

// reactionsWire is a message's "reactions" array.
func reactionsWire(rs []Reaction) []any {
	out := make([]any, len(rs))
	for i, r := range rs {
		out[i] = map[string]any{
			"count": len(r.Users), "count_details": map[string]any{"burst": 0, "normal": len(r.Users)},
			"me": r.Me, "me_burst": false, "burst_colors": []any{},
			"emoji": emojiWire(r.Emoji),
		}
	}
	return out
}

// Reactions returns a message's reactions in the order their emoji were
// first added.
func (s *Server) Reactions(messageID string) []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[messageID]
	if !ok {
		return nil
	}
	return m.clone().Reactions
}

// ReactionEvents returns every accepted reaction change, in order.
func (s *Server) ReactionEvents() []ReactionEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ReactionEvent(nil), s.reactions...)
}
