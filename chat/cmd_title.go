package chat

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandbot/sandbot/session"
)

var titleCommand = command{
	name:  CmdTitle,
	usage: "/title TEXT", help: "rename the session (and its Discord thread); /status and /sessions show it",
	parse: func(cmd *Command) error {
		if len(cmd.Args) == 0 {
			return errUsage
		}
		cmd.Title = strings.Join(cmd.Args, " ")
		return nil
	},
	run: (*Core).runTitle,
}

// ThreadRenamer is an optional Poster capability: rename a thread (a
// Discord thread's name), so /title shows in the channel's thread list.
type ThreadRenamer interface {
	RenameThread(ctx context.Context, th Thread, name string) error
}

func (c *Core) runTitle(ctx context.Context, r request) (Reply, error) {
	ctx, cancel := c.quick(ctx)
	defer cancel()
	res, err := c.s.SetTitle(ctx, r.id, session.SetTitleRequest{Title: r.cmd.Title, User: r.u})
	if err != nil {
		return c.failed("title", r, err)
	}
	note := ""
	if rn, ok := r.p.(ThreadRenamer); ok {
		if err := rn.RenameThread(ctx, r.th, res.To); err != nil {
			c.log.Warn("rename thread failed", "workflow_id", r.id, "err", err)
			note = " (the thread keeps its old name: " + UserMessage(err) + ")"
		}
	}
	return Reply{Text: fmt.Sprintf("Renamed this session to **%s**%s.", res.To, note)}, nil
}
