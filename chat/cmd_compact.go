package chat

import (
	"context"

	"github.com/sandbot/sandbot/session"
)

var compactCommand = command{
	name:  CmdCompact,
	usage: "/compact", help: "summarise the older conversation now, so the model keeps what matters in less context",
	run: (*Core).runCompact,
}

// runCompact asks the session to compact its conversation: after the
// running turn, if one runs. The model writes the summary, so this can
// take a while.
func (c *Core) runCompact(ctx context.Context, r request) (Reply, error) {
	ctx, cancel := c.slow(ctx)
	defer cancel()
	res, err := c.s.Compact(ctx, r.id, session.CompactRequest{User: r.u})
	if err != nil {
		return c.failed("compact", r, err)
	}
	switch {
	case res.Error != "":
		return Reply{Text: "Could not compact the conversation: " + res.Error}, nil
	case !res.Compacted:
		return Reply{Text: "The conversation is still short; there is nothing to compact yet.", Ephemeral: true}, nil
	}
	return Reply{Text: "Compacted the older conversation into a summary; the session goes on from it."}, nil
}
