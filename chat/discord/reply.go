package discord

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/safetext"
)

// ireply answers one interaction: the initial response, then edits of the
// deferred response or follow-ups while the token lives, then normal bot
// messages. Its methods are called from the interaction's goroutine only.
type ireply struct {
	a        *Adapter
	i        *discordgo.Interaction
	received time.Time
	// deferred is set once a type 5 response made a "thinking" message
	// (@original) that an answer can replace; ephemeral says whether it
	// is ephemeral. answered is set once answer ran.
	deferred, ephemeral, answered bool

	// ackMu guards acked: a decision's deferred update may be sent by the
	// deciding goroutine (before its first answer) or by the one waiting
	// out AckWithin, whichever comes first (see Adapter.decideThenAck).
	ackMu sync.Mutex
	acked bool
	// elsewhere is set when Discord refused the acknowledgement as already
	// sent: it delivers every interaction to every replica on the bot's
	// token, and another one answered this click first.
	elsewhere bool
}

// ackUpdate acknowledges a click with a deferred update of its message
// (the status card then shows the decision), once.
func (r *ireply) ackUpdate(ctx context.Context) {
	r.ackMu.Lock()
	defer r.ackMu.Unlock()
	if r.acked {
		return
	}
	r.acked = true
	err := r.a.s.InteractionRespond(r.i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}, discordgo.WithContext(ctx))
	if _, code := restCode(err); code == codeAlreadyAcked {
		r.elsewhere = true
		r.a.log.Info("interaction answered by another replica", "interaction_id", r.i.ID)
		return
	}
	if err != nil {
		r.a.log.Warn("interaction response failed", "interaction_id", r.i.ID, "type", discordgo.InteractionResponseDeferredMessageUpdate,
			"after", time.Since(r.received).String(), "err", err)
	}
}

// answeredElsewhere reports whether another replica acknowledged the
// interaction first (see elsewhere): the click is its to answer, and a
// reply from this one (the session's "already decided" for the decision
// the other one just made) would reach the user after every click.
func (r *ireply) answeredElsewhere() bool {
	r.ackMu.Lock()
	defer r.ackMu.Unlock()
	return r.elsewhere
}

func (r *ireply) user() chat.User {
	if r.i.Member != nil {
		return userOf(r.i.Member.User, r.i.Member)
	}
	return userOf(r.i.User, nil)
}

// respond sends the initial response. Failure is logged: it means the
// 3 s deadline passed or the interaction is gone, and nothing else can
// answer it.
func (r *ireply) respond(ctx context.Context, resp *discordgo.InteractionResponse) bool {
	if err := r.a.s.InteractionRespond(r.i, resp, discordgo.WithContext(ctx)); err != nil {
		r.a.log.Warn("interaction response failed", "interaction_id", r.i.ID, "type", resp.Type,
			"after", time.Since(r.received).String(), "err", err)
		return false
	}
	return true
}

// deferAnswer acknowledges with "thinking…", ephemeral or not.
func (r *ireply) deferAnswer(ctx context.Context, ephemeral bool) {
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource, Data: &discordgo.InteractionResponseData{}}
	if ephemeral {
		resp.Data.Flags = discordgo.MessageFlagsEphemeral
	}
	r.ackMu.Lock()
	r.acked = true
	r.ackMu.Unlock()
	r.deferred = r.respond(ctx, resp)
	r.ephemeral = ephemeral
}

// thinking reports whether the interaction still shows a deferred
// "thinking…" that no answer has replaced. Discord shows it until the
// token expires, and then "The application did not respond".
func (r *ireply) thinking() bool { return r.deferred && !r.answered }

// tokenLive reports whether the interaction token may still be used,
// keeping a margin before InteractionTokenTTL.
func (r *ireply) tokenLive() bool {
	ttl := r.a.cfg.InteractionTokenTTL
	return time.Since(r.received) < ttl-min(time.Minute, ttl/10)
}

// mentionRoom is kept free in each part for the user mention that a
// late answer starts with.
const mentionRoom = 32

// answer delivers a command's (or action's) reply: through the
// interaction while its token lives, else, or if Discord refuses, as a
// normal message in the channel that mentions the user.
func (r *ireply) answer(ctx context.Context, rep chat.Reply) {
	r.answered = true
	msgs := replyMessages(rep, r.a.log)
	if r.tokenLive() {
		err := r.viaWebhook(ctx, msgs, rep.Ephemeral)
		if err == nil {
			return
		}
		r.a.log.Warn("interaction answer failed; posting in the channel", "interaction_id", r.i.ID, "token_expired", tokenGone(err), "err", err)
	}
	r.viaChannel(ctx, msgs)
}

func replyMessages(rep chat.Reply, log interface{ Warn(string, ...any) }) []Message {
	var msgs []Message
	if rep.Card != nil {
		if m, err := ToMessage(*rep.Card); err == nil {
			msgs = append(msgs, m)
		} else {
			log.Warn("reply card does not fit Discord", "err", err)
		}
	}
	for _, p := range SplitMarkdown(safetext.Text(rep.Text), MaxContent-mentionRoom) {
		msgs = append(msgs, Message{Content: p})
	}
	if len(msgs) == 0 {
		msgs = append(msgs, Message{Content: "Done."})
	}
	return msgs
}

func (r *ireply) viaWebhook(ctx context.Context, msgs []Message, ephemeral bool) error {
	rest := msgs
	if r.deferred && ephemeral == r.ephemeral {
		if _, err := r.a.s.InteractionResponseEdit(r.i, msgs[0].WebhookEdit(), discordgo.WithContext(ctx)); err != nil {
			return err
		}
		rest = msgs[1:]
	} else if r.deferred {
		// The "thinking…" message has the other visibility, which no edit
		// can change: remove it, then post the answer as follow-ups. (The
		// order matters: a follow-up while it still shows edits it
		// instead, keeping its visibility.)
		if err := r.a.s.InteractionResponseDelete(r.i, discordgo.WithContext(ctx)); err != nil {
			return err
		}
		r.deferred = false
	}
	for _, m := range rest {
		if _, err := r.a.s.FollowupMessageCreate(r.i, true, m.WebhookParams(ephemeral), discordgo.WithContext(ctx)); err != nil {
			return err
		}
	}
	return nil
}

// viaChannel posts the answer as bot messages, the first mentioning (and
// pinging) the user it is for.
func (r *ireply) viaChannel(ctx context.Context, msgs []Message) {
	u := r.user()
	for i, m := range msgs {
		send := m.Send()
		if i == 0 && u.ID != "" {
			send.Content = "<@" + u.ID + "> " + send.Content
			send.AllowedMentions = &discordgo.MessageAllowedMentions{Users: []string{u.ID}}
		}
		if _, err := r.a.s.ChannelMessageSendComplex(r.i.ChannelID, send, discordgo.WithContext(ctx)); err != nil {
			r.a.log.Error("late interaction answer failed", "interaction_id", r.i.ID, "channel", r.i.ChannelID, "err", err)
			return
		}
	}
}

// tokenGone reports whether Discord refused a webhook call because the
// interaction token expired or the interaction is unknown.
func tokenGone(err error) bool {
	if err == nil {
		return false
	}
	status, code := restCode(err)
	return code == codeInvalidToken || code == codeUnknownWebhook || code == codeUnknownInteraction ||
		(status == 401 && !errors.Is(err, context.Canceled))
}
