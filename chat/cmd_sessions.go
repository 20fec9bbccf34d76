package chat

import (
	"context"
	"fmt"
	"strings"
)

// maxListed caps /sessions (each listed session costs one query).
const maxListed = 15

var sessionsCommand = command{
	name:  CmdSessions,
	usage: "/sessions [all]", help: "your running sessions in this channel (all: everyone's)",
	parse: func(cmd *Command) error {
		if len(cmd.Args) > 1 || len(cmd.Args) == 1 && !strings.EqualFold(cmd.Args[0], "all") {
			return errUsage
		}
		return nil
	},
	run: (*Core).runSessions,
}

// runSessions answers /sessions: running sessions in r.th's channel, the
// asker's own unless "all".
func (c *Core) runSessions(ctx context.Context, r request) (Reply, error) {
	ctx, cancel := c.quick(ctx)
	defer cancel()
	all := len(r.cmd.Args) > 0 && strings.EqualFold(r.cmd.Args[0], "all")
	th := r.th
	f := ListFilter{Platform: th.Platform, Workspace: th.Workspace, Channel: th.Channel, ActiveOnly: true, Limit: maxListed + 1}
	heading, none := "**Your running sessions in this channel**", "You have no running sessions in this channel. Mention me with a task to start one (`/sessions all` lists everyone's)."
	if all {
		heading, none = "**Running sessions in this channel**", "No sessions are running in this channel. Mention me with a task to start one."
	} else {
		f.Owner = r.u.ID
	}
	list, err := c.s.List(ctx, f)
	if err != nil {
		return c.failed("sessions", r, err)
	}
	if len(list) == 0 {
		return Reply{Text: none, Ephemeral: true}, nil
	}
	var b strings.Builder
	b.WriteString(heading + "\n")
	for i, s := range list {
		if i == maxListed {
			b.WriteString("…and more.\n")
			break
		}
		line := "- " + threadLink(r.p, s.Location)
		if info, err := c.s.Info(ctx, s.WorkflowID); err == nil {
			if info.Title != "" {
				line += " **" + truncate(info.Title, 60) + "**"
			}
			line += fmt.Sprintf(": %s, %d %s, %s, owner %s", info.Backend, info.Turns, plural(info.Turns, "turn", "turns"), StatusWord(info.Status), mention(r.p, info.Owner))
		}
		if s.Location == th {
			line += " (this thread)"
		}
		b.WriteString(line + "\n")
	}
	return Reply{Text: strings.TrimRight(b.String(), "\n"), Ephemeral: true}, nil
}
