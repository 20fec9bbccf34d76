package tui

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/session"
)

// pendingView is what the approval bar shows: every command of the call,
// whole, with its reason, who may approve and when it expires.
type pendingView struct {
	value     string // the approval buttons' value, for HandleAction
	commands  []string
	reason    string
	approvers string
	expires   time.Time
}

// pendingOf reads the pending approval of ts; the card supplies what only
// the core knows (the button value, who may approve).
func pendingOf(ts session.TurnState, card chat.Card) *pendingView {
	if ts.Pending == nil || ts.Status != session.StatusAwaitingApproval {
		return nil
	}
	p := &pendingView{reason: ts.Pending.Reason, expires: ts.Pending.ExpiresAt}
	for _, b := range card.Blocks {
		for _, btn := range b.Buttons {
			if btn.ID == chat.ActionApprove {
				p.value = btn.Value
			}
		}
		if b.Kind == chat.BlockContext {
			for _, part := range strings.Split(b.Text, " · ") {
				if s, ok := strings.CutPrefix(part, "Can approve: "); ok {
					p.approvers = s
				}
			}
		}
	}
	if p.value == "" {
		return nil // the card has not caught up with the turn yet
	}
	p.commands = []string{ts.Pending.Command}
	for _, c := range ts.ToolCalls {
		if c.CallID != ts.Pending.CallID {
			continue
		}
		if len(c.Commands) > 0 {
			p.commands = c.Commands
		} else {
			var args session.ShellArgs
			if json.Unmarshal([]byte(c.Arguments), &args) == nil && len(args.Commands) > 0 {
				p.commands = args.Commands
			}
		}
	}
	return p
}

// viewApproval draws the bar. Commands are wrapped, never cut; when they
// do not fit half the screen the bar scrolls (PgUp/PgDn).
func (m *model) viewApproval(p *pendingView) string {
	w := max(m.w, 20)
	var lines []string
	head := "✋ Approval needed"
	if p.reason != "" {
		head += ": " + safetext.Line(p.reason)
	}
	lines = append(lines, strings.Split(wrap(lipgloss.NewStyle().Bold(true).Render(head), w), "\n")...)
	for i, c := range p.commands {
		if len(p.commands) > 1 {
			lines = append(lines, fmt.Sprintf("Command %d of %d:", i+1, len(p.commands)))
		}
		for _, l := range strings.Split(safe(c), "\n") {
			lines = append(lines, strings.Split(wrapHard("  $ "+l, w), "\n")...)
		}
	}
	var small []string
	if p.approvers != "" {
		small = append(small, "can approve: "+safetext.Line(strings.ReplaceAll(p.approvers, "**", "")))
	}
	if !p.expires.IsZero() {
		small = append(small, "expires in "+p.expires.Sub(m.now()).Round(time.Second).String())
	}
	if len(small) > 0 {
		lines = append(lines, styleDim.Render(strings.Join(small, " · ")))
	}
	keys := "y approve once · A approve always · r reject (with a reason)"
	room := max(m.h/2-2, 3)
	if len(lines) > room {
		m.barOff = min(m.barOff, len(lines)-room)
		hidden := len(lines) - room
		lines = lines[m.barOff : m.barOff+room]
		keys += fmt.Sprintf(" · PgUp/PgDn scroll (%d more lines)", hidden)
	}
	lines = append(lines, lipgloss.NewStyle().Bold(true).Render(truncateWidth(keys, w)))
	return styleBar.Width(w).Render(strings.Join(lines, "\n"))
}

// wrapHard wraps at w cells, breaking inside words too: a command is
// shown whole, whatever its length.
func wrapHard(s string, w int) string {
	if w < 4 {
		return s
	}
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		n := len(r)
		for n > 0 && lipgloss.Width(string(r[:n])) > w {
			n--
		}
		if n == 0 {
			n = 1
		}
		out = append(out, string(r[:n]))
		r = r[n:]
	}
	return strings.Join(out, "\n")
}
