package chat

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sandbot/sandbot/session"
)

var forkCommand = command{
	name:  CmdFork,
	usage: `/fork [@N] ["title"] [backend]`, help: "copy this session (conversation and workspace, at turn N if given) into a new thread",
	parse: parseFork,
	run:   (*Core).runFork,
}

func parseFork(cmd *Command) error {
	if len(cmd.Args) > 0 && strings.HasPrefix(cmd.Args[0], "@") {
		n, err := strconv.Atoi(cmd.Args[0][1:])
		if err != nil || n < 1 {
			return userErrorf("/fork @N takes the number of a turn whose end the session kept, such as /fork @3 (/status lists them), not %q.", cmd.Args[0])
		}
		cmd.N = n
		cmd.Args = cmd.Args[1:]
	}
	if len(cmd.Args) > 2 {
		return userErrorf(`Put a title with spaces in quotes: /fork "my experiment" docker.`)
	}
	if len(cmd.Args) > 0 {
		cmd.Title = cmd.Args[0]
	}
	if len(cmd.Args) > 1 {
		cmd.Backend = cmd.Args[1]
	}
	return nil
}

// runFork answers /fork: a new thread next to r.th, then the fork update.
func (c *Core) runFork(ctx context.Context, r request) (Reply, error) {
	starter, ok := r.p.(ThreadStarter)
	if !ok {
		return Reply{Text: "Forking is not supported on this platform.", Ephemeral: true}, nil
	}
	if msg := c.checkServed(ctx, r.cmd.Backend); msg != "" {
		return Reply{Text: msg, Ephemeral: true}, nil
	}
	cctx, cancel := c.quick(ctx)
	info, err := c.s.Info(cctx, r.id)
	cancel()
	if err != nil {
		// Checked first so a thread without a session gets no stray fork thread.
		return c.failed("fork", r, err)
	}
	title := r.cmd.Title
	if title == "" {
		title = "Fork of " + orDefault(info.Title, "this session")
	}
	cctx, cancel = c.quick(ctx)
	to, err := starter.StartThread(cctx, r.th, title)
	cancel()
	if err != nil {
		c.log.Error("fork: start thread", "workflow_id", r.id, "err", err)
		return Reply{Text: "I could not open a thread for the fork; try again in a moment.", Ephemeral: true}, fmt.Errorf("chat: fork: start thread: %w", err)
	}
	cctx, cancel = c.slow(ctx)
	res, err := c.s.Fork(cctx, r.id, session.ForkRequest{Location: to, Title: r.cmd.Title, Backend: r.cmd.Backend, AtTurn: r.cmd.N, User: r.u})
	cancel()
	if err != nil {
		c.say(ctx, r.p, to, "This fork could not be created: "+UserMessage(err))
		return Reply{Text: "Fork failed: " + UserMessage(err)}, c.internal(err, "fork", r.id)
	}
	c.say(ctx, r.p, to, fmt.Sprintf("Forked from %s at turn %d on backend **%s**. Send a message here to continue this copy.", threadLink(r.p, r.th), res.AtTurn, res.Backend))
	return Reply{Text: fmt.Sprintf("Forked at turn %d into %s (backend **%s**). This session goes on unchanged.", res.AtTurn, threadLink(r.p, to), res.Backend)}, nil
}
