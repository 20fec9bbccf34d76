package chat

import (
	"context"
	"fmt"

	"github.com/sandbot/sandbot/session"
)

var pauseCommand = command{
	name:  CmdPause,
	usage: "/pause", help: "pause the session after the running turn; a message or /resume continues",
	run: (*Core).runPause,
}

func (c *Core) runPause(ctx context.Context, r request) (Reply, error) {
	ctx, cancel := c.slow(ctx)
	defer cancel()
	res, err := c.s.Pause(ctx, r.id, session.PauseRequest{User: r.u})
	if err != nil {
		return c.failed("pause", r, err)
	}
	return Reply{Text: fmt.Sprintf("Paused after turn %d. Send a message or /resume to continue.", res.Turn)}, nil
}
