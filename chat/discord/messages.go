package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

// Discord JSON error codes the adapter reacts to.
const (
	codeMissingPermissions = 50013
	codeThreadExists       = 160004
	codeInvalidToken       = 50027
	codeUnknownWebhook     = 10015
	codeUnknownInteraction = 10062
	codeAlreadyAcked       = 40060
)

// chanInfo is what routing needs to know about a channel.
type chanInfo struct {
	ID      string
	Type    discordgo.ChannelType
	GuildID string
	Parent  string
	Owner   string
}

func (c chanInfo) thread() bool {
	switch c.Type {
	case discordgo.ChannelTypeGuildPublicThread, discordgo.ChannelTypeGuildPrivateThread, discordgo.ChannelTypeGuildNewsThread:
		return true
	}
	return false
}

func infoOf(ch *discordgo.Channel) chanInfo {
	return chanInfo{ID: ch.ID, Type: ch.Type, GuildID: ch.GuildID, Parent: ch.ParentID, Owner: ch.OwnerID}
}

// remember caches a channel the adapter learned about.
func (a *Adapter) remember(ch *discordgo.Channel) {
	if ch != nil && ch.ID != "" {
		a.chans.Put(ch.ID, infoOf(ch))
	}
}

func (a *Adapter) onThreadCreate(_ *discordgo.Session, t *discordgo.ThreadCreate) {
	// Only a thread: a THREAD_CREATE naming a channel of another type would
	// make the adapter route that channel's messages and clicks as if it
	// were no thread.
	if t.Channel != nil && t.IsThread() {
		a.remember(t.Channel)
	}
}

// cachedChannel looks a channel up without network calls.
func (a *Adapter) cachedChannel(id string) (chanInfo, bool) {
	if c, ok := a.chans.Get(id); ok {
		return c, true
	}
	if a.s.State != nil {
		if ch, err := a.s.State.Channel(id); err == nil {
			a.remember(ch)
			return infoOf(ch), true
		}
	}
	return chanInfo{}, false
}

// channel looks a channel up: cache, gateway state, then one REST call.
func (a *Adapter) channel(ctx context.Context, id string) (chanInfo, error) {
	if c, ok := a.cachedChannel(id); ok {
		return c, nil
	}
	ch, err := a.s.Channel(id, discordgo.WithContext(ctx))
	if err != nil {
		return chanInfo{}, fmt.Errorf("discord: get channel %s: %w", id, err)
	}
	a.remember(ch)
	return infoOf(ch), nil
}

// location is the session location of a channel: a DM, a thread, or (for
// a plain channel) the channel with no thread yet.
func location(guildID string, c chanInfo) chat.Thread {
	switch {
	case guildID == "":
		return chat.Thread{Platform: Platform, Channel: c.ID, Thread: c.ID}
	case c.thread():
		return chat.Thread{Platform: Platform, Workspace: guildID, Channel: c.Parent, Thread: c.ID}
	}
	return chat.Thread{Platform: Platform, Workspace: guildID, Channel: c.ID}
}

func (a *Adapter) onMessageCreate(_ *discordgo.Session, m *discordgo.MessageCreate) {
	// discordgo hands on an event whose d did not decode (d: null leaves
	// no message at all); this runs on its read loop, where a panic would
	// end the bot. A message without an ID or a channel cannot be deduped
	// or answered.
	if m.Message == nil || m.ID == "" || m.ChannelID == "" || m.Author == nil || m.Author.Bot || m.Author.ID == a.bot() || m.WebhookID != "" {
		return
	}
	if m.Type != discordgo.MessageTypeDefault && m.Type != discordgo.MessageTypeReply {
		return
	}
	if !a.seenMsgs.Add(m.ID, struct{}{}) {
		a.log.Info("dropped a replayed message", "event_id", m.ID)
		return
	}
	if !a.accept() {
		return
	}
	msg := m.Message
	a.queues.do(a.queueKey(msg), func() {
		defer a.inflight.Done()
		a.handleMessage(a.ctx(), msg)
	})
}

