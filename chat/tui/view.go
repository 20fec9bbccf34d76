package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/session"
)

// commandList is the / menu: the core's commands and the terminal's own.
func commandList() []string {
	out := []string{"/session", "/quit"}
	for _, c := range chat.Commands() {
		out = append(out, "/"+c.Name)
	}
	return out
}

// safe neutralises text from the model, a command or its output: controls,
// escape sequences and bidi overrides show as visible escapes, so nothing
// can move the cursor, clear the screen, retitle the terminal or hide text.
func safe(s string) string { return safetext.Text(s) }

// refresh rebuilds the transcript when it changed; items keep their
// rendering, so a long session costs only the join.
func (m *model) refresh() {
	t := m.cur()
	h := m.transcriptHeight()
	m.vp.setHeight(h)
	if !t.dirty {
		if m.follow {
			m.vp.bottom()
		}
		return
	}
	t.dirty = false
	w := max(m.w, 20)
	lines := make([]string, 0, len(m.vp.lines)+8)
	last := m.lastTurnItem(t)
	for _, it := range t.items {
		if it == last {
			// Redrawn in place: selection and elapsed times change.
			lines = append(lines, strings.Split(m.renderTurn(t, it, w), "\n")...)
			continue
		}
		if it.out == "" || it.w != w {
			it.out, it.w = m.renderItem(it, w), w
			it.lines = strings.Split(it.out, "\n")
		}
		lines = append(lines, it.lines...)
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	m.vp.setLines(lines)
	if m.follow {
		m.vp.bottom()
	}
}

// lastTurnItem is the card of the session's latest turn.
func (m *model) lastTurnItem(t *thread) *item {
	for i := len(t.items) - 1; i >= 0; i-- {
		if t.items[i].ts != nil {
			return t.items[i]
		}
	}
	return nil
}

func (m *model) renderItem(it *item, w int) string {
	if s, ok := renderText(it, w, m.md); ok {
		return s
	}
	if it.ts != nil {
		return m.renderTurn(nil, it, w)
	}
	return m.renderCard(it.card, w)
}

// renderText draws the items that are text alone (no turn state, no
// card): it needs nothing of the model, so a session's history can be
// drawn off the UI goroutine with a renderer of its own.
func renderText(it *item, w int, md *markdown) (string, bool) {
	switch it.kind {
	case "user":
		return styleUser.Render("you ›") + " " + wrap(safe(it.text), w-6), true
	case "notice":
		return styleDim.Render(wrap("· "+safe(it.text), w)), true
	case "intro":
		return styleDim.Render(wrap(safe(it.text), w)), true
	case "ran":
		return styleDim.Render(truncateWidth("  $ "+safetext.Line(it.text), w)), true
	case "text":
		return md.render(it.text, w), true
	}
	return "", false
}

// renderCard draws a command's reply card (no turn state behind it).
func (m *model) renderCard(c chat.Card, w int) string {
	var b strings.Builder
	b.WriteString(lipgloss.NewStyle().Bold(true).Render(wrap(safe(c.Title), w)) + "\n")
	for _, bl := range c.Blocks {
		switch bl.Kind {
		case chat.BlockText, chat.BlockContext:
			b.WriteString(m.md.render(bl.Text, w) + "\n")
		case chat.BlockCode:
			b.WriteString(styleDim.Render(wrap(safe(bl.Text), w)) + "\n")
		case chat.BlockFields:
			for _, f := range bl.Fields {
				b.WriteString(wrap(safe(f.Label)+": "+safe(f.Value), w) + "\n")
			}
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

var statusIcon = map[session.CallStatus]string{
	session.CallPending: "·", session.CallAwaitingApproval: "✋", session.CallRunning: "⏳",
	session.CallCompleted: "✅", session.CallFailed: "❌", session.CallRejected: "🚫",
}

// renderTurn draws a turn from its structured state: each call's status,
// command, elapsed time, exit code and last lines of output. t is the
// live thread (selection shown) or nil for an old turn.
func (m *model) renderTurn(t *thread, it *item, w int) string {
	ts := *it.ts
	if t != nil && t.ts != nil && t.ts.Turn == ts.Turn {
		ts = *t.ts
	}
	var b strings.Builder
	b.WriteString(lipgloss.NewStyle().Bold(true).Render(wrap(safe(it.card.Title), w)) + "\n")
	now := m.now()
	for i, c := range ts.ToolCalls {
		line := fmt.Sprintf("%s %s", icon(c.Status), safetext.Line(callCommand(c)))
		if d := elapsed(c, now); d != "" {
			line += " · " + d
		}
		if c.ExitCode != nil {
			line += fmt.Sprintf(" · exit %d", *c.ExitCode)
		}
		line = truncateWidth(line, w)
		if t != nil && (m.mode == modeCalls || m.mode == modeDetails) && i == m.call {
			line = styleSel.Render(line)
		}
		b.WriteString(line + "\n")
		if c.Output != "" && (t != nil || i >= len(ts.ToolCalls)-1) {
			for _, l := range lastLines(c.Output, 3) {
				b.WriteString(styleDim.Render("  │ "+truncateWidth(safetext.Line(l), w-4)) + "\n")
			}
		}
	}
	if ts.FinalText != "" && ts.Status.Active() {
		b.WriteString(styleDim.Render("…") + "\n")
	}
	if ts.Error != "" {
		b.WriteString(styleErr.Render(wrap(safe(ts.Error), w)) + "\n")
	}
	for _, n := range ts.Notices {
		b.WriteString(styleDim.Render(wrap("· "+safe(n), w)) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func icon(s session.CallStatus) string {
	if i, ok := statusIcon[s]; ok {
		return i
	}
	return "•"
}

// callCommand is a call's commands on one line.
func callCommand(c session.ToolCallState) string {
	if len(c.Commands) > 0 {
		return strings.Join(c.Commands, " && ")
	}
	if c.Arguments != "" {
		return c.Name + " " + c.Arguments
	}
	return c.Name
}

func elapsed(c session.ToolCallState, now time.Time) string {
	switch {
	case c.Duration > 0:
		return c.Duration.Round(100 * time.Millisecond).String()
	case c.Status == session.CallRunning && !c.StartedAt.IsZero():
		return now.Sub(c.StartedAt).Round(time.Second).String()
	}
	return ""
}

func lastLines(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// truncateWidth cuts a one-line summary to w cells. Only summaries are
// cut; commands awaiting approval and the details view show everything.
func truncateWidth(s string, w int) string {
	if w < 2 || lipgloss.Width(s) <= w {
		return s
	}
	r := []rune(s)
	for len(r) > 0 && lipgloss.Width(string(r))+1 > w {
		r = r[:len(r)-1]
	}
	return string(r) + "…"
}

func wrap(s string, w int) string {
	return lipgloss.NewStyle().Width(max(w, 10)).Render(s)
}

// transcriptHeight is what is left of the screen for the transcript.
func (m *model) transcriptHeight() int {
	return max(m.h-lipgloss.Height(m.bottom()), 1)
}

// bottom is everything under the transcript: approval bar, error line,
// input or prompt, status bar.
func (m *model) bottom() string {
	var parts []string
	if p := m.approval(); p != nil {
		parts = append(parts, m.viewApproval(p))
	}
	if m.errLine != "" {
		parts = append(parts, styleErr.Render(wrap(m.errLine, m.w)))
	}
	switch {
	case m.mode == modePrompt:
		parts = append(parts, m.askInput.View())
	case m.inSrch:
		parts = append(parts, "(history search) "+safe(m.search)+": "+safetext.Line(m.input.Value()))
	case m.mode == modeCalls:
		parts = append(parts, styleDim.Render("↑/↓ pick a tool call · Enter: details · Esc: back"))
	default:
		parts = append(parts, m.input.View())
		if ms := m.menu(); ms != "" {
			parts = append(parts, ms)
		}
	}
	parts = append(parts, m.statusBar())
	return strings.Join(parts, "\n")
}

// menu lists the / commands that match the input.
func (m *model) menu() string {
	if !m.inputIsCommand() {
		return ""
	}
	ms := commandMatches(m.input.Value())
	if len(ms) == 0 {
		return styleDim.Render("no such command; /help lists them")
	}
	return styleDim.Render(truncateWidth("Tab completes: "+strings.Join(ms, " "), m.w))
}

func (m *model) statusBar() string {
	t := m.cur()
	state, backend, queued, tokens := "idle", "", 0, 0
	if ts := t.ts; ts != nil {
		state, backend, queued, tokens = chat.StatusWord(ts.Status), ts.Backend, ts.Queued, ts.Usage.Total()
	} else if t.newBackend != "" {
		state, backend = "new", t.newBackend
	}
	parts := []string{"session " + m.current.Thread}
	if backend != "" {
		parts = append(parts, backend)
	}
	parts = append(parts, state)
	if queued > 0 {
		parts = append(parts, fmt.Sprintf("%d queued", queued))
	}
	if m.cfg.Model != "" {
		parts = append(parts, m.cfg.Model)
	}
	parts = append(parts, fmt.Sprintf("%d tokens", tokens))
	w := max(m.w, 20)
	left := safetext.Line(strings.Join(parts, " · "))
	const hint, label = " · Ctrl-S sessions", "Temporal UI"
	// The Temporal UI link is shown whole or not at all: a cut URL leads
	// nowhere. When it does not fit, a short label carries it as a
	// terminal hyperlink (OSC 8), and /status prints it in full.
	if u := m.cfg.UIURL(m.current.ID()); u != "" && safetext.Clean(u) && !strings.ContainsAny(u, " ") {
		switch {
		case lipgloss.Width(left+" · "+u+hint) <= w:
			left += " · " + u
		case lipgloss.Width(left+" · "+label+hint) <= w:
			pre := styleStatus.Render(left + " · ")
			link := styleStatus.Hyperlink(u).Render(label)
			rest := hint + strings.Repeat(" ", w-lipgloss.Width(left+" · "+label+hint))
			return pre + link + styleStatus.Render(rest)
		}
	}
	s := truncateWidth(left+hint, w)
	return styleStatus.Width(w).Render(s)
}

func (m *model) viewChat() string {
	bottom := m.bottom()
	m.refresh()
	return m.vp.view() + "\n" + bottom
}

func (m *model) viewPicker() string {
	var b strings.Builder
	b.WriteString(lipgloss.NewStyle().Bold(true).Render("Sessions") + styleDim.Render("  Enter open · n new · t title · f fork · b backend · d destroy · r reload · Esc back") + "\n\n")
	rows := []string{"+ New session…"}
	now := m.now()
	for _, r := range m.picker {
		title := r.title
		if title == "" {
			title = "(untitled)"
		}
		cur := ""
		if r.th == m.current {
			cur = " ◀"
		}
		turns := fmt.Sprintf("%d turns", r.turns)
		if r.turns == 1 {
			turns = "1 turn"
		}
		rows = append(rows, fmt.Sprintf("%s%s %s · %s · %s · %s · age %s · active %s ago%s",
			strings.Repeat("  ", r.depth)+treeMark(r.depth), safetext.Line(r.th.Thread), safetext.Line(title), safetext.Line(r.backend),
			turns, chat.StatusWord(r.status), ago(now, r.created), ago(now, r.lastActivity), cur))
	}
	// Keep the cursor on screen on a short terminal.
	room := max(m.h-5, 3)
	start := max(0, m.pick-room+1)
	for i := start; i < len(rows) && i < start+room; i++ {
		l := truncateWidth(rows[i], m.w-2)
		if i == m.pick {
			l = styleSel.Render("› " + l)
		} else {
			l = "  " + l
		}
		b.WriteString(l + "\n")
	}
	s := b.String()
	pad := m.h - lipgloss.Height(s) - 1
	if m.mode == modePrompt {
		pad--
	}
	if m.errLine != "" {
		pad--
	}
	if m.pickNote != "" {
		pad--
	}
	s += strings.Repeat("\n", max(pad, 0))
	if m.pickNote != "" {
		s += styleDim.Render(truncateWidth(m.pickNote, m.w)) + "\n"
	}
	if m.errLine != "" {
		s += styleErr.Render(truncateWidth(m.errLine, m.w)) + "\n"
	}
	return s + m.statusBar()
}

func treeMark(depth int) string {
	if depth > 0 {
		return "└ "
	}
	return ""
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// detailsText is the selected call in full: every argument and all of
// its output, neutralised.
func (m *model) detailsText(query string) string {
	t := m.cur()
	if t.ts == nil || m.call < 0 || m.call >= len(t.ts.ToolCalls) {
		return ""
	}
	c := t.ts.ToolCalls[m.call]
	var b strings.Builder
	fmt.Fprintf(&b, "Tool call %d of %d: %s (%s)\n", m.call+1, len(t.ts.ToolCalls), safetext.Line(c.Name), c.Status)
	for i, cmd := range c.Commands {
		fmt.Fprintf(&b, "\nCommand %d:\n%s\n", i+1, safe(cmd))
	}
	if c.Arguments != "" {
		fmt.Fprintf(&b, "\nArguments:\n%s\n", safe(c.Arguments))
	}
	if c.ExitCode != nil {
		fmt.Fprintf(&b, "\nExit code: %d\n", *c.ExitCode)
	}
	if d := elapsed(c, m.now()); d != "" {
		fmt.Fprintf(&b, "Elapsed: %s\n", d)
	}
	if c.Decision != nil {
		fmt.Fprintf(&b, "Decision: %s by %s\n", c.Decision.Decision, safetext.Line(c.Decision.User.Name))
	}
	if c.Error != "" {
		fmt.Fprintf(&b, "\nError:\n%s\n", safe(c.Error))
	}
	fmt.Fprintf(&b, "\nOutput:\n%s\n", safe(c.Output))
	return highlight(wrap(b.String(), m.w), query)
}

// highlight shows every match of query (any case) in reverse video, line
// by line; the text is already neutralised, so query cannot inject.
func highlight(s, query string) string {
	if query == "" {
		return s
	}
	q := strings.ToLower(query)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		low := strings.ToLower(l)
		if len(low) != len(l) || !strings.Contains(low, q) {
			continue // no match, or case folding changed byte offsets
		}
		var b strings.Builder
		for {
			j := strings.Index(low, q)
			if j < 0 {
				break
			}
			b.WriteString(l[:j])
			b.WriteString(styleSel.Render(l[j : j+len(q)]))
			l, low = l[j+len(q):], low[j+len(q):]
		}
		b.WriteString(l)
		lines[i] = b.String()
	}
	return strings.Join(lines, "\n")
}

func (m *model) viewDetails() string {
	help := "↑/↓ PgUp/PgDn scroll · / search · n next · Esc back"
	if m.query != "" {
		help = "search: " + safetext.Line(m.query) + " · " + help
	}
	s := m.details.View() + "\n" + styleDim.Render(truncateWidth(help, m.w))
	if m.mode == modePrompt {
		return s
	}
	return s + "\n" + m.statusBar()
}
