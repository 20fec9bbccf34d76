package chat

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandbot/sandbot/session"
)

// maxListed caps /sessions (each listed session costs one query).
const maxListed = 15

// status answers /status with a card.
func (c *Core) status(ctx context.Context, p Poster, th Thread) (Reply, error) {
	id := th.ID()
	info, err := c.s.Info(ctx, id)
	if err != nil {
		return Reply{Text: UserMessage(err), Ephemeral: true}, c.internal(err, "status", id)
	}
	ts, err := c.s.TurnState(ctx, id)
	if err != nil {
		return Reply{Text: UserMessage(err), Ephemeral: true}, c.internal(err, "status", id)
	}
	title := info.Title
	if title == "" {
		title = "Session"
	}
	backend := ts.Backend
	if ts.PendingBackend != "" && ts.PendingBackend != ts.Backend {
		backend += " → " + ts.PendingBackend + " (next turn)"
	}
	state := string(ts.Status)
	switch {
	case ts.Destroyed:
		state = "destroyed"
	case ts.Paused:
		state += ", paused"
	}
	fields := []Field{
		{Label: "Backend", Value: backend},
		{Label: "Turns", Value: fmt.Sprint(info.Turns)},
		{Label: "Status", Value: state},
		{Label: "Owner", Value: mention(p, info.Owner)},
	}
	if !info.CreatedAt.IsZero() {
		fields = append(fields, Field{Label: "Started", Value: info.CreatedAt.UTC().Format("2006-01-02 15:04 UTC")})
	}
	if ts.Queued > 0 {
		fields = append(fields, Field{Label: "Queued", Value: fmt.Sprint(ts.Queued)})
	}
	if info.Parent != "" {
		from := info.Parent
		if loc, err := session.ParseID(info.Parent); err == nil {
			from = threadLink(p, loc)
		}
		fields = append(fields, Field{Label: "Forked from", Value: fmt.Sprintf("%s at turn %d", from, info.ForkedAtTurn)})
	}
	card := Card{Title: "📋 " + title, Blocks: []Block{{Kind: BlockFields, Fields: fields}}}
	if u := UIURL(c.cfg.TemporalUIBase, c.cfg.Namespace, id); u != "" {
		card.Blocks = append(card.Blocks, Block{Kind: BlockText, Text: "[Open in the Temporal UI](" + u + ")"})
	}
	card.Blocks = append(card.Blocks, Block{Kind: BlockContext, Text: "Workflow `" + id + "`"})
	return Reply{Card: &card, Ephemeral: true}, nil
}

// sessions answers /sessions: running sessions in th's channel.
func (c *Core) sessions(ctx context.Context, p Poster, th Thread, u User, all bool) (Reply, error) {
	f := ListFilter{Platform: th.Platform, Workspace: th.Workspace, Channel: th.Channel, ActiveOnly: true, Limit: maxListed + 1}
	heading, none := "**Your running sessions in this channel**", "You have no running sessions in this channel. Mention me with a task to start one (`/sessions all` lists everyone's)."
	if all {
		heading, none = "**Running sessions in this channel**", "No sessions are running in this channel. Mention me with a task to start one."
	} else {
		f.Owner = u.ID
	}
	list, err := c.s.List(ctx, f)
	if err != nil {
		return Reply{Text: UserMessage(err), Ephemeral: true}, c.internal(err, "sessions", th.ID())
	}
	if len(list) == 0 {
		return Reply{Text: none, Ephemeral: true}, nil
	}
	var b strings.Builder
	b.WriteString(heading + "\n")
	for i, s := range list {
		if i == maxListed {
			fmt.Fprintf(&b, "…and more.\n")
			break
		}
		line := "- " + threadLink(p, s.Location)
		if info, err := c.s.Info(ctx, s.WorkflowID); err == nil {
			if info.Title != "" {
				line += " **" + truncate(info.Title, 60) + "**"
			}
			line += fmt.Sprintf(": %s, %d %s, %s, owner %s", info.Backend, info.Turns, plural(info.Turns, "turn", "turns"), info.Status, mention(p, info.Owner))
		}
		if s.Location == th {
			line += " (this thread)"
		}
		b.WriteString(line + "\n")
	}
	return Reply{Text: strings.TrimRight(b.String(), "\n"), Ephemeral: true}, nil
}

// fork answers /fork: a new thread next to th, then the fork update.
func (c *Core) fork(ctx context.Context, p Poster, th Thread, u User, cmd Command) (Reply, error) {
	id := th.ID()
	starter, ok := p.(ThreadStarter)
	if !ok {
		return Reply{Text: "Forking is not supported on this platform.", Ephemeral: true}, nil
	}
	if msg := c.checkServed(ctx, cmd.Backend); msg != "" {
		return Reply{Text: msg, Ephemeral: true}, nil
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	info, err := c.s.Info(cctx, id)
	cancel()
	if err != nil {
		// Checked first so a thread without a session gets no stray fork thread.
		return Reply{Text: UserMessage(err), Ephemeral: true}, c.internal(err, "fork", id)
	}
	title := cmd.Title
	if title == "" {
		title = "Fork of " + orDefault(info.Title, "this session")
	}
	cctx, cancel = context.WithTimeout(ctx, c.cfg.CallTimeout)
	to, err := starter.StartThread(cctx, th, title)
	cancel()
	if err != nil {
		c.log.Error("fork: start thread", "workflow_id", id, "err", err)
		return Reply{Text: "I could not open a thread for the fork; try again in a moment.", Ephemeral: true}, fmt.Errorf("chat: fork: start thread: %w", err)
	}
	cctx, cancel = context.WithTimeout(ctx, c.cfg.LongCallTimeout)
	r, err := c.s.Fork(cctx, id, session.ForkRequest{Location: to, Title: cmd.Title, Backend: cmd.Backend, User: u})
	cancel()
	if err != nil {
		c.say(ctx, p, to, "This fork could not be created: "+UserMessage(err))
		return Reply{Text: "Fork failed: " + UserMessage(err)}, c.internal(err, "fork", id)
	}
	c.say(ctx, p, to, fmt.Sprintf("Forked from %s at turn %d on backend **%s**. Send a message here to continue this copy.", threadLink(p, th), r.AtTurn, r.Backend))
	return Reply{Text: fmt.Sprintf("Forked at turn %d into %s (backend **%s**). This session goes on unchanged.", r.AtTurn, threadLink(p, to), r.Backend)}, nil
}

func orDefault(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
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

func historyLine(e session.HistoryEntry) string {
	m := e.Msg
	oneLine := func(s string, n int) string { return truncate(strings.Join(strings.Fields(s), " "), n) }
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
		return "↳ " + oneLine(m.Content, 120)
	}
	return ""
}