// queueKey is the queue a message waits in. The messages of a thread or
// DM are handled one at a time, in order, as their session must see them.
// A mention in a plain channel starts a session of its own (a thread from
// that message), so it waits for nothing but itself: with one queue per
// channel every new session of a busy channel waited for the ones before
// it to reach their workflows (the chaos suite's load mode: 200 mentions
// in one channel, the last handed on ten minutes after it was sent).
func (a *Adapter) queueKey(m *discordgo.Message) string {
	if m.GuildID != "" {
		if ci, ok := a.cachedChannel(m.ChannelID); ok && !ci.thread() {
			return m.ChannelID + "/" + m.ID
		}
	}
	return m.ChannelID
}

// handleMessage routes one user message (see the package comment).
func (a *Adapter) handleMessage(ctx context.Context, m *discordgo.Message) {
	bot := a.bot()
	mentioned := false
	for _, u := range m.Mentions {
		mentioned = mentioned || u.ID == bot
	}
	var th chat.Thread
	addressed := false
	if m.GuildID == "" {
		if a.cfg.DisableDMs {
			return
		}
		th, addressed = location("", chanInfo{ID: m.ChannelID}), true
	} else {
		ci, err := a.channel(ctx, m.ChannelID)
		if err != nil {
			if mentioned {
				a.log.Error("message: channel lookup failed", "event_id", m.ID, "channel", m.ChannelID, "err", err)
			}
			return
		}
		th = location(m.GuildID, ci)
		// In the bot's own threads every readable message is for the bot;
		// without MESSAGE_CONTENT only mentions carry text.
		readable := strings.TrimSpace(m.Content) != "" || len(m.Attachments) > 0
		addressed = mentioned || (ci.thread() && ci.Owner == bot && readable)
	}
	if !addressed {
		return
	}
	u := userOf(m.Author, m.Member)
	log := a.log.With("event_id", m.ID, "user_id", u.ID)
	if err := a.cfg.Authorize(u, th); err != nil {
		log.Info("message refused", "reason", err)
		a.replyTo(ctx, m, chat.UserMessage(err))
		return
	}
	text := messageText(m, bot)
	files := attachments(m)
	title := text
	if title == "" && len(files) > 0 {
		title = files[0].Name
	}
	if th.Thread == "" && title != "" {
		t, err := a.openThread(ctx, m, title)
		if err != nil {
			log.Error("open session thread failed", "channel", m.ChannelID, "err", err)
			a.replyTo(ctx, m, threadFailure(err))
			return
		}
		th.Thread = t
	}
	var past []chat.ContextLine
	if mentioned && m.GuildID != "" && th.Thread == m.ChannelID && a.contextSent.Add(th.Thread, struct{}{}) {
		if ci, err := a.channel(ctx, m.ChannelID); err == nil && ci.thread() && ci.Owner != bot {
			// A thread someone else started: what was said before the
			// bot was mentioned goes into the session's first prompt.
			past = a.threadContext(ctx, m.ChannelID, m.ID, bot)
		}
	}
	err := a.core.HandleMessage(ctx, a, chat.Message{EventID: m.ID, Ref: m.ID, Thread: th, User: u, Text: text, Admin: a.cfg.approver(u.Roles), Context: past, Files: files})
	if err != nil {
		log.Error("handle message", "thread_id", th.ID(), "err", err)
	}
}

// openThread starts the session thread from the mentioning message. A
// replayed message finds its thread already made: Discord gives a thread
// started from a message that message's ID.
func (a *Adapter) openThread(ctx context.Context, m *discordgo.Message, text string) (string, error) {
	title, _, _ := strings.Cut(text, "\n")
	name := clampPlain(oneLine(title), 100)
	if name == "" {
		name = "sandbot session"
	}
	ch, err := a.s.MessageThreadStartComplex(m.ChannelID, m.ID, &discordgo.ThreadStart{
		Name: name, AutoArchiveDuration: a.cfg.ThreadAutoArchive, Type: discordgo.ChannelTypeGuildPublicThread,
	}, discordgo.WithContext(ctx))
	if _, code := restCode(err); code == codeThreadExists {
		return m.ID, nil
	}
	if err != nil {
		return "", fmt.Errorf("discord: start thread from %s: %w", m.ID, err)
	}
	a.remember(ch)
	return ch.ID, nil
}

