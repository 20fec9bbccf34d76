package chat

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sandbot/sandbot/session"
)

var backendCommand = command{
	name: CmdBackend, aliases: []string{"switch"},
	usage: "/backend [NAME]", help: "show the sandbox backend, or switch to NAME at the next turn boundary",
	parse: parseBackend,
	run:   (*Core).runBackend,
}

func parseBackend(cmd *Command) error {
	switch len(cmd.Args) {
	case 0:
		return nil
	case 1:
		cmd.Backend = cmd.Args[0]
		return nil
	}
	return errUsage
}

func (c *Core) runBackend(ctx context.Context, r request) (Reply, error) {
	if r.cmd.Backend == "" {
		return c.showBackend(ctx, r)
	}
	if msg := c.checkServed(ctx, r.cmd.Backend); msg != "" {
		return Reply{Text: msg, Ephemeral: true}, nil
	}
	ctx, cancel := c.slow(ctx)
	defer cancel()
	res, err := c.s.SetBackend(ctx, r.id, session.SetBackendRequest{Backend: r.cmd.Backend, User: r.u})
	if err != nil {
		return c.failed("backend", r, err)
	}
	switch {
	case res.From == res.To:
		return Reply{Text: "The backend already is **" + res.To + "**.", Ephemeral: true}, nil
	case res.Deferred:
		return Reply{Text: fmt.Sprintf("Backend switches from **%s** to **%s** when the running turn ends; the workspace moves with it.", res.From, res.To)}, nil
	}
	return Reply{Text: fmt.Sprintf("Switching backend from **%s** to **%s**; the workspace moves with it.", res.From, res.To)}, nil
}

// showBackend answers /backend without a name.
func (c *Core) showBackend(ctx context.Context, r request) (Reply, error) {
	ctx, cancel := c.quick(ctx)
	defer cancel()
	ts, err := c.s.TurnState(ctx, r.id)
	if err != nil {
		return c.failed("backend", r, err)
	}
	text := "Backend: **" + ts.Backend + "**"
	if ts.PendingBackend != "" {
		text += " (switching to **" + ts.PendingBackend + "** at the next turn boundary)"
	}
	if len(c.cfg.Backends) > 0 {
		text += ". Available: " + strings.Join(c.cfg.Backends, ", ")
	}
	return Reply{Text: text + ".", Ephemeral: true}, nil
}

// checkServed returns a user-facing refusal when backend is not served by
// any running worker, or "" when it is (or nobody can tell). /backend and
// /fork ask it before they touch the session.
func (c *Core) checkServed(ctx context.Context, backend string) string {
	if backend == "" || c.cfg.ServedBackends == nil {
		return ""
	}
	served, err := c.cfg.ServedBackends(ctx)
	if err != nil {
		c.log.Warn("cannot list served backends", "error", err)
		return ""
	}
	if slices.Contains(served, backend) {
		return ""
	}
	if len(served) == 0 {
		return fmt.Sprintf("Backend **%s** is not available: no worker is serving any backend right now.", backend)
	}
	return fmt.Sprintf("Backend **%s** is not available: no running worker serves it. Available: %s.", backend, strings.Join(served, ", "))
}
