package chat

import (
	"context"
	"fmt"
	"strings"
)

var helpCommand = command{
	name: CmdHelp, aliases: []string{"h", "?"},
	usage: "/help", help: "list these commands",
	run: (*Core).runHelp,
}

func (c *Core) runHelp(context.Context, request) (Reply, error) {
	return Reply{Text: c.helpText(), Ephemeral: true}, nil
}

// helpText lists the commands of the table, and the backends.
func (c *Core) helpText() string {
	var b strings.Builder
	b.WriteString("**Commands** (type them in a session thread; `!` works as well as `/`):\n")
	for _, cmd := range c.commands {
		fmt.Fprintf(&b, "- `%s`: %s\n", cmd.usage, cmd.help)
	}
	if len(c.cfg.Backends) > 0 {
		fmt.Fprintf(&b, "Backends: %s\n", strings.Join(c.cfg.Backends, ", "))
	}
	b.WriteString("Anything else is a message to the agent.")
	return b.String()
}
