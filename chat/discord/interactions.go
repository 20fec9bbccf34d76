package discord

import (
	"context"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/safetext"
)

// reasonInput is the custom_id of the reject modal's text input.
const reasonInput = "reason"

func (a *Adapter) onInteractionCreate(_ *discordgo.Session, ic *discordgo.InteractionCreate) {
	if ic.Interaction == nil {
		return // d did not decode (see onMessageCreate)
	}
	if !a.seenInters.Add(ic.ID, struct{}{}) {
		a.log.Info("dropped a replayed interaction", "interaction_id", ic.ID)
		return
	}
	r := &ireply{a: a, i: ic.Interaction, received: time.Now()}
	if !a.accept() {
		return
	}
	if !dataFits(ic.Interaction) {
		// discordgo's ApplicationCommandData and the like assert the data's
		// type and would panic (and end the bot) on a payload without it.
		go func() {
			defer a.inflight.Done()
			a.log.Warn("interaction without the data of its type; ignored", "interaction_id", ic.ID, "type", int(ic.Type))
			r.respond(a.ctx(), ephemeralMessage("I could not read this interaction; nothing was done."))
		}()
		return
	}
	go func() {
		defer a.inflight.Done()
		ctx := a.ctx()
		switch ic.Type {
		case discordgo.InteractionApplicationCommand:
			a.handleCommand(ctx, r)
		case discordgo.InteractionMessageComponent:
			a.handleButton(ctx, r)
		case discordgo.InteractionModalSubmit:
			a.handleModal(ctx, r)
		}
	}()
}

// dataFits reports whether i carries the data its type needs (the adapter
// ignores other types).
func dataFits(i *discordgo.Interaction) bool {
	var ok bool
	switch i.Type {
	case discordgo.InteractionApplicationCommand:
		_, ok = i.Data.(discordgo.ApplicationCommandInteractionData)
	case discordgo.InteractionMessageComponent:
		_, ok = i.Data.(discordgo.MessageComponentInteractionData)
	case discordgo.InteractionModalSubmit:
		_, ok = i.Data.(discordgo.ModalSubmitInteractionData)
	default:
		ok = true
	}
	return ok
}

func (a *Adapter) handleCommand(ctx context.Context, r *ireply) {
	cmd := toCommand(r.i.ApplicationCommandData())
	// Whether the answer is private is the core's to say (Reply.Ephemeral),
	// and only once it has run: every command can end in a private refusal
	// or failure. A deferral's visibility cannot change later, so it is
	// private: a public "thinking…" that turned into a private answer
	// would flash in the channel and vanish. A public answer replaces the
	// private placeholder (see ireply.viaWebhook).
	r.deferAnswer(ctx, true)
	th, err := a.interactionThread(ctx, r.i)
	if err != nil {
		a.log.Error("command: channel lookup failed", "interaction_id", r.i.ID, "err", err)
		r.answer(ctx, chat.Reply{Text: "I could not look this channel up; try again in a moment.", Ephemeral: true})
		return
	}
	u := r.user()
	if u.ID == "" || th.Channel == "" {
		// Discord always says who and where; a payload that does not is
		// malformed, and a command from nobody, or for no place, must
		// reach no session (the gateway fuzzer sent one).
		a.log.Warn("command without a user or a channel; ignored", "interaction_id", r.i.ID, "command", cmd.Name)
		r.answer(ctx, chat.Reply{Text: "I could not tell who sent this command, or where; nothing was done.", Ephemeral: true})
		return
	}
	if err := a.cfg.Authorize(u, th); err != nil {
		a.log.Info("command refused", "command", cmd.Name, "user_id", u.ID, "reason", err)
		r.answer(ctx, chat.Reply{Text: chat.UserMessage(err), Ephemeral: true})
		return
	}
	rep, err := a.core.HandleCommand(ctx, a, th, u, cmd)
	if err != nil {
		a.log.Error("handle command", "command", cmd.Name, "thread_id", th.ID(), "err", err)
	}
	r.answer(ctx, rep)
}

