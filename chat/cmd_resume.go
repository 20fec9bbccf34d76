package chat

import (
	"context"

	"github.com/sandbot/sandbot/session"
)

var resumeCommand = command{
	name:  CmdResume,
	usage: "/resume", help: "resume a paused session",
	run: (*Core).runResume,
}

func (c *Core) runResume(ctx context.Context, r request) (Reply, error) {
	ctx, cancel := c.quick(ctx)
	defer cancel()
	if _, err := c.s.Resume(ctx, r.id, session.ResumeRequest{User: r.u}); err != nil {
		return c.failed("resume", r, err)
	}
	// Messages queued while paused start a turn now: watch it.
	if ts, err := c.s.TurnState(ctx, r.id); err == nil {
		switch {
		case ts.Status.Active():
			c.watchers.watch(r.p, r.th, ts.Turn)
		case ts.Queued > 0:
			c.watchers.watch(r.p, r.th, ts.Turn+1)
		}
	}
	return Reply{Text: "Resumed."}, nil
}
