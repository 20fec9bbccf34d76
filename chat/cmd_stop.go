package chat

import (
	"context"
	"fmt"

	"github.com/sandbot/sandbot/session"
)

var stopCommand = command{
	name: CmdStop, aliases: []string{"cancel"},
	usage: "/stop", help: "stop the running turn (the agent is told you interrupted)",
	run: (*Core).runStop,
}

func (c *Core) runStop(ctx context.Context, r request) (Reply, error) {
	cctx, cancel := c.slow(ctx)
	defer cancel()
	res, err := c.s.Stop(cctx, r.id, session.StopRequest{User: r.u})
	if err != nil {
		return c.failed("stop", r, err)
	}
	// The watcher shows the stopped card now rather than at its next poll.
	c.nudge(ctx, r.p, r.th)
	if !res.Stopped {
		return Reply{Text: "No turn is running.", Ephemeral: true}, nil
	}
	return Reply{Text: fmt.Sprintf("Stopped turn %d.", res.Turn)}, nil
}