func (a *Adapter) handleButton(ctx context.Context, r *ireply) {
	action, value, err := ParseCustomID(r.i.MessageComponentData().CustomID)
	if err != nil {
		r.respond(ctx, ephemeralMessage("This button is not one I know; use the buttons on the latest status message."))
		return
	}
	u := r.user()
	if err := a.quickAuthorize(u, r.i); err != nil {
		r.respond(ctx, ephemeralMessage(chat.UserMessage(err)))
		return
	}
	if action == chat.ActionViewOutput || action == chat.ActionViewCall {
		a.viewOutput(ctx, r, chat.Action{ID: action, Value: value, User: u})
		return
	}
	if action == chat.ActionReject {
		// Ask who may decide before the modal: a user who may not would
		// otherwise type a reason only to be refused on submit.
		if refusal := a.mayDecide(ctx, r, chat.Action{ID: action, Value: value, User: u}); refusal != "" {
			r.respond(ctx, ephemeralMessage(refusal))
			return
		}
		// A modal must be the first answer; the decision comes with its
		// submit, which carries this custom_id back.
		r.respond(ctx, rejectModal(r.i.MessageComponentData().CustomID))
		return
	}
	// Click: every replica receives this interaction, and its ID tells the
	// session that the copies are one click.
	a.decideThenAck(ctx, r, chat.Action{ID: action, Value: value, User: u, Click: r.i.ID})
}

// decideThenAck decides act and acknowledges the interaction once the
// decision has reached the session, or after AckWithin if that takes
// longer (the decision goes on). A bot that dies before the decision so
// leaves the click unacknowledged: Discord shows the user that the
// application did not respond, where an early acknowledgement showed a
// click accepted that decided nothing.
func (a *Adapter) decideThenAck(ctx context.Context, r *ireply, act chat.Action) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.decide(ctx, r, act)
	}()
	t := time.NewTimer(a.cfg.AckWithin)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
	r.ackUpdate(ctx)
	<-done
}

// modalInputs is, for each action whose button opens a modal, the text
// input that modal's submit must carry. A submit without it (a form of
// another shape, as an older bot version opened) decides nothing.
var modalInputs = map[string]string{chat.ActionReject: reasonInput}

// handleModal answers a modal submit. Every path ends in an answer: a
// submit from a button's modal is acknowledged with a deferred update of
// the button's message (the status card then shows the decision), but one
// without a message can only be deferred with a private "thinking…",
// which stays until it is replaced.
func (a *Adapter) handleModal(ctx context.Context, r *ireply) {
	data := r.i.ModalSubmitData()
	if r.i.Message == nil {
		r.deferAnswer(ctx, true)
	}
	action, value, err := ParseCustomID(data.CustomID)
	input, known := modalInputs[action]
	if err != nil || !known {
		r.ackUpdate(ctx)
		r.answer(ctx, chat.Reply{Text: "This form is not one I know; nothing was decided. Use the buttons on the latest status message.", Ephemeral: true})
		return
	}
	reason, ok := modalValue(data, input)
	if !ok {
		a.log.Warn("modal submit without its input", "interaction_id", r.i.ID, "action", action, "input", input)
		r.ackUpdate(ctx)
		r.answer(ctx, chat.Reply{Text: "This form came back without its " + input + " field, so nothing was decided. Click the button on the latest status message again for a fresh form.", Ephemeral: true})
		return
	}
	// A submit from a button's modal is acknowledged with a deferred
	// update of the button's message once decided; one without a message
	// was deferred above, and ackUpdate does nothing.
	a.decideThenAck(ctx, r, chat.Action{ID: action, Value: value, Reason: reason, User: r.user(), Click: r.i.ID})
}

// decider is the core's pre-check of who may decide an approval
// (chat.Core.MayDecide): "" or the refusal to show.
type decider interface {
	MayDecide(ctx context.Context, a chat.Action) string
}

// preCheckTimeout bounds the pre-check before a modal: the interaction
// must be answered within 3 s, and the modal has to be that answer.
const preCheckTimeout = 2 * time.Second

// mayDecide asks the core whether act's user may decide, before a modal
// is opened. When the thread or the core cannot tell in time, it lets the
// click through: the core and the workflow still check on submit.
func (a *Adapter) mayDecide(ctx context.Context, r *ireply, act chat.Action) string {
	d, ok := a.core.(decider)
	if !ok {
		return ""
	}
	cctx, cancel := context.WithTimeout(ctx, preCheckTimeout)
	defer cancel()
	th, err := a.interactionThread(cctx, r.i)
	if err != nil {
		a.log.Warn("reject pre-check: channel lookup failed; opening the modal", "interaction_id", r.i.ID, "err", err)
		return ""
	}
	if err := a.cfg.Authorize(act.User, th); err != nil {
		return chat.UserMessage(err)
	}
	act.Thread = th
	return d.MayDecide(cctx, act)
}