func threadFailure(err error) string {
	if _, code := restCode(err); code == codeMissingPermissions {
		return "I cannot open a thread here: I need the Create Public Threads and Send Messages in Threads permissions in this channel."
	}
	return "I could not open a thread for this; try again in a moment."
}

// replyTo answers a user's message in its channel (a refusal or a
// failure), logging if even that fails.
func (a *Adapter) replyTo(ctx context.Context, m *discordgo.Message, text string) {
	_, err := a.s.ChannelMessageSendComplex(m.ChannelID, &discordgo.MessageSend{
		Content: text, Reference: m.Reference(), AllowedMentions: noMentions(),
	}, discordgo.WithContext(ctx))
	if err != nil {
		a.log.Warn("reply failed", "channel", m.ChannelID, "err", err)
	}
}

// messageText is what the user said to the bot: mentions of the bot
// removed, attachments listed so the agent knows they exist.
func messageText(m *discordgo.Message, bot string) string {
	text := strings.NewReplacer("<@"+bot+">", "", "<@!"+bot+">", "").Replace(m.Content)
	return strings.TrimSpace(text)
}

// attachments describes a message's files for the worker, which downloads
// them from Discord's CDN (the URLs are signed; no credential is needed).
func attachments(m *discordgo.Message) []session.Attachment {
	var out []session.Attachment
	for _, at := range m.Attachments {
		if at == nil {
			continue
		}
		out = append(out, session.Attachment{Platform: Platform, ID: at.ID, Name: at.Filename, Size: int64(at.Size), MimeType: at.ContentType, URL: at.URL})
	}
	return out
}

// userOf is a chat user from a Discord user and, in guilds, their member
// object (whose roles become User.Roles, as role IDs).
func userOf(u *discordgo.User, mem *discordgo.Member) chat.User {
	if u == nil && mem != nil {
		u = mem.User
	}
	if u == nil {
		return chat.User{}
	}
	name := u.GlobalName
	if name == "" {
		name = u.Username
	}
	cu := chat.User{ID: u.ID, Name: name}
	if mem != nil {
		if mem.Nick != "" {
			cu.Name = mem.Nick
		}
		cu.Roles = append([]string(nil), mem.Roles...)
	}
	return cu
}

// restCode returns the HTTP status and Discord error code of a REST
// error (0, 0 for nil or other errors).
func restCode(err error) (status, code int) {
	var re *discordgo.RESTError
	if !errors.As(err, &re) {
		return 0, 0
	}
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	if re.Message != nil {
		code = re.Message.Code
	}
	return status, code
}

// threadContext is what a thread said before message id, oldest first,
// named by display name (the bot's own messages left out). A failure
// leaves it empty: the message still goes on.
func (a *Adapter) threadContext(ctx context.Context, channel, before, bot string) []chat.ContextLine {
	msgs, err := a.s.ChannelMessages(channel, chat.MaxContextLines, before, "", "", discordgo.WithContext(ctx))
	if err != nil {
		a.log.Warn("thread context unavailable", "channel", channel, "err", err)
		return nil
	}
	var out []chat.ContextLine
	for i := len(msgs) - 1; i >= 0; i-- { // Discord lists the newest first
		m := msgs[i]
		if m.Author == nil || m.Author.ID == bot || strings.TrimSpace(m.Content) == "" {
			continue
		}
		out = append(out, chat.ContextLine{User: userOf(m.Author, m.Member).Name, Text: m.Content})
	}
	return out
}
