package chat

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandbot/sandbot/session"
)

var destroyCommand = command{
	name:  CmdDestroy,
	usage: "/destroy confirm", help: "end the session and delete its sandbox and snapshots",
	parse: func(cmd *Command) error {
		if len(cmd.Args) > 1 || len(cmd.Args) == 1 && strings.ToLower(cmd.Args[0]) != "confirm" {
			return errUsage
		}
		cmd.Confirm = len(cmd.Args) == 1
		return nil
	},
	run: (*Core).runDestroy,
}

func (c *Core) runDestroy(ctx context.Context, r request) (Reply, error) {
	if !r.cmd.Confirm {
		return Reply{Text: "This ends the session and deletes its sandbox and snapshots; it cannot be undone. Send `/destroy confirm` to go ahead.", Ephemeral: true}, nil
	}
	ctx, cancel := c.slow(ctx)
	defer cancel()
	res, err := c.s.Destroy(ctx, r.id, session.DestroyRequest{User: r.u})
	if err != nil {
		return c.failed("destroy", r, err)
	}
	return Reply{Text: fmt.Sprintf("Session destroyed after %d %s; its sandbox and snapshots are gone. A new message here starts a fresh session.", res.Turns, plural(res.Turns, "turn", "turns"))}, nil
}
