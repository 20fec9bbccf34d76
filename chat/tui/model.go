package tui

import (
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/textarea"
	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/console"
	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/session"
)

// mode is what has the keyboard.
type mode int

const (
	modeChat    mode = iota // the input line
	modeCalls               // selecting a tool call of the current turn
	modeDetails             // one tool call in full
	modePicker              // the session list
	modePrompt              // a one-line question (reject reason, title...)
)

// prompt purposes.
const (
	askReject  = "reject"
	askTitle   = "title"
	askBackend = "backend"
	askNewName = "new"
	askNewBack = "newbackend"
	askSearch  = "search"
	askDestroy = "destroy"
)

// item is one entry of a session's transcript.
type item struct {
	kind string // "user", "card", "text", "notice"
	ref  string
	text string
	card chat.Card
	ts   *session.TurnState
	// out caches the rendering at width w, and lines the same split.
	out   string
	lines []string
	w     int
}

// thread is one session's transcript and latest turn.
type thread struct {
	th    chat.Thread
	items []*item
	byRef map[string]*item
	ts    *session.TurnState // latest turn seen
	card  *chat.Card         // latest turn card (approval value, approvers)
	dirty bool
	// loaded is set once the earlier transcript has been asked for.
	loaded bool
	// newBackend is the backend picked for a new session, until its
	// first task is sent.
	newBackend string
}

// model is the Bubble Tea model: all screen state, touched only by Update.
type model struct {
	cfg Config
	act actions
	now func() time.Time

	w, h    int
	mode    mode
	current chat.Thread
	threads map[string]*thread

	input   textarea.Model
	history []string
	histPos int    // len(history) when not browsing
	search  string // Ctrl-R query while searching history
	inSrch  bool
	errLine string

	vp     scroller
	follow bool

	call    int // selected tool call (modeCalls, modeDetails)
	details viewport.Model
	query   string

	picker []sessionRow
	pick   int
	// pickNote is the last reply from a session other than the current
	// one (the picker's rename, backend, fork, destroy), shown in the
	// picker, where that session's transcript is not.
	pickNote string

	ask      string // prompt purpose
	askInput textarea.Model
	askFor   chat.Thread
	newName  string

	barOff int // approval bar scroll
	md     *markdown

	// tick schedules the next redraw of elapsed times (tea.Tick; tests
	// record it instead of waiting); ticking is true while one is
	// scheduled, so there is never more than one.
	tick    func(time.Duration, func(time.Time) tea.Msg) tea.Cmd
	ticking bool
}

// tickMsg redraws the current turn once a second while a tool call runs
// or an approval counts down to its expiry.
type tickMsg struct{}

func newModel(cfg Config, act actions) *model {
	in := textarea.New()
	// The hint fits an 80-column terminal whole.
	in.Placeholder = "Type a task; / commands, Tab tool calls, Ctrl-S sessions, Shift-Enter newline"
	in.ShowLineNumbers = false
	in.Prompt = "› "
	in.CharLimit = 0
	in.MaxHeight = 8
	in.SetHeight(1)
	in.KeyMap.InsertNewline.SetKeys("shift+enter", "ctrl+j", "alt+enter")
	steadyCursor(&in)
	in.Focus()
	ask := textarea.New()
	steadyCursor(&ask)
	ask.ShowLineNumbers = false
	ask.SetHeight(1)
	ask.CharLimit = 0
	ask.KeyMap.InsertNewline.SetEnabled(false)
	m := &model{
		cfg: cfg, act: act, now: time.Now,
		w: 80, h: 24,
		current: chat.Thread{Platform: console.Platform, Channel: "local", Thread: "default"},
		threads: map[string]*thread{},
		input:   in, askInput: ask,
		details: viewport.New(),
		follow:  true,
		md:      newMarkdown(),
		tick:    tea.Tick,
	}
	if intro := strings.TrimRight(cfg.Intro, "\n"); intro != "" {
		t := m.cur()
		t.items = append(t.items, &item{kind: "intro", text: intro})
		t.dirty = true
	}
	m.layout()
	return m
}

func (m *model) Init() tea.Cmd {
	return tea.Batch(m.run(func() { m.act.turn(m.current) }), m.loadHistory())
}

// loadHistory asks once for the earlier transcript of the current
// session, so its scrollback starts where the session did, not where this
// run of the app did.
func (m *model) loadHistory() tea.Cmd {
	t := m.cur()
	if t.loaded {
		return nil
	}
	t.loaded = true
	th := t.th
	return m.run(func() { m.act.history(th) })
}

