package tui

import (
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/sandbot/sandbot/chat"
)

func (m *model) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	ks := k.String()
	if ks == "ctrl+c" {
		return m, tea.Quit
	}
	switch m.mode {
	case modePicker:
		return m.keyPicker(ks)
	case modeDetails:
		return m.keyDetails(k, ks)
	case modeCalls:
		return m.keyCalls(ks)
	case modePrompt:
		return m.keyPrompt(k, ks)
	}
	return m.keyChat(k, ks)
}

// keyChat: the input line, and the approval keys while one is pending
// and the input is empty (so a typed message is never taken for one).
func (m *model) keyChat(k tea.KeyPressMsg, ks string) (tea.Model, tea.Cmd) {
	if p := m.approval(); p != nil && m.input.Value() == "" {
		switch ks {
		case "y", "a":
			m.errLine = ""
			return m, m.decide(chat.ActionApprove, p, "")
		case "A":
			m.errLine = ""
			return m, m.decide(chat.ActionApproveAlways, p, "")
		case "r", "n":
			m.openPrompt(askReject, "Reason for rejecting (Enter sends, Esc cancels): ", "")
			return m, nil
		case "pgdown", "ctrl+d":
			m.barOff++
			return m, nil
		case "pgup", "ctrl+u":
			m.barOff = max(m.barOff-1, 0)
			return m, nil
		}
	}
	if m.inSrch {
		return m.keySearch(k, ks)
	}
	switch ks {
	case "ctrl+s":
		m.mode, m.pick = modePicker, 0
		return m, m.run(m.act.list)
	case "tab":
		if m.inputIsCommand() {
			m.complete()
			return m, nil
		}
		if t := m.cur(); t.ts != nil && len(t.ts.ToolCalls) > 0 {
			m.mode, m.call = modeCalls, len(t.ts.ToolCalls)-1
		}
		return m, nil
	case "enter":
		return m, m.submit()
	case "ctrl+r":
		m.inSrch, m.search = true, ""
		return m, nil
	case "up":
		if m.input.Line() == 0 && len(m.history) > 0 {
			m.histPos = max(m.histPos-1, 0)
			m.input.SetValue(m.history[m.histPos])
			m.layout()
			return m, nil
		}
	case "down":
		if m.input.Line() == m.input.LineCount()-1 && m.histPos < len(m.history) {
			m.histPos++
			if m.histPos == len(m.history) {
				m.input.SetValue("")
			} else {
				m.input.SetValue(m.history[m.histPos])
			}
			m.layout()
			return m, nil
		}
	case "pgup", "pgdown", "ctrl+home", "ctrl+end", "shift+up", "shift+down":
		return m, m.scroll(ks)
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	if len(m.input.Value()) > MaxMessageBytes {
		m.errLine = "The message is over the 64 KiB limit; shorten it before sending."
	} else if strings.HasPrefix(m.errLine, "The message is over") {
		m.errLine = ""
	}
	m.layout()
	return m, cmd
}

// keySearch is Ctrl-R: type to find the newest earlier input holding the
// query; Ctrl-R again finds an older one, Enter takes it, Esc gives up.
func (m *model) keySearch(k tea.KeyPressMsg, ks string) (tea.Model, tea.Cmd) {
	switch ks {
	case "esc", "ctrl+g":
		m.inSrch = false
		return m, nil
	case "enter":
		m.inSrch = false
		return m, nil
	case "ctrl+r":
		m.findHistory(m.histPos - 1)
		return m, nil
	case "backspace":
		if r := []rune(m.search); len(r) > 0 {
			m.search = string(r[:len(r)-1])
		}
	default:
		if t := k.Text; t != "" {
			m.search += t
		} else {
			return m, nil
		}
	}
	m.findHistory(len(m.history) - 1)
	return m, nil
}

func (m *model) findHistory(from int) {
	for i := min(from, len(m.history)-1); i >= 0; i-- {
		if strings.Contains(m.history[i], m.search) {
			m.histPos = i
			m.input.SetValue(m.history[i])
			m.layout()
			return
		}
	}
}

// submit sends the input: a command, or a message to the session.
func (m *model) submit() tea.Cmd {
	text := strings.TrimSpace(m.input.Value())
	if text == "" {
		return nil
	}
	if len(text) > MaxMessageBytes {
		m.errLine = "The message is " + sizeText(len(text)) + "; the limit is " + sizeText(MaxMessageBytes) + ". It was not sent."
		return nil
	}
	m.errLine = ""
	m.history = append(m.history, text)
	m.histPos = len(m.history)
	m.input.SetValue("")
	m.layout()
	word, rest, _ := strings.Cut(text, " ")
	switch strings.ToLower(word) {
	case "/quit", "/exit":
		return tea.Quit
	case "/sessions":
		if rest == "" {
			m.mode, m.pick = modePicker, 0
			return m.run(m.act.list)
		}
	case "/session":
		if name := strings.TrimSpace(rest); name != "" && !strings.ContainsAny(name, " \t") {
			return m.switchTo(name)
		}
		m.note("A session name is one word, like /session experiment.")
		return nil
	}
	th := m.current
	t := m.cur()
	if !strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "!") {
		t.items = append(t.items, &item{kind: "user", text: text})
		t.dirty = true
		m.follow = true
	}
	// The first task of a new session starts it on the backend its user
	// picked (a command would not start it).
	backend := ""
	if !strings.HasPrefix(text, "/") {
		backend, t.newBackend = t.newBackend, ""
	}
	return m.run(func() { m.act.message(th, text, backend) })
}

