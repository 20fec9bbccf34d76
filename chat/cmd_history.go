package chat

import (
	"context"
	"fmt"
	"github.com/sandbot/sandbot/chat/internal/safetext"
	"strconv"
	"strings"
	"time"

	"github.com/sandbot/sandbot/session"
)

// History limits.
const (
	DefaultHistory = 10
	MaxHistory     = 50
)

// historyChars bounds /history's answer (the newest entries win).
const historyChars = 3500

var historyCommand = command{
	name:  CmdHistory,
	usage: "/history [N]", help: fmt.Sprintf("the last N transcript entries (default %d, at most %d)", DefaultHistory, MaxHistory),
	parse: parseHistory,
	run:   (*Core).runHistory,
}

func parseHistory(cmd *Command) error {
	switch len(cmd.Args) {
	case 0:
		return nil
	case 1:
		n, err := strconv.Atoi(cmd.Args[0])
		if err != nil || n < 1 {
			return userErrorf("/history takes a count from 1 to %d, not %q.", MaxHistory, cmd.Args[0])
		}
		cmd.N = min(n, MaxHistory)
		return nil
	}
	return errUsage
}

func (c *Core) runHistory(ctx context.Context, r request) (Reply, error) {
	n := r.cmd.N
	if n <= 0 {
		n = DefaultHistory
	}
	ctx, cancel := c.quick(ctx)
	defer cancel()
	h, err := c.s.History(ctx, r.id, session.HistoryRequest{Last: min(n, MaxHistory)})
	if err != nil {
		return c.failed("history", r, err)
	}
	return Reply{Text: renderHistory(h, historyChars), Ephemeral: true}, nil
}

// renderHistory shows transcript entries compactly, within limit runes
// (the newest entries win).
func renderHistory(h []session.HistoryEntry, limit int) string {
	if len(h) == 0 {
		return "Nothing to show yet: this session has no transcript."
	}
	var lines []string
	turn := -1
	for _, e := range h {
		line := historyLine(e)
		if line == "" {
			continue
		}
		if e.Turn != turn {
			turn = e.Turn
			lines = append(lines, fmt.Sprintf("**Turn %d** · %s", e.Turn, e.At.UTC().Format(time.DateTime)))
		}
		lines = append(lines, line)
	}
	// Keep the newest lines that fit.
	total, start := 0, len(lines)
	for start > 0 && total+len([]rune(lines[start-1]))+1 <= limit {
		start--
		total += len([]rune(lines[start])) + 1
	}
	out := strings.Join(lines[start:], "\n")
	if start > 0 {
		out = "…\n" + out
	}
	return out
}

// historyOutputLines and historyOutputChars bound each tool output /history
// shows (its tail): enough to see what a command said, not the whole log.
const (
	historyOutputLines = 12
	historyOutputChars = 800
)

func historyLine(e session.HistoryEntry) string {
	m := e.Msg
	oneLine := func(s string, n int) string { return truncate(safetext.Line(strings.Join(strings.Fields(s), " ")), n) }
	switch m.Role {
	case session.RoleUser:
		who := orDefault(m.User, "user")
		return "👤 **" + who + "**: " + oneLine(m.Content, 200)
	case session.RoleAssistant:
		var parts []string
		if m.Content != "" {
			parts = append(parts, "🤖 "+oneLine(m.Content, 300))
		}
		for _, tc := range m.ToolCalls {
			c := session.ToolCallState{Name: tc.Name, Arguments: tc.Arguments}
			parts = append(parts, "🔧 `"+commandLine(c, 100)+"`")
		}
		return strings.Join(parts, "\n")
	case session.RoleTool:
		// The output's tail, lines kept, in a block nothing can close.
		out := strings.ReplaceAll(safetext.Text(outputTail(m.Content, historyOutputLines, historyOutputChars)), "```", "`\u200b``")
		return "↳\n```\n" + out + "\n```"
	}
	return ""
}
