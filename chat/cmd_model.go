package chat

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/sandbot/sandbot/session"
)

var modelCommand = command{
	name:  CmdModel,
	usage: "/model [NAME]", help: "show the session's model and the others offered, or switch to NAME from the next turn",
	parse: func(cmd *Command) error {
		if len(cmd.Args) > 1 {
			return errUsage
		}
		return nil
	},
	run: (*Core).runModel,
}

// modelWord is "model=NAME" anywhere in a message.
var modelWord = regexp.MustCompile(`(?:^|\s)model=([A-Za-z0-9][A-Za-z0-9._:/@-]{0,127})(?:\s|$)`)

// cutModel finds model=NAME in a message and returns the text without it.
func cutModel(text string) (model, rest string, ok bool) {
	loc := modelWord.FindStringSubmatchIndex(text)
	if loc == nil {
		return "", text, false
	}
	return text[loc[2]:loc[3]], text[:loc[0]] + " " + text[loc[1]:], true
}

func (c *Core) runModel(ctx context.Context, r request) (Reply, error) {
	ctx, cancel := c.quick(ctx)
	defer cancel()
	if len(r.cmd.Args) == 0 {
		info, err := c.s.Info(ctx, r.id)
		if err != nil {
			return c.failed("model", r, err)
		}
		text := "This session uses **" + orDefault(info.Model, "the worker's model") + "**."
		if len(info.Models) > 1 {
			text += " Offered: " + strings.Join(info.Models, ", ") + ". `/model NAME` switches from the next turn."
		} else {
			text += " It is the only model this deployment offers (SANDBOT_MODEL_ALLOWED lists others)."
		}
		return Reply{Text: text, Ephemeral: true}, nil
	}
	res, err := c.s.SetModel(ctx, r.id, session.SetModelRequest{Model: r.cmd.Args[0], User: r.u})
	if err != nil {
		return c.failed("model", r, err)
	}
	when := "from the next turn"
	if res.Deferred {
		when = "once the running turn ends"
	}
	return Reply{Text: fmt.Sprintf("This session switches from **%s** to **%s** %s.", orDefault(res.From, "the default model"), res.To, when)}, nil
}
