package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// Discord in the chaos stack: the project's Discord fake (gateway and
// REST) in place of the Slack fake, keeping Discord's own rate limits
// (fakediscord.Budgets: 5 messages or edits per 5 s per thread and route,
// 50 requests a second per bot), and cmd/bot replicas configured for it
// through SANDBOT_DISCORD_*. Discord delivers every gateway event to
// every connected replica, so each user message and each click reaches
// both bots: the session deduplicates messages by ID and decisions by
// call, and the first answer to a click is the one Discord takes.

// PlatformDiscord and PlatformSlack name Config.Platform's values.
const (
	PlatformSlack   = "slack"
	PlatformDiscord = "discord"
)

// discordUser is the Discord user who starts every session (so may approve
// its calls).
var discordUser = fakediscord.Member{User: fakediscord.User{ID: "7100000000000000001", Username: "alice"}}

// discordFake is the Discord fake as a chatFake. Sessions start in the
// fake's default channel; each gets a thread of its own, started from the
// mention (Discord gives it the message's ID).
type discordFake struct{ f *fakediscord.Server }

// newDiscordFake starts the fake with Discord's budgets. It keeps the
// latest requests only: 200 sessions' thousands of edits are counted from
// its messages and violations, not from request bodies.
func newDiscordFake() discordFake {
	return discordFake{fakediscord.New(fakediscord.Options{Budgets: &fakediscord.Budgets{}, KeepRequests: 2000})}
}

// botEnv is what a cmd/bot replica needs to be Discord's bot.
func (p discordFake) botEnv() []string {
	return []string{
		"SANDBOT_DISCORD_TOKEN=" + p.f.Token(),
		"SANDBOT_DISCORD_APP_ID=" + p.f.AppID(),
		"SANDBOT_DISCORD_GUILD_ID=" + fakediscord.DefaultGuildID,
		"SANDBOT_DISCORD_ALLOWED_USERS=" + discordUser.User.ID,
		"SANDBOT_DISCORD_MESSAGE_CONTENT=true",
		"SANDBOT_DISCORD_API_BASE=" + p.f.URL(),
	}
}

func (p discordFake) post(_ context.Context, th chat.Thread, text string) (chat.Thread, string, func(context.Context), error) {
	where := th.Thread
	if where == "" {
		where = fakediscord.DefaultChannelID
		text = "<@" + p.f.AppID() + "> " + text
	}
	m, err := p.f.UserMessage(where, discordUser, text)
	if err != nil {
		return th, "", nil, fmt.Errorf("discord: send the user's message: %w", err)
	}
	if th.Thread == "" {
		th = chat.Thread{Platform: discord.Platform, Workspace: fakediscord.DefaultGuildID, Channel: fakediscord.DefaultChannelID, Thread: m.ID}
	}
	again := func(context.Context) { _ = p.f.Redispatch(m.ID) }
	return th, m.ID, again, nil
}

func (p discordFake) wait(ctx context.Context, cond func() bool) error {
	return p.f.Wait(ctx, "the chaos user's condition", cond)
}

func (p discordFake) botMessages(thread, since string) []botMessage {
	var out []botMessage
	for _, m := range p.f.Messages(thread) {
		if m.Author.ID != p.f.AppID() || m.Ephemeral() || (since != "" && !idLess(since, m.ID)) {
			continue
		}
		out = append(out, p.message(m, thread))
	}
	return out
}

func (p discordFake) message(m fakediscord.Message, thread string) botMessage {
	bm := botMessage{Ref: m.ID, Thread: thread, Text: discordText(m), Updated: m.Edited, Posted: m.Created}
	for _, id := range m.CustomIDs() {
		if action, value, err := discord.ParseCustomID(id); err == nil {
			bm.Buttons = append(bm.Buttons, button{Action: action, Value: value, raw: id})
		}
	}
	return bm
}

// discordText is a message as its reader sees it: content, then embeds.
func discordText(m fakediscord.Message) string {
	return strings.TrimSpace(m.Content + "\n" + m.EmbedText())
}

// idLess orders snowflakes (decimal, the fake's all of one length).
func idLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// mark: Discord's private replies are found by the click's interaction.
func (p discordFake) mark() int { return 0 }

func (p discordFake) reply(cw clickWait) (string, bool) {
	for _, m := range p.f.Messages(cw.thread) {
		if m.Interaction == cw.id && m.Author.ID == p.f.AppID() && !m.Loading() {
			if text := discordText(m); text != "" {
				return text, true
			}
		}
	}
	return "", false
}

func (p discordFake) click(_ context.Context, m botMessage, b button) (string, error) {
	id, err := p.f.ClickButton(m.Ref, discordUser, b.raw)
	if err != nil {
		return "", fmt.Errorf("discord: click %s: %w", b.raw, err)
	}
	return id, nil
}

func (p discordFake) acked(id string) bool {
	in, ok := p.f.Interaction(id)
	return ok && in.Acked
}

// records reads every session thread of the channel, and the bot messages
// deleted from them with when they were posted and deleted. Discord
// resends no event (the gateway has no acknowledgement), so Resent stays
// empty.
func (p discordFake) records() chatRecords {
	r := chatRecords{Platform: "Discord"}
	for _, th := range p.f.Threads(fakediscord.DefaultChannelID) {
		r.Bot = append(r.Bot, p.botMessages(th.ID, "")...)
		for _, m := range p.f.DeletedMessages(th.ID) {
			if m.Author.ID == p.f.AppID() && !m.Ephemeral() && !m.DeletedAt.IsZero() {
				bm := p.message(m, th.ID)
				bm.Deleted = m.DeletedAt
				r.Deleted = append(r.Deleted, bm)
			}
		}
	}
	for _, v := range p.f.Violations() {
		r.Violations = append(r.Violations, fmt.Sprintf("%s (%s): %s", v.Route, v.Scope, v.Detail))
	}
	return r
}

// startDiscord starts the Discord fake for the stack and returns the
// environment its bot replicas need.
func (s *stack) startDiscord() []string {
	d := newDiscordFake()
	s.discord, s.chat = d.f, d
	return d.botEnv()
}

// waitBotsConnected waits until every bot replica has its gateway (or
// Socket Mode) connection open.
func (s *stack) waitBotsConnected(ctx context.Context, bots int) error {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if s.discord != nil {
		if err := s.discord.Wait(wctx, "bots on the gateway", func() bool { return s.discord.Connected() >= bots }); err != nil {
			return fmt.Errorf("bots connecting to Discord: %w", err)
		}
		return nil
	}
	return s.waitSlackConnected(wctx, bots)
}
