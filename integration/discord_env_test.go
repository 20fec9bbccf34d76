package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/discord"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/botapp"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	"github.com/sandbot/sandbot/session"
)

// Roles of the Discord world the tests build: members may use the bot,
// approvers may also decide any approval.
const (
	discordMemberRole   = "9100000000000000001"
	discordApproverRole = "9100000000000000002"
)

// The users of the Discord tests. alice starts the sessions (so she owns
// them), bob may use the bot but not approve, carol may not use the bot at
// all, and dave holds the approver role.
var (
	discordAlice = fakediscord.Member{User: fakediscord.User{ID: "7100000000000000001", Username: "alice"}, Roles: []string{discordMemberRole}}
	discordBob   = fakediscord.Member{User: fakediscord.User{ID: "7100000000000000002", Username: "bob"}, Roles: []string{discordMemberRole}}
	discordCarol = fakediscord.Member{User: fakediscord.User{ID: "7100000000000000003", Username: "carol"}}
	discordDave  = fakediscord.Member{User: fakediscord.User{ID: "7100000000000000004", Username: "dave"}, Roles: []string{discordMemberRole, discordApproverRole}}
)

// discordWorlds numbers the guild and channel of each Discord test. Every
// fake numbers its threads and messages the same way, and session workflow
// IDs are platform:guild:channel:thread, so without a guild and channel of
// their own two tests (or a test and a session an earlier test left
// running on the shared server) would share workflow IDs.
var discordWorlds atomic.Int64

// discordEnv is a sandbot stack (worker, embedded Temporal, local sandbox,
// fake model) with a Discord bot built by internal/botapp from
// SANDBOT_DISCORD_* settings, exactly as cmd/bot builds it: a chat.Core
// over Temporal with Discord's budget and access rules, and the discord
// adapter, pointed at the wire-level Discord fake.
type discordEnv struct {
	t       testing.TB
	s       *stack
	f       *fakediscord.Server
	guild   string
	channel string
	// adapter adjusts the adapter's config after the environment's.
	adapter func(*discord.Config)
	bot     *discordBot
}

