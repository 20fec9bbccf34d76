package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
)

// Reject modal identifiers.
const (
	rejectCallback = "sandbot_reject"
	reasonBlock    = "reason"
	reasonAction   = "reason_input"
)

// rejectMeta travels in the reject modal's private_metadata: everything
// needed to answer the approval when the modal is submitted, even by
// another replica after a restart.
type rejectMeta struct {
	Value   string `json:"v"`
	Team    string `json:"w"`
	Channel string `json:"c"`
	Thread  string `json:"t"`
	Action  string `json:"a"`
}

// onInteraction handles block_actions, view_submission and message
// shortcuts. It runs after the ack.
func (a *Adapter) onInteraction(ctx context.Context, cb slackgo.InteractionCallback) error {
	if cb.User.ID == "" {
		// Slack names who acted in every interaction: without a user
		// nobody can be authorized or answered, so nothing is done.
		return fmt.Errorf("slack: a %q interaction names no user; ignored", cb.Type)
	}
	switch cb.Type {
	case slackgo.InteractionTypeBlockActions:
		for _, act := range cb.ActionCallback.BlockActions {
			if err := a.onButton(ctx, cb, act); err != nil {
				return err
			}
		}
	case slackgo.InteractionTypeViewSubmission:
		if cb.View.CallbackID == rejectCallback {
			return a.onRejectSubmit(ctx, cb)
		}
	case slackgo.InteractionTypeMessageAction:
		if cb.CallbackID == ForkShortcut {
			return a.onForkShortcut(ctx, cb)
		}
	}
	return nil
}

// clickThread is the session thread of a clicked message.
func (a *Adapter) clickThread(cb slackgo.InteractionCallback) chat.Thread {
	channel := cb.Channel.ID
	if channel == "" {
		channel = cb.Container.ChannelID
	}
	thread := cb.Message.ThreadTimestamp
	if thread == "" {
		thread = cb.Container.ThreadTs
	}
	if thread == "" {
		thread = cb.Message.Timestamp
	}
	if thread == "" {
		thread = cb.Container.MessageTs
	}
	return a.thread(cb.Team.ID, channel, thread)
}

// clickUser is who clicked, shared or submitted, named by their display
// name (the payload's username if Slack cannot say).
func (a *Adapter) clickUser(ctx context.Context, cb slackgo.InteractionCallback) chat.User {
	name := cb.User.Name
	if name == "" {
		name = cb.User.Username
	}
	return a.user(ctx, cb.User.ID, name)
}

// onButton turns a button click into a chat.Action. Reject first asks for
// an optional reason in a modal; the submission completes the action.
func (a *Adapter) onButton(ctx context.Context, cb slackgo.InteractionCallback, act *slackgo.BlockAction) error {
	th := a.clickThread(cb)
	reply := func(ctx context.Context, text string) error {
		return a.ephemeral(ctx, th.Channel, th.Thread, cb.User.ID, text)
	}
	if !a.allowedUser(cb.User.ID) {
		return reply(ctx, "You are not on this bot's list of allowed users.")
	}
	user := a.clickUser(ctx, cb)
	id := ActionIDOf(act.ActionID)
	action := chat.Action{ID: id, Value: act.Value, User: user, Thread: th, Reply: reply, Click: clickID(cb, act)}
	if id == chat.ActionViewOutput || id == chat.ActionViewCall {
		return a.onViewOutput(ctx, cb, action)
	}
	if !located(th) {
		return fmt.Errorf("slack: a click on %q names no message to act in; ignored", act.ActionID)
	}
	if d, ok := a.core.(decider); ok && id == chat.ActionReject {
		// Ask who may decide before the modal: a user who may not would
		// otherwise type a reason only to be refused on submit.
		if refusal := d.MayDecide(ctx, action); refusal != "" {
			return reply(ctx, refusal)
		}
	}
	if id == chat.ActionReject && cb.TriggerID != "" {
		err := a.openRejectModal(ctx, cb.TriggerID, rejectMeta{Value: act.Value, Team: th.Workspace, Channel: th.Channel, Thread: th.Thread, Action: id})
		if err == nil {
			return nil
		}
		// The trigger is only valid for 3 s; reject without a reason rather
		// than lose the click.
		a.log.Warn("slack: reject modal failed; rejecting without a reason", "thread_id", th.ID(), "err", err)
	}
	return a.core.HandleAction(ctx, a, action)
}