func (m *model) note(text string) {
	t := m.cur()
	t.items = append(t.items, &item{kind: "notice", text: text})
	t.dirty = true
}

func (m *model) switchTo(name string) tea.Cmd {
	m.current.Thread = name
	m.mode, m.follow = modeChat, true
	m.cur().dirty = true
	th := m.current
	return tea.Batch(m.run(func() { m.act.turn(th) }), m.loadHistory(), m.keepTicking())
}

func (m *model) decide(id string, p *pendingView, reason string) tea.Cmd {
	th, value := m.current, p.value
	return m.run(func() { m.act.action(th, id, value, reason) })
}

func (m *model) scroll(ks string) tea.Cmd {
	m.refresh()
	switch ks {
	case "pgup":
		m.vp.scroll(-m.vp.h)
	case "pgdown":
		m.vp.scroll(m.vp.h)
	case "shift+up":
		m.vp.scroll(-1)
	case "shift+down":
		m.vp.scroll(1)
	case "ctrl+home":
		m.vp.top()
	case "ctrl+end":
		m.vp.bottom()
	}
	m.follow = m.vp.atBottom()
	return nil
}

func (m *model) keyCalls(ks string) (tea.Model, tea.Cmd) {
	t := m.cur()
	n := 0
	if t.ts != nil {
		n = len(t.ts.ToolCalls)
	}
	switch ks {
	case "esc", "tab", "q":
		m.mode = modeChat
	case "up", "k":
		m.call = max(m.call-1, 0)
	case "down", "j":
		m.call = min(m.call+1, n-1)
	case "enter":
		if m.call >= 0 && m.call < n {
			m.openDetails()
		}
	}
	return m, nil
}

func (m *model) openDetails() {
	m.mode, m.query = modeDetails, ""
	m.details.SetContent(m.detailsText(""))
	m.details.GotoTop()
}

func (m *model) keyDetails(k tea.KeyPressMsg, ks string) (tea.Model, tea.Cmd) {
	switch ks {
	case "esc", "q":
		m.mode = modeCalls
		return m, nil
	case "/":
		m.openPrompt(askSearch, "Search: ", "")
		return m, nil
	case "n":
		m.findNext()
		return m, nil
	}
	var cmd tea.Cmd
	m.details, cmd = m.details.Update(k)
	return m, cmd
}

// findNext scrolls the details view to the next line holding the query.
func (m *model) findNext() {
	if m.query == "" {
		return
	}
	lines := strings.Split(m.detailsText(m.query), "\n")
	from := m.details.YOffset() + 1
	for i := range lines {
		j := (from + i) % len(lines)
		if strings.Contains(strings.ToLower(lines[j]), strings.ToLower(m.query)) {
			m.details.SetYOffset(j)
			return
		}
	}
	m.errLine = "No match for " + m.query
}