// decide hands an approval to the core, which answers refusals through
// act.Reply and re-renders the status message on success.
func (a *Adapter) decide(ctx context.Context, r *ireply, act chat.Action) {
	// An answer follows the interaction's acknowledgement (a follow-up
	// needs one), so the first answer sends it.
	answer := func(ctx context.Context, rep chat.Reply) {
		r.ackUpdate(ctx)
		if r.answeredElsewhere() {
			return
		}
		r.answer(ctx, rep)
	}
	th, err := a.interactionThread(ctx, r.i)
	if err != nil {
		a.log.Error("action: channel lookup failed", "interaction_id", r.i.ID, "err", err)
		answer(ctx, chat.Reply{Text: "I could not look this channel up; try again in a moment.", Ephemeral: true})
		return
	}
	if err := a.cfg.Authorize(act.User, th); err != nil {
		answer(ctx, chat.Reply{Text: chat.UserMessage(err), Ephemeral: true})
		return
	}
	if th.Thread == "" {
		// Cards with decisions live in session threads (or DMs); a click
		// in a plain channel names no session.
		answer(ctx, chat.Reply{Text: "This button is not in a session's thread; nothing was done.", Ephemeral: true})
		return
	}
	act.Thread = th
	act.Reply = func(ctx context.Context, text string) error {
		answer(ctx, chat.Reply{Text: text, Ephemeral: true})
		return nil
	}
	err = a.core.HandleAction(ctx, a, act)
	if err != nil {
		a.log.Error("handle action", "action", act.ID, "thread_id", th.ID(), "err", err)
	}
	if r.thinking() {
		// The core answers only refusals; a decision it took shows on the
		// status card, which a "thinking…" reply knows nothing of.
		text := decidedText[act.ID]
		switch {
		case err != nil:
			text = chat.UserMessage(err)
		case text == "":
			text = "Done."
		}
		answer(ctx, chat.Reply{Text: text, Ephemeral: true})
	}
}

// decidedText confirms a decision that came through a private deferred
// response (a modal submit without a message).
var decidedText = map[string]string{
	chat.ActionApprove:       "Approved; the status message shows it.",
	chat.ActionApproveAlways: "Approved (always); the status message shows it.",
	chat.ActionReject:        "Rejected; the agent is told, with your reason if you gave one.",
}

// quickAuthorize refuses clicks it can refuse without network calls: the
// user, roles and guild, and the channel when it is cached.
func (a *Adapter) quickAuthorize(u chat.User, i *discordgo.Interaction) error {
	cfg := a.cfg
	th := chat.Thread{Platform: Platform, Workspace: i.GuildID, Channel: i.ChannelID, Thread: i.ChannelID}
	if ci, ok := a.cachedChannel(i.ChannelID); ok {
		th = location(i.GuildID, ci)
	} else {
		cfg.AllowedChannels = nil // checked after the acknowledgement
	}
	return cfg.Authorize(u, th)
}

// interactionThread is the session location of an interaction's channel.
func (a *Adapter) interactionThread(ctx context.Context, i *discordgo.Interaction) (chat.Thread, error) {
	if i.GuildID == "" {
		return location("", chanInfo{ID: i.ChannelID}), nil
	}
	ci, err := a.channel(ctx, i.ChannelID)
	if err != nil {
		return chat.Thread{}, err
	}
	return location(i.GuildID, ci), nil
}

func ephemeralMessage(text string) *discordgo.InteractionResponse {
	return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: clampPlain(safetext.Text(text), MaxContent), Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noMentions()}}
}

func rejectModal(customID string) *discordgo.InteractionResponse {
	return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: &discordgo.InteractionResponseData{
		CustomID: customID,
		Title:    "Reject this command",
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.TextInput{CustomID: reasonInput, Label: "Why? (the agent is told)", Style: discordgo.TextInputParagraph,
				Placeholder: "Optional", MaxLength: 1000},
		}}},
	}}
}

// modalValue is the value of a modal's text input, and whether the submit
// carries that input at all (an optional input left empty comes back with
// an empty value).
func modalValue(d discordgo.ModalSubmitInteractionData, id string) (string, bool) {
	for _, c := range d.Components {
		row, ok := c.(*discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, rc := range row.Components {
			if ti, ok := rc.(*discordgo.TextInput); ok && ti.CustomID == id {
				return ti.Value, true
			}
		}
	}
	return "", false
}