// clickID is the identity of a click (chat.Action.Click): its payload's
// trigger ID, the same in every delivery of the payload (a retry Slack
// sends when an acknowledgement is late may reach another replica), or the
// action's timestamp where there is none.
func clickID(cb slackgo.InteractionCallback, act *slackgo.BlockAction) string {
	if cb.TriggerID != "" {
		return cb.TriggerID
	}
	return act.ActionTs
}

// located reports whether th names a place to act in: a channel and a
// thread. Slack's payloads always do; one that does not is malformed.
func located(th chat.Thread) bool { return th.Channel != "" && th.Thread != "" }

// decider is the core's pre-check of who may decide an approval
// (chat.Core.MayDecide): "" or the refusal to show.
type decider interface {
	MayDecide(ctx context.Context, a chat.Action) string
}

func (a *Adapter) openRejectModal(ctx context.Context, trigger string, meta rejectMeta) error {
	md, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	if len(md) > 3000 {
		return fmt.Errorf("slack: reject modal: metadata is %d bytes, Slack allows 3000", len(md))
	}
	input := slackgo.NewPlainTextInputBlockElement(plain("Optional: why, and what to do instead"), reasonAction).
		WithMultiline(true).WithMaxLength(2000)
	block := slackgo.NewInputBlock(reasonBlock, plain("Reason for the agent"), nil, input)
	block.Optional = true
	view := slackgo.ModalViewRequest{
		Type:            slackgo.VTModal,
		Title:           plain("Reject command"),
		Submit:          plain("Reject"),
		Close:           plain("Cancel"),
		CallbackID:      rejectCallback,
		PrivateMetadata: string(md),
		Blocks: slackgo.Blocks{BlockSet: []slackgo.Block{
			slackgo.NewSectionBlock(mrkdwn("The agent will be told the command was rejected, with your reason if you give one."), nil, nil),
			block,
		}},
	}
	return a.call(ctx, "views.open", func(ctx context.Context) error {
		_, err := a.api.OpenViewContext(ctx, trigger, view)
		return err
	})
}

// onRejectSubmit completes a rejection from the modal.
func (a *Adapter) onRejectSubmit(ctx context.Context, cb slackgo.InteractionCallback) error {
	var meta rejectMeta
	if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil {
		return fmt.Errorf("slack: reject modal: bad private_metadata: %w", err)
	}
	reason := ""
	if cb.View.State != nil {
		reason = strings.TrimSpace(cb.View.State.Values[reasonBlock][reasonAction].Value)
	}
	th := a.thread(meta.Team, meta.Channel, meta.Thread)
	if !located(th) {
		return errors.New("slack: reject modal: private_metadata names no thread; ignored")
	}
	user := a.clickUser(ctx, cb)
	return a.core.HandleAction(ctx, a, chat.Action{
		ID: chat.ActionReject, Value: meta.Value, Reason: reason, User: user, Thread: th, Click: cb.TriggerID,
		Reply: func(ctx context.Context, text string) error {
			return a.ephemeral(ctx, th.Channel, th.Thread, user.ID, text)
		},
	})
}

// onForkShortcut runs /fork on the thread of the message the shortcut was
// used on.
func (a *Adapter) onForkShortcut(ctx context.Context, cb slackgo.InteractionCallback) error {
	th := a.clickThread(cb)
	if !located(th) {
		return errors.New("slack: the fork shortcut names no message; ignored")
	}
	if !a.allowedUser(cb.User.ID) {
		return a.respond(ctx, cb.ResponseURL, chat.Reply{Text: "You are not on this bot's list of allowed users.", Ephemeral: true})
	}
	user := a.clickUser(ctx, cb)
	cmd, _, err := chat.ParseCommand("/" + chat.CmdFork)
	if err != nil {
		return err
	}
	r, err := a.core.HandleCommand(ctx, a, th, user, cmd)
	return a.deliver(ctx, th, cb.ResponseURL, r, err)
}