// keyPicker: an action on a row runs its chat command and then lists the
// sessions again, so the list shows what the command did.
func (m *model) keyPicker(ks string) (tea.Model, tea.Cmd) {
	n := len(m.picker) + 1 // row 0 is "New session"
	var row *sessionRow
	if m.pick > 0 && m.pick <= len(m.picker) {
		row = &m.picker[m.pick-1]
	}
	m.pickNote = ""
	switch ks {
	case "esc", "q", "ctrl+s":
		m.mode = modeChat
	case "up", "k":
		m.pick = max(m.pick-1, 0)
	case "down", "j":
		m.pick = min(m.pick+1, n-1)
	case "enter":
		if row == nil {
			m.openPrompt(askNewName, "Name of the new session (one word): ", "")
			return m, nil
		}
		return m, m.switchTo(row.th.Thread)
	case "n":
		m.openPrompt(askNewName, "Name of the new session (one word): ", "")
	case "t":
		if row != nil {
			m.askFor = row.th
			m.openPrompt(askTitle, "New title: ", row.title)
		}
	case "b":
		if row != nil {
			m.askFor = row.th
			m.openPrompt(askBackend, "Backend ("+strings.Join(m.cfg.Backends, ", ")+"): ", "")
		}
	case "f":
		if row != nil {
			th := row.th
			return m, m.run(func() { m.act.message(th, "/fork", ""); m.act.list() })
		}
	case "d":
		if row != nil {
			m.askFor = row.th
			m.openPrompt(askDestroy, "Destroy "+row.th.Thread+" and its sandbox? Type yes: ", "")
		}
	case "r":
		return m, m.run(m.act.list)
	}
	return m, nil
}

func (m *model) openPrompt(purpose, label, value string) {
	m.ask = purpose
	m.askInput.Prompt = label
	m.askInput.SetValue(value)
	m.askInput.Focus()
	m.mode = modePrompt
}

// keyPrompt answers the open question; Esc goes back where it came from.
func (m *model) keyPrompt(k tea.KeyPressMsg, ks string) (tea.Model, tea.Cmd) {
	back := modeChat
	switch m.ask {
	case askTitle, askBackend, askNewName, askNewBack, askDestroy:
		back = modePicker
	case askSearch:
		back = modeDetails
	}
	switch ks {
	case "esc":
		m.mode = back
		return m, nil
	case "enter":
	default:
		var cmd tea.Cmd
		m.askInput, cmd = m.askInput.Update(k)
		return m, cmd
	}
	v := strings.TrimSpace(m.askInput.Value())
	m.mode = back
	th := m.askFor
	switch m.ask {
	case askReject:
		if p := m.approval(); p != nil {
			return m, m.decide(chat.ActionReject, p, v)
		}
	case askSearch:
		m.query = v
		m.details.SetContent(m.detailsText(v))
		m.details.SetYOffset(-1)
		m.findNext()
	case askTitle:
		if v != "" {
			return m, m.run(func() { m.act.message(th, "/title "+v, ""); m.act.list() })
		}
	case askBackend:
		if v != "" {
			return m, m.run(func() { m.act.message(th, "/backend "+v, "") })
		}
	case askDestroy:
		if strings.EqualFold(v, "yes") {
			return m, m.run(func() { m.act.message(th, "/destroy confirm", ""); m.act.list() })
		}
	case askNewName:
		if v == "" || strings.ContainsAny(v, " \t/") {
			m.errLine = "A session name is one word."
			return m, nil
		}
		for _, r := range m.picker {
			if r.th.Thread == v {
				cmd := m.switchTo(v)
				m.note("Session " + v + " already exists; it is open now.")
				return m, cmd
			}
		}
		m.newName = v
		m.openPrompt(askNewBack, "Backend ("+strings.Join(m.cfg.Backends, ", ")+"; Enter: "+m.cfg.Backends[0]+"): ", "")
	case askNewBack:
		if v == "" {
			v = m.cfg.Backends[0]
		}
		if !slices.Contains(m.cfg.Backends, v) {
			m.errLine = "Pick one of: " + strings.Join(m.cfg.Backends, ", ") + "."
			m.openPrompt(askNewBack, m.askInput.Prompt, "")
			return m, nil
		}
		m.errLine = ""
		cmd := m.switchTo(m.newName)
		m.cur().newBackend = v
		m.note("New session " + m.newName + " on " + v + ": type its first task; it starts the session there.")
		return m, cmd
	}
	return m, nil
}

func (m *model) inputIsCommand() bool {
	v := m.input.Value()
	return strings.HasPrefix(v, "/") && !strings.Contains(v, " ")
}

// complete finishes a /command from the menu: the one match, or the
// longest common prefix of several.
func (m *model) complete() {
	ms := commandMatches(m.input.Value())
	if len(ms) == 0 {
		return
	}
	p := ms[0]
	for _, s := range ms[1:] {
		for !strings.HasPrefix(s, p) {
			p = p[:len(p)-1]
		}
	}
	if len(ms) == 1 {
		p += " "
	}
	m.input.SetValue(p)
}

// commandMatches are the menu's commands starting with prefix: the core's
// table (the same as Slack's and Discord's) and the terminal's own.
func commandMatches(prefix string) []string {
	var out []string
	for _, c := range commandList() {
		if strings.HasPrefix(c, strings.ToLower(prefix)) {
			out = append(out, c)
		}
	}
	return out
}