// steadyCursor turns the input's cursor blink off. A blinking cursor is a
// timer that redraws the screen twice a second for as long as the app is
// open, idle or not; a steady one costs nothing.
func steadyCursor(ta *textarea.Model) {
	s := ta.Styles()
	s.Cursor.Blink = false
	ta.SetStyles(s)
}

// run wraps an action as a command: it runs off the UI goroutine.
func (m *model) run(f func()) tea.Cmd {
	return func() tea.Msg { f(); return nil }
}

func (m *model) thread(th chat.Thread) *thread {
	t, ok := m.threads[th.ID()]
	if !ok {
		t = &thread{th: th, byRef: map[string]*item{}}
		m.threads[th.ID()] = t
	}
	return t
}

func (m *model) cur() *thread { return m.thread(m.current) }

// Update handles one message.
func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		m.layout()
		return m, nil
	case cardMsg:
		t := m.thread(msg.th)
		it, ok := t.byRef[msg.ref]
		if !ok {
			it = &item{kind: "card", ref: msg.ref}
			t.byRef[msg.ref] = it
			t.items = append(t.items, it)
		}
		it.card, it.out = msg.card, ""
		if msg.ts != nil {
			it.ts = msg.ts
			m.setTurnState(t, *msg.ts)
			c := msg.card
			t.card = &c
		}
		t.dirty = true
		m.afterTurnChange(t)
		return m, m.keepTicking()
	case textMsg:
		t := m.thread(msg.th)
		it := &item{kind: "text", ref: msg.ref, text: msg.text}
		m.notePicker(msg.th, msg.text)
		t.byRef[msg.ref] = it
		t.items = append(t.items, it)
		t.dirty = true
		// An answer may come with no card (a turn without tool calls):
		// the status bar's backend and tokens are read again.
		th := msg.th
		return m, m.run(func() { m.act.turn(th) })
	case noticeMsg:
		th := msg.th
		if th == (chat.Thread{}) {
			th = m.current
		}
		m.notePicker(th, msg.text)
		t := m.thread(th)
		t.items = append(t.items, &item{kind: "notice", text: msg.text})
		t.dirty = true
		return m, nil
	case historyMsg:
		// A long session's history is drawn off the UI goroutine (Glamour
		// takes most of a second for 1,000 answers); the items are handed
		// over with historyReadyMsg and only touched here after that.
		items, w := historyItems(msg.entries), max(m.w, 20)
		th := msg.th
		return m, func() tea.Msg {
			md := newMarkdown()
			for _, it := range items {
				it.out, _ = renderText(it, w, md)
				it.lines, it.w = strings.Split(it.out, "\n"), w
			}
			return historyReadyMsg{th: th, items: items}
		}
	case historyReadyMsg:
		m.thread(msg.th).prepend(msg.items)
		return m, nil
	case turnMsg:
		t := m.thread(msg.th)
		m.setTurnState(t, msg.ts)
		t.dirty = true
		return m, m.keepTicking()
	case tickMsg:
		m.ticking = false
		if !m.live() {
			return m, nil // idle: no timer until a turn runs again
		}
		m.cur().dirty = true
		return m, m.keepTicking()
	case sessionsMsg:
		if msg.err != nil {
			m.errLine = chat.UserMessage(msg.err)
			return m, nil
		}
		m.picker = msg.rows
		m.pick = min(m.pick, max(len(m.picker), 1)) // keep the cursor, within the list (row 0 is "new")
		return m, nil
	case refreshMsg:
		if m.mode == modePicker {
			return m, m.run(m.act.list)
		}
		return m, nil
	case tea.PasteMsg:
		return m.paste(msg)
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, m.forward(msg)
}

// afterTurnChange keeps the keyboard where it makes sense when a turn
// asks for or leaves an approval.
func (m *model) afterTurnChange(t *thread) {
	if t.th != m.current {
		return
	}
	if m.approval() == nil {
		m.barOff = 0
		if m.mode == modePrompt && m.ask == askReject {
			m.mode = modeChat
		}
	}
}

// notePicker keeps a reply to another session for the picker: its
// first line, without Markdown emphasis, neutralised.
func (m *model) notePicker(th chat.Thread, text string) {
	if th == m.current || (m.mode != modePicker && m.mode != modePrompt) {
		return
	}
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.NewReplacer("**", "", "`", "").Replace(line)
	m.pickNote = th.Thread + ": " + safetext.Line(line)
}

