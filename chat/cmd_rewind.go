package chat

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sandbot/sandbot/session"
)

var rewindCommand = command{
	name:  CmdRewind,
	usage: "/rewind N confirm", help: "bring the workspace and the conversation back to the end of turn N (/status lists the turns kept)",
	parse: parseRewind,
	run:   (*Core).runRewind,
}

func parseRewind(cmd *Command) error {
	if len(cmd.Args) == 0 || len(cmd.Args) > 2 || len(cmd.Args) == 2 && strings.ToLower(cmd.Args[1]) != "confirm" {
		return errUsage
	}
	n, err := strconv.Atoi(strings.TrimPrefix(cmd.Args[0], "@"))
	if err != nil || n < 1 {
		return userErrorf("/rewind takes the number of a turn whose end the session kept, such as /rewind 3 (/status lists them), not %q.", cmd.Args[0])
	}
	cmd.N, cmd.Confirm = n, len(cmd.Args) == 2
	return nil
}

// runRewind answers /rewind: first what it would undo, then, confirmed,
// the rewind itself (which the workflow refuses while a turn runs).
func (c *Core) runRewind(ctx context.Context, r request) (Reply, error) {
	if !r.cmd.Confirm {
		cctx, cancel := c.quick(ctx)
		info, err := c.s.Info(cctx, r.id)
		cancel()
		if err != nil {
			return c.failed("rewind", r, err)
		}
		return Reply{Text: fmt.Sprintf("This brings the workspace and the conversation back to the end of turn %d, undoing turns %d to %d: their files and messages are gone for good (a /fork @%d first keeps a copy). Send `/rewind %d confirm` to go ahead.",
			r.cmd.N, r.cmd.N+1, info.Turns, info.Turns, r.cmd.N), Ephemeral: true}, nil
	}
	ctx, cancel := c.slow(ctx)
	defer cancel()
	res, err := c.s.Rewind(ctx, r.id, session.RewindRequest{Turn: r.cmd.N, User: r.u})
	if err != nil {
		return c.failed("rewind", r, err)
	}
	return Reply{Text: fmt.Sprintf("Rewound to the end of turn %d; %d later %s undone. The next message goes on from there.", res.Turn, res.Undone, plural(res.Undone, "turn was", "turns were"))}, nil
}
