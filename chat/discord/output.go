package discord

import (
	"context"
	"fmt"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
)

// outputViewer is the core's View output answer (chat.Core.ViewOutput).
type outputViewer interface {
	ViewOutput(ctx context.Context, a chat.Action) chat.OutputView
}

// ShowsOutput implements chat.OutputShower: status cards carry the View
// output button, answered with an ephemeral reply.
func (a *Adapter) ShowsOutput() bool {
	_, ok := a.core.(outputViewer)
	return ok
}

// viewOutput answers a View output click (on a status card, or on the
// picker a first click showed) privately: a deferred ephemeral response
// at once, then the picker, a refusal, or the call's arguments with its
// output as a file attachment.
func (a *Adapter) viewOutput(ctx context.Context, r *ireply, act chat.Action) {
	r.deferAnswer(ctx, true)
	viewer, ok := a.core.(outputViewer)
	if !ok {
		r.answer(ctx, chat.Reply{Text: "This bot cannot show tool output here; use /history.", Ephemeral: true})
		return
	}
	th, err := a.interactionThread(ctx, r.i)
	if err != nil {
		a.log.Error("view output: channel lookup failed", "interaction_id", r.i.ID, "err", err)
		r.answer(ctx, chat.Reply{Text: "I could not look this channel up; try again in a moment.", Ephemeral: true})
		return
	}
	if err := a.cfg.Authorize(act.User, th); err != nil {
		r.answer(ctx, chat.Reply{Text: chat.UserMessage(err), Ephemeral: true})
		return
	}
	if th.Thread == "" {
		r.answer(ctx, chat.Reply{Text: "This button is not in a session's thread; nothing was done.", Ephemeral: true})
		return
	}
	act.Thread = th
	v := viewer.ViewOutput(ctx, act)
	switch {
	case v.Picker != nil:
		r.answer(ctx, chat.Reply{Card: v.Picker, Ephemeral: true})
	case v.Call != nil:
		if err := r.sendOutput(ctx, *v.Call); err != nil {
			a.log.Warn("view output: reply failed", "interaction_id", r.i.ID, "thread_id", th.ID(), "err", err)
			r.answer(ctx, chat.Reply{Text: "I could not send the output (" + clampPlain(err.Error(), 200) + "); try again, or use /history.", Ephemeral: true})
		}
	default:
		r.answer(ctx, chat.Reply{Text: v.Text, Ephemeral: true})
	}
}

// sendOutput replaces the deferred ephemeral response with the call's
// arguments and its output as a file (the file holds the arguments too,
// so it stands alone).
func (r *ireply) sendOutput(ctx context.Context, c chat.CallOutput) error {
	content, file := OutputReply(c)
	r.answered = true
	_, err := r.a.s.InteractionResponseEdit(r.i, &discordgo.WebhookEdit{
		Content: &content, AllowedMentions: noMentions(),
		Files: []*discordgo.File{{Name: file.Name, ContentType: "text/plain; charset=utf-8", Reader: strings.NewReader(file.Content)}},
	}, discordgo.WithContext(ctx))
	return err
}

// OutputReply is the content and the attached file of a View output
// reply: the heading and the arguments when they fit Discord's 2,000
// characters (else a line saying they are at the top of the file), and
// the file with the arguments and the whole output.
func OutputReply(c chat.CallOutput) (string, chat.Attachment) {
	file := chat.Attachment{Name: c.FileName(), Content: c.FileText()}
	head := "**" + c.Heading() + "**"
	size := "no output yet"
	if c.HasOutput {
		size = fmt.Sprintf("%d characters, as the model was given it", len([]rune(c.Output)))
	}
	tail := fmt.Sprintf("The output (%s) is in `%s`. Secrets the worker knows were replaced before the session kept it.", size, file.Name)
	var args string
	switch {
	case len(c.Commands) == 1:
		args = "Command:\n```\n" + codeSafe(c.Commands[0]) + "\n```"
	case len(c.Commands) > 1:
		var b strings.Builder
		fmt.Fprintf(&b, "Commands (%d):", len(c.Commands))
		for _, cmd := range c.Commands {
			b.WriteString("\n```\n" + codeSafe(cmd) + "\n```")
		}
		args = b.String()
	default:
		args = "Arguments (`" + strings.ReplaceAll(c.Name, "`", "'") + "`):\n```\n" + codeSafe(c.Arguments) + "\n```"
	}
	content := head + "\n" + args + "\n" + tail
	if textLen(content) > MaxContent {
		content = head + "\nThe arguments are too long for a message: they are at the top of the attached file.\n" + tail
	}
	return content, file
}