// discordBot is one running bot process: a core and its adapter.
type discordBot struct {
	core    *chat.Core
	a       *discord.Adapter
	b       *botapp.Bot
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// discordOptions adjust a discordEnv before its bot starts.
type discordOptions struct {
	fake  fakediscord.Options
	stack []stackOption
	// adapter adjusts the adapter's config (fields no variable sets, or a
	// test's own pacing).
	adapter func(*discord.Config)
}

func newDiscordEnv(t testing.TB, o discordOptions) *discordEnv {
	t.Helper()
	n := discordWorlds.Add(1)
	guild, channel := fmt.Sprintf("42%017d", n), fmt.Sprintf("52%017d", n)
	s := newStack(t, o.stack...)
	f := fakediscord.Start(t, o.fake)
	f.AddGuild(fakediscord.Guild{ID: guild, Name: "it guild", Roles: []fakediscord.Role{
		{ID: discordMemberRole, Name: "member"}, {ID: discordApproverRole, Name: "approver"},
	}})
	f.AddChannel(fakediscord.Channel{ID: channel, Type: fakediscord.ChannelText, GuildID: guild, Name: "dev"})

	// The Discord settings as an operator would write them for this guild.
	// The approver role reaches the workflow through config
	// (SANDBOT_DISCORD_APPROVER_ROLES goes into the session settings) and
	// the adapter alike, as in production.
	s.cfg.Discord = config.Discord{
		Token: f.Token(), AppID: f.AppID(), GuildID: guild,
		AllowedRoles:   []string{discordMemberRole, discordApproverRole},
		ApproverRoles:  []string{discordApproverRole},
		MessageContent: true, APIBase: f.URL(),
	}
	if err := s.cfg.Validate(config.RoleBot); err != nil {
		t.Fatalf("discord config: %v", err)
	}
	e := &discordEnv{t: t, s: s, f: f, guild: guild, channel: channel, adapter: o.adapter}
	e.startBot()
	return e
}

// startBot starts a bot (core and adapter) through internal/botapp and
// waits until it is ready: connected, commands registered, active turns
// resumed.
func (e *discordEnv) startBot() *discordBot {
	e.t.Helper()
	s := e.s
	bot, err := botapp.New(s.ctx, s.c, s.cfg, botapp.Options{Discord: e.adapter, Settings: settingsHook}, s.log)
	if err != nil {
		e.t.Fatalf("bot: %v", err)
	}
	if bot.Discord == nil {
		e.t.Fatal("bot: Discord is not enabled")
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &discordBot{core: bot.Core, a: bot.Discord, b: bot, cancel: cancel, done: make(chan error, 1)}
	go func() { b.done <- bot.RunPlatforms(ctx) }()
	e.t.Cleanup(func() { e.stopBot(b) })
	select {
	case <-b.a.Ready():
	case err := <-b.done:
		b.stopped = true
		bot.Close()
		e.t.Fatalf("discord adapter stopped before it was ready: %v", err)
	case <-time.After(waitTimeout):
		e.t.Fatal("discord adapter not ready")
	}
	e.bot = b
	return b
}

// stopBot stops a bot as a process exit would: the adapter closes the
// gateway, the core stops its watchers; turns keep running in Temporal.
func (e *discordEnv) stopBot(b *discordBot) {
	if b.stopped {
		return
	}
	b.stopped = true
	b.cancel()
	if err := <-b.done; err != nil {
		e.t.Errorf("discord adapter Run: %v", err)
	}
	b.b.Close()
}

// thread is the session location of a thread opened from message id.
func (e *discordEnv) thread(id string) chat.Thread {
	return chat.Thread{Platform: discord.Platform, Workspace: e.guild, Channel: e.channel, Thread: id}
}

// mention posts "@sandbot text" in the test's channel as u and returns the
// session thread the bot is expected to open from it.
func (e *discordEnv) mention(u fakediscord.Member, text string) chat.Thread {
	e.t.Helper()
	m, err := e.f.UserMessage(e.channel, u, "<@"+e.f.AppID()+"> "+text)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.thread(m.ID)
}

// say posts a message in a session thread as u (no mention: the bot reads
// every message in threads it owns).
func (e *discordEnv) say(th chat.Thread, u fakediscord.Member, text string) fakediscord.Message {
	e.t.Helper()
	m, err := e.f.UserMessage(th.Thread, u, text)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// wait blocks until cond holds on the fake's state.
func (e *discordEnv) wait(what string, cond func() bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := e.f.Wait(ctx, what, cond); err != nil {
		e.t.Fatal(err)
	}
}

// botMessages are the bot's visible messages in a channel or thread, in
// order (interaction responses included, ephemeral ones not).
func (e *discordEnv) botMessages(channelID string) []fakediscord.Message {
	var out []fakediscord.Message
	for _, m := range e.f.Messages(channelID) {
		if m.Author.ID == e.f.AppID() && !m.Ephemeral() {
			out = append(out, m)
		}
	}
	return out
}

// statusMessages are the bot's status cards in a thread: plain bot
// messages (not interaction responses) that carry an embed.
func (e *discordEnv) statusMessages(th chat.Thread) []fakediscord.Message {
	var out []fakediscord.Message
	for _, m := range e.botMessages(th.Thread) {
		if m.Interaction == "" && m.EmbedText() != "" {
			out = append(out, m)
		}
	}
	return out
}

// answers are the bot's plain text messages in a thread that are not
// interaction responses: final answers and late command answers.
func (e *discordEnv) answers(th chat.Thread) []fakediscord.Message {
	var out []fakediscord.Message
	for _, m := range e.botMessages(th.Thread) {
		if m.Interaction == "" && m.Webhook == "" && m.EmbedText() == "" && !isApprovalNotice(m.Content) {
			out = append(out, m)
		}
	}
	return out
}

// waitAnswer waits for a bot answer in the thread with exactly this
// content and returns it.
func (e *discordEnv) waitAnswer(th chat.Thread, content string) fakediscord.Message {
	e.t.Helper()
	var got fakediscord.Message
	e.wait(fmt.Sprintf("answer %q", content), func() bool {
		for _, m := range e.answers(th) {
			if m.Content == content {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// waitCard waits until the status message ref, as Discord now shows it,
// satisfies cond, and returns it.
func (e *discordEnv) waitCard(ref, what string, cond func(fakediscord.Message) bool) fakediscord.Message {
	e.t.Helper()
	var got fakediscord.Message
	e.wait(what, func() bool {
		m, ok := e.f.Message(ref)
		if ok && cond(m) {
			got = m
			return true
		}
		return false
	})
	return got
}

// waitTurn polls the session's turn state until cond holds. Unlike
// stack.waitState it decodes every answer into a fresh value, so fields
// an earlier poll saw (a pending approval) cannot linger in the result.
func (e *discordEnv) waitTurn(th chat.Thread, what string, cond func(session.TurnState) bool) session.TurnState {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last session.TurnState
	for time.Now().Before(deadline) {
		v, err := e.s.c.QueryWorkflow(e.s.ctx, th.ID(), "", session.QueryTurnState)
		if err == nil {
			var ts session.TurnState
			if err := v.Get(&ts); err == nil {
				if last = ts; cond(ts) {
					return ts
				}
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	e.t.Fatalf("timed out waiting for %s; last state: %s", what, dump(last))
	return last
}

// statusRef waits until the turn's status message is posted and recorded
// in the workflow, and returns its message ID.
func (e *discordEnv) statusRef(th chat.Thread, turn int) string {
	e.t.Helper()
	ts := e.waitTurn(th, fmt.Sprintf("status message of turn %d recorded", turn), func(ts session.TurnState) bool {
		return ts.Turn == turn && ts.StatusRef != ""
	})
	return ts.StatusRef
}

// approvalCard waits until the status message shows the approval buttons
// for a pending call and returns its custom_ids by action.
func (e *discordEnv) approvalCard(ref string) map[string]string {
	e.t.Helper()
	m := e.waitCard(ref, "approval buttons", func(m fakediscord.Message) bool {
		n := 0
		for _, id := range m.CustomIDs() {
			if a, _, _ := discord.ParseCustomID(id); a == chat.ActionApprove || a == chat.ActionApproveAlways || a == chat.ActionReject {
				n++
			}
		}
		return n == 3
	})
	ids := map[string]string{}
	for _, id := range m.CustomIDs() {
		action, _, err := discord.ParseCustomID(id)
		if err != nil {
			e.t.Fatalf("button custom_id %q: %v", id, err)
		}
		ids[action] = id
	}
	for _, a := range []string{chat.ActionApprove, chat.ActionApproveAlways, chat.ActionReject} {
		if ids[a] == "" {
			e.t.Fatalf("status card has no %s button: %v", a, m.CustomIDs())
		}
	}
	return ids
}

// click clicks a button on a message as u and returns the interaction ID.
func (e *discordEnv) click(ref string, u fakediscord.Member, customID string) string {
	e.t.Helper()
	id, err := e.f.ClickButton(ref, u, customID)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// interaction returns how the bot answered an interaction so far.
func (e *discordEnv) interaction(id string) fakediscord.Interaction {
	e.t.Helper()
	in, ok := e.f.Interaction(id)
	if !ok {
		e.t.Fatalf("unknown interaction %s", id)
	}
	return in
}

// waitAcked waits until the bot answered interaction id and returns it.
func (e *discordEnv) waitAcked(id string) fakediscord.Interaction {
	e.t.Helper()
	e.wait("interaction "+id+" acknowledged", func() bool { in, _ := e.f.Interaction(id); return in.Acked })
	return e.interaction(id)
}

// slash invokes a slash command in a thread as u.
func (e *discordEnv) slash(th chat.Thread, u fakediscord.Member, name string, opts ...fakediscord.CommandOption) string {
	e.t.Helper()
	id, err := e.f.SlashCommand(th.Thread, u, name, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// waitTokenExpired waits until Discord (the fake) refuses interaction id's
// token, probing it the way a bot would read its response.
func (e *discordEnv) waitTokenExpired(id string) {
	e.t.Helper()
	in := e.interaction(id)
	url := e.f.URL() + "/api/v9/webhooks/" + e.f.AppID() + "/" + in.Token + "/messages/@original"
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err != nil {
			e.t.Fatal(err)
		}
		var body struct {
			Code int `json:"code"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized && body.Code == fakediscord.CodeInvalidToken {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("the token of interaction %s never expired", id)
}

// discordMention is how Discord text mentions a member.
func discordMention(u fakediscord.Member) string { return "<@" + u.User.ID + ">" }

// waitDone waits until turn n of th has ended and its answer is recorded
// (the watcher has made its last edit and posted the answer).
func (e *discordEnv) waitDone(th chat.Thread, n int) session.TurnState {
	e.t.Helper()
	return e.waitTurn(th, fmt.Sprintf("turn %d finalized", n), func(ts session.TurnState) bool {
		return ts.Turn == n && done(ts) && ts.FinalRef != ""
	})
}

// discordHasLine reports whether an embed text has a line containing every part.
func discordHasLine(text string, parts ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// pinged returns the users the bot allowed a message it sent with this
// content to ping (its allowed_mentions.users), from the recorded request.
func (e *discordEnv) pinged(content string) []string {
	e.t.Helper()
	for _, r := range e.f.Requests() {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.Path, "/messages") {
			continue
		}
		var body struct {
			Content         string `json:"content"`
			AllowedMentions struct {
				Users []string `json:"users"`
			} `json:"allowed_mentions"`
		}
		if json.Unmarshal(r.Body, &body) == nil && body.Content == content {
			return body.AllowedMentions.Users
		}
	}
	e.t.Fatalf("no message with content %q was sent", content)
	return nil
}

// approvalIDs are the approval buttons' custom_ids among ids (a running
// turn's card also has Stop).
func approvalIDs(ids []string) []string {
	var out []string
	for _, id := range ids {
		if a, _, _ := discord.ParseCustomID(id); a == chat.ActionApprove || a == chat.ActionApproveAlways || a == chat.ActionReject {
			out = append(out, id)
		}
	}
	return out
}