// deliver shows a command's reply: ephemeral replies through the
// response_url (only the user sees them), others in the session thread.
func (a *Adapter) deliver(ctx context.Context, th chat.Thread, responseURL string, r chat.Reply, cmdErr error) error {
	var err error
	switch {
	case !r.Ephemeral && th.Thread != "" && r.Card != nil:
		_, err = a.Post(ctx, th, *r.Card)
	case !r.Ephemeral && th.Thread != "" && r.Text != "":
		_, err = a.PostText(ctx, th, r.Text)
	default:
		err = a.respond(ctx, responseURL, r)
	}
	if cmdErr != nil {
		return cmdErr
	}
	return err
}

// permalinkRe matches a Slack message link: …/archives/<channel>/p<digits>.
var permalinkRe = regexp.MustCompile(`/archives/([A-Z0-9]+)/p(\d{10})(\d{6})`)

// tsRe matches a bare thread ts, 1700000000.000100.
var tsRe = regexp.MustCompile(`^\d{10}\.\d{6}$`)

// sessionArg finds a session named by the last word of a channel-level
// command (a thread link as /sandbot sessions lists them, or a thread ts)
// and returns it with the text before it.
func sessionArg(text, channel string) (ts, ch, rest string) {
	text = strings.TrimSpace(text)
	cut := strings.LastIndexAny(text, " \t\n")
	last := strings.Trim(text[cut+1:], "<>")
	if i := strings.IndexByte(last, '|'); i >= 0 {
		last = last[:i]
	}
	rest = strings.TrimSpace(text[:max(cut, 0)])
	if m := permalinkRe.FindStringSubmatch(last); m != nil {
		ts = m[2] + "." + m[3]
		if u, err := url.Parse(last); err == nil && tsRe.MatchString(u.Query().Get("thread_ts")) {
			ts = u.Query().Get("thread_ts")
		}
		return ts, m[1], rest
	}
	if tsRe.MatchString(last) {
		return last, channel, rest
	}
	return "", channel, text
}

// channelCommands may run at channel level without naming a session.
var channelCommands = map[string]bool{chat.CmdHelp: true, chat.CmdSessions: true}

// onSlashCommand handles "/sandbot <command> [thread link]". Slack does not
// deliver slash commands typed in threads, so commands that act on one
// session take its thread link (or ts) as the last argument; in a thread,
// users mention the bot instead ("@sandbot /stop").
func (a *Adapter) onSlashCommand(ctx context.Context, sc slackgo.SlashCommand) error {
	reply := func(text string) error {
		return a.respond(ctx, sc.ResponseURL, chat.Reply{Text: text, Ephemeral: true})
	}
	if sc.UserID == "" || sc.ChannelID == "" {
		return fmt.Errorf("slack: slash command %q names no user or channel; ignored", sc.Command)
	}
	if !a.allowedUser(sc.UserID) {
		return reply("You are not on this bot's list of allowed users.")
	}
	ts, channel, text := sessionArg(sc.Text, sc.ChannelID)
	if text == "" {
		text = chat.CmdHelp
	}
	if !strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "!") {
		text = "/" + text
	}
	cmd, ok, err := chat.ParseCommand(text)
	switch {
	case !ok:
		return reply(fmt.Sprintf("Usage: `%s <command> [thread link]`; try `%s help`.", sc.Command, sc.Command))
	case err != nil:
		return reply(chat.UserMessage(err) + fmt.Sprintf("\nTry `%s help`.", sc.Command))
	}
	if ts == "" && !channelCommands[cmd.Name] {
		return reply(fmt.Sprintf("`/%s` acts on one session. In its thread, mention me: `@bot /%s`. Here, name the session by its thread link: `%s %s <thread link>` (see `%s sessions`).",
			cmd.Name, cmd.Name, sc.Command, cmd.Name, sc.Command))
	}
	th := a.thread(sc.TeamID, channel, ts)
	user := a.user(ctx, sc.UserID, sc.UserName)
	r, err := a.core.HandleCommand(ctx, a, th, user, cmd)
	return a.deliver(ctx, th, sc.ResponseURL, r, err)
}
