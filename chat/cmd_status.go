package chat

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandbot/sandbot/session"
)

var statusCommand = command{
	name:  CmdStatus,
	usage: "/status", help: "backend, turns, state, owner and a link to the workflow",
	run: (*Core).runStatus,
}

// runStatus answers /status with a card.
func (c *Core) runStatus(ctx context.Context, r request) (Reply, error) {
	ctx, cancel := c.quick(ctx)
	defer cancel()
	info, err := c.s.Info(ctx, r.id)
	if err != nil {
		return c.failed("status", r, err)
	}
	ts, err := c.s.TurnState(ctx, r.id)
	if err != nil {
		return c.failed("status", r, err)
	}
	card := statusCard(r.p, r.id, info, ts, UIURL(c.cfg.TemporalUIBase, c.cfg.Namespace, r.id), c.cfg.Prices)
	return Reply{Card: &card, Ephemeral: true}, nil
}

// statusCard shows session id: its fields, a Temporal UI link (uiURL, if
// any) and the workflow ID.
func statusCard(p Poster, id string, info session.Info, ts session.TurnState, uiURL string, prices session.Prices) Card {
	backend := ts.Backend
	if ts.PendingBackend != "" && ts.PendingBackend != ts.Backend {
		backend += " → " + ts.PendingBackend + " (next turn)"
	}
	state := StatusWord(ts.Status)
	switch {
	case ts.Destroyed:
		state = "destroyed"
	case ts.Paused:
		state += ", paused"
	}
	fields := []Field{
		{Label: "Backend", Value: backend},
	}
	if info.Model != "" {
		fields = append(fields, Field{Label: "Model", Value: info.Model})
	}
	fields = append(fields, []Field{
		{Label: "Turns", Value: fmt.Sprint(info.Turns)},
		{Label: "Status", Value: state},
		{Label: "Owner", Value: mention(p, info.Owner)},
	}...)
	if !info.CreatedAt.IsZero() {
		fields = append(fields, Field{Label: "Started", Value: info.CreatedAt.UTC().Format("2006-01-02 15:04 UTC")})
	}
	if ts.Queued > 0 {
		fields = append(fields, Field{Label: "Queued", Value: fmt.Sprint(ts.Queued)})
	}
	if info.Confinement != "" {
		sandbox := info.Confinement
		if info.SandboxWarning != "" {
			sandbox = "⚠️ " + sandbox
		}
		fields = append(fields, Field{Label: "Sandbox", Value: sandbox})
	}
	if u := info.Usage; u.Calls > 0 {
		v := usageText(u)
		if cost, ok := u.Cost(prices); ok {
			v += ", " + costText(cost)
		}
		if l := ts.Usage; l.Calls > 0 && l != u {
			v += "; last turn " + usageText(l)
		}
		fields = append(fields, Field{Label: "Tokens", Value: v})
	}
	if cps := info.Checkpoints; len(cps) > 0 {
		fields = append(fields, Field{Label: "Checkpoints", Value: checkpointsText(cps)})
	}
	if info.Repo != nil {
		fields = append(fields, Field{Label: "Repository", Value: repoText(info.Repo)})
	}
	if info.Parent != "" {
		from := info.Parent
		if loc, err := session.ParseID(info.Parent); err == nil {
			from = threadLink(p, loc)
		}
		fields = append(fields, Field{Label: "Forked from", Value: fmt.Sprintf("%s at turn %d", from, info.ForkedAtTurn)})
	}
	card := Card{Title: "📋 " + orDefault(info.Title, "Session"), Blocks: []Block{{Kind: BlockFields, Fields: fields}}}
	if uiURL != "" {
		card.Blocks = append(card.Blocks, Block{Kind: BlockText, Text: "[Open in the Temporal UI](" + uiURL + ")"})
	}
	card.Blocks = append(card.Blocks, Block{Kind: BlockContext, Text: "Workflow `" + id + "`"})
	return card
}

// maxCheckpointsShown bounds the checkpoints /status lists (the newest).
const maxCheckpointsShown = 12

// checkpointsText lists kept checkpoints, newest first: "turn 7 (12:04,
// 2,013 files, 48 MiB) · turn 6 (…)", for /rewind N and /fork @N.
func checkpointsText(cps []session.Checkpoint) string {
	var parts []string
	for i := len(cps) - 1; i >= 0 && len(parts) < maxCheckpointsShown; i-- {
		c := cps[i]
		p := fmt.Sprintf("turn %d (%s", c.Turn, c.At.UTC().Format("01-02 15:04"))
		if c.Files > 0 {
			p += fmt.Sprintf(", %s files, %s", thousands(c.Files), session.FormatBytes(c.Bytes))
		}
		parts = append(parts, p+")")
	}
	s := strings.Join(parts, " · ")
	if more := len(cps) - len(parts); more > 0 {
		s += fmt.Sprintf(" · %d older", more)
	}
	return s + " — `/rewind N` or `/fork @N`"
}

// usageText is a Usage as "12,345 in · 678 out (3 calls)".
func usageText(u session.Usage) string {
	calls := "calls"
	if u.Calls == 1 {
		calls = "call"
	}
	return fmt.Sprintf("%s in · %s out (%d %s)", thousands(u.PromptTokens), thousands(u.CompletionTokens), u.Calls, calls)
}

// thousands writes n with comma separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// StatusWord says what a session is doing in words that mean it: a
// session whose last turn completed is idle, not "complete".
func StatusWord(s session.TurnStatus) string {
	switch s {
	case session.StatusThinking:
		return "working"
	case session.StatusAwaitingApproval:
		return "waiting for approval"
	case session.StatusFailed:
		return "idle (the last turn failed)"
	}
	return "idle"
}