// live reports whether the current session shows something that changes
// with the clock alone: a running call's elapsed time or an approval's
// time to expiry.
func (m *model) live() bool {
	ts := m.cur().ts
	if ts == nil {
		return false
	}
	if ts.Status == session.StatusAwaitingApproval && ts.Pending != nil {
		return true
	}
	for _, c := range ts.ToolCalls {
		if c.Status == session.CallRunning {
			return true
		}
	}
	return false
}

// keepTicking schedules the next redraw when the screen is live and none
// is scheduled. An idle app schedules nothing, so it costs no CPU.
func (m *model) keepTicking() tea.Cmd {
	if m.ticking || !m.live() {
		return nil
	}
	m.ticking = true
	return m.tick(time.Second, func(time.Time) tea.Msg { return tickMsg{} })
}

// forward hands other messages (cursor blink) to the focused widget.
func (m *model) forward(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	switch m.mode {
	case modePrompt:
		m.askInput, cmd = m.askInput.Update(msg)
	case modeDetails:
		m.details, cmd = m.details.Update(msg)
	default:
		m.input, cmd = m.input.Update(msg)
	}
	return cmd
}

// paste takes a paste of any size up to MaxMessageBytes, and refuses a
// larger one whole with a clear error: a cut message would be worse.
func (m *model) paste(msg tea.PasteMsg) (tea.Model, tea.Cmd) {
	target := &m.input
	if m.mode == modePrompt {
		target = &m.askInput
	} else if m.mode != modeChat {
		return m, nil
	}
	if n := len(target.Value()) + len(msg.Content); n > MaxMessageBytes {
		m.errLine = fmt.Sprintf("That paste would make the message %s; the limit is %s. Nothing was pasted.", sizeText(n), sizeText(MaxMessageBytes))
		return m, nil
	}
	m.errLine = ""
	target.InsertString(strings.ReplaceAll(msg.Content, "\r\n", "\n"))
	m.layout()
	return m, nil
}

func sizeText(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/1024, n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// layout sizes the widgets to the window.
func (m *model) layout() {
	w := max(m.w, 20)
	m.input.SetWidth(w)
	m.input.SetHeight(min(max(m.input.LineCount(), 1), 8))
	m.askInput.SetWidth(w)
	m.details.SetWidth(w)
	m.details.SetHeight(max(m.h-2, 3))
	for _, t := range m.threads {
		t.dirty = true
	}
}

// approval is the current session's pending approval, if any.
func (m *model) approval() *pendingView {
	t := m.cur()
	if t.ts == nil || t.card == nil {
		return nil
	}
	return pendingOf(*t.ts, *t.card)
}

var (
	styleStatus = lipgloss.NewStyle().Reverse(true)
	styleErr    = lipgloss.NewStyle().Foreground(lipgloss.Color("9")).Bold(true)
	styleBar    = lipgloss.NewStyle().Border(lipgloss.NormalBorder(), true, false, false, false).BorderForeground(lipgloss.Color("11"))
	styleDim    = lipgloss.NewStyle().Faint(true)
	styleSel    = lipgloss.NewStyle().Reverse(true)
	styleUser   = lipgloss.NewStyle().Foreground(lipgloss.Color("12")).Bold(true)
)

// View draws the screen.
func (m *model) View() tea.View {
	var s string
	switch {
	case m.mode == modePicker:
		s = m.viewPicker()
	case m.mode == modeDetails:
		s = m.viewDetails()
	case m.mode == modePrompt && m.ask == askSearch:
		s = m.viewDetails() + "\n" + m.askInput.View()
	case m.mode == modePrompt && m.ask != askReject:
		s = m.viewPicker() + "\n" + m.askInput.View()
	default:
		s = m.viewChat()
	}
	v := tea.NewView(s)
	v.AltScreen = true
	v.WindowTitle = "sandbot"
	return v
}

// setTurnState keeps the newest state of t's turn: states come from the
// watcher (ObserveTurn) and from the adapter's and the status bar's own
// queries, which may answer out of order, so an older one never replaces
// a newer one. An open details view is redrawn from it, so a call that
// finishes while it is shown does not stay "running" there.
func (m *model) setTurnState(t *thread, ts session.TurnState) {
	if old := t.ts; old != nil && (ts.Turn < old.Turn || (ts.Turn == old.Turn && ts.Version < old.Version)) {
		return
	}
	t.ts = &ts
	if m.mode == modeDetails && t == m.cur() {
		y := m.details.YOffset()
		m.details.SetContent(m.detailsText(m.query))
		m.details.SetYOffset(y)
	}
}
