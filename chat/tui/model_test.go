package tui

import (
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

// recorder is the core as the model sees it: it records what was asked.
type recorder struct {
	mu       sync.Mutex
	messages []string
	actions  []string
	ticks    []time.Duration
	// histories are the sessions whose earlier transcript was asked for.
	histories []string
}

func (r *recorder) acts() actions {
	return actions{
		message: func(th chat.Thread, text, backend string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if backend != "" {
				text += " @" + backend
			}
			r.messages = append(r.messages, th.Thread+": "+text)
		},
		action: func(th chat.Thread, id, value, reason string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.actions = append(r.actions, id+" "+value+" "+reason)
		},
		list: func() {},
		turn: func(chat.Thread) {},
		history: func(th chat.Thread) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.histories = append(r.histories, th.Thread)
		},
	}
}

func newTestModel(t testing.TB) (*model, *recorder) {
	t.Helper()
	r := &recorder{}
	m := newModel(Config{Backends: []string{"local", "docker"}, Model: "demo", UIURL: func(string) string { return "" }}, r.acts())
	m.now = func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) }
	// A timer is recorded, never waited for: the tests stay fast and say
	// when the model asks for one.
	m.tick = func(d time.Duration, _ func(time.Time) tea.Msg) tea.Cmd {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ticks = append(r.ticks, d)
		return nil
	}
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	return m, r
}

// do runs a command the way the program would, synchronously, and feeds
// back any message it returns.
func do(m *model, cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	msg := cmd()
	if b, ok := msg.(tea.BatchMsg); ok {
		for _, c := range b {
			do(m, c)
		}
		return
	}
	if msg != nil {
		_, next := m.Update(msg)
		_ = next
	}
}

func press(m *model, keys ...string) {
	for _, k := range keys {
		var msg tea.KeyPressMsg
		switch k {
		case "enter":
			msg = tea.KeyPressMsg{Code: tea.KeyEnter}
		case "esc":
			msg = tea.KeyPressMsg{Code: tea.KeyEscape}
		case "up":
			msg = tea.KeyPressMsg{Code: tea.KeyUp}
		case "down":
			msg = tea.KeyPressMsg{Code: tea.KeyDown}
		case "tab":
			msg = tea.KeyPressMsg{Code: tea.KeyTab}
		case "ctrl+s":
			msg = tea.KeyPressMsg{Code: 's', Mod: tea.ModCtrl}
		case "ctrl+r":
			msg = tea.KeyPressMsg{Code: 'r', Mod: tea.ModCtrl}
		default:
			r := []rune(k)
			msg = tea.KeyPressMsg{Code: r[0], Text: k}
			if len(r) == 1 && r[0] >= 'A' && r[0] <= 'Z' {
				msg = tea.KeyPressMsg{Code: r[0] + 32, Text: k, Mod: tea.ModShift, ShiftedCode: r[0]}
			}
		}
		_, cmd := m.Update(msg)
		do(m, cmd)
	}
}

func typeText(m *model, s string) {
	for _, r := range s {
		_, cmd := m.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
		do(m, cmd)
	}
}

func screen(m *model) string { return ansi.Strip(m.View().Content) }

var th = chat.Thread{Platform: "console", Channel: "local", Thread: "default"}

func approvalCard() (chat.Card, session.TurnState) {
	ts := session.TurnState{Turn: 1, Status: session.StatusAwaitingApproval, Backend: "local",
		ToolCalls: []session.ToolCallState{
			{CallID: "c0", Name: "shell", Commands: []string{"ls"}, Status: session.CallCompleted, ExitCode: new(int), Output: "a\nb\nc\nlast-line", Duration: time.Second},
			{CallID: "c1", Name: "shell", Commands: []string{"make deploy", "echo " + strings.Repeat("x", 300) + " TAIL"}, Status: session.CallAwaitingApproval},
		},
		Pending: &session.PendingApproval{CallID: "c1", Command: "make deploy", Reason: "not read-only", ExpiresAt: time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)},
	}
	card := chat.Card{Title: "✋ Waiting for approval", Blocks: []chat.Block{
		{Kind: chat.BlockContext, Text: "Can approve: @ann · Expires 12:30 UTC"},
		{Kind: chat.BlockActions, Buttons: []chat.Button{{ID: chat.ActionApprove, Value: "V1"}, {ID: chat.ActionReject, Value: "V1"}}},
	}}
	return card, ts
}

func TestApprovalBarShowsEverythingAndKeysDecide(t *testing.T) {
	m, r := newTestModel(t)
	card, ts := approvalCard()
	m.Update(cardMsg{th: th, ref: "card-1", card: card, ts: &ts})
	s := screen(m)
	for _, want := range []string{"Approval needed: not read-only", "Command 1 of 2", "make deploy", "TAIL", "can approve: @ann", "expires in 30m0s", "y approve once"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	press(m, "y")
	press(m, "A")
	press(m, "r")
	typeText(m, "not today")
	press(m, "enter")
	want := []string{"approve V1 ", "approve_always V1 ", "reject V1 not today"}
	if strings.Join(r.actions, "|") != strings.Join(want, "|") {
		t.Errorf("actions = %q, want %q", r.actions, want)
	}
	if len(r.messages) != 0 {
		t.Errorf("approval keys reached the session: %q", r.messages)
	}
}

func TestTypedTextIsNotAnApproval(t *testing.T) {
	m, r := newTestModel(t)
	card, ts := approvalCard()
	m.Update(cardMsg{th: th, ref: "card-1", card: card, ts: &ts})
	typeText(m, "/status")
	press(m, "enter")
	if len(r.actions) != 0 || len(r.messages) != 1 || r.messages[0] != "default: /status" {
		t.Errorf("actions %q messages %q", r.actions, r.messages)
	}
}

func TestToolCallsRedrawnInPlaceAndDetails(t *testing.T) {
	m, _ := newTestModel(t)
	card, ts := approvalCard()
	m.Update(cardMsg{th: th, ref: "card-1", card: card, ts: &ts})
	ts2 := ts
	ts2.Status, ts2.Pending = session.StatusThinking, nil
	ts2.ToolCalls = append([]session.ToolCallState(nil), ts.ToolCalls...)
	ts2.ToolCalls[1].Status = session.CallCompleted
	ts2.ToolCalls[1].Output = strings.Repeat("line\n", 100) + "NEEDLE here\nend"
	ts2.ToolCalls[1].ExitCode = new(int)
	m.Update(cardMsg{th: th, ref: "card-1", card: chat.Card{Title: "⚙️ Working"}, ts: &ts2})
	s := screen(m)
	if strings.Count(s, "Working") != 1 || strings.Contains(s, "Waiting for approval") {
		t.Errorf("the card was not replaced in place:\n%s", s)
	}
	if !strings.Contains(s, "✅ ls · 1s · exit 0") || !strings.Contains(s, "│ last-line") {
		t.Errorf("call line or output tail missing:\n%s", s)
	}
	press(m, "tab")
	if m.mode != modeCalls || m.call != 1 {
		t.Fatalf("tab: mode %d call %d", m.mode, m.call)
	}
	press(m, "enter")
	if m.mode != modeDetails {
		t.Fatal("enter did not open the details")
	}
	s = screen(m)
	if !strings.Contains(s, "Command 2:") || !strings.Contains(s, "Tool call 2 of 2") {
		t.Errorf("details lack the full arguments:\n%s", s)
	}
	press(m, "/")
	typeText(m, "needle")
	press(m, "enter")
	if s := screen(m); !strings.Contains(s, "NEEDLE here") {
		t.Errorf("search did not scroll to the match:\n%s", s)
	}
	if raw := screenRaw(m); !strings.Contains(raw, "\x1b[7mNEEDLE") {
		t.Errorf("the match is not highlighted: %q", raw)
	}
	press(m, "esc", "esc")
	if m.mode != modeChat {
		t.Errorf("esc esc: mode %d", m.mode)
	}
}

func TestPickerNavigationAndActions(t *testing.T) {
	m, r := newTestModel(t)
	press(m, "ctrl+s")
	if m.mode != modePicker {
		t.Fatal("ctrl+s did not open the picker")
	}
	now := m.now()
	mk := func(name, parent string) sessionRow {
		return sessionRow{th: chat.Thread{Platform: "console", Channel: "local", Thread: name}, title: "T " + name, backend: "local", parent: parent, lastActivity: now, created: now.Add(-time.Hour)}
	}
	rows := treeOrder([]sessionRow{mk("b", ""), mk("a-fork", th.ID()), mk("default", "")})
	m.Update(sessionsMsg{rows: rows})
	s := screen(m)
	if !strings.Contains(s, "New session") || !strings.Contains(s, "└ a-fork") {
		t.Fatalf("picker:\n%s", s)
	}
	if rows[0].th.Thread != "b" || rows[1].th.Thread != "default" || rows[2].th.Thread != "a-fork" {
		t.Errorf("tree order = %v %v %v", rows[0].th.Thread, rows[1].th.Thread, rows[2].th.Thread)
	}
	press(m, "down", "down", "down") // b, default, a-fork
	press(m, "t")
	typeText(m, "renamed")
	press(m, "enter")
	press(m, "f")
	press(m, "b")
	typeText(m, "docker")
	press(m, "enter")
	press(m, "d")
	typeText(m, "yes")
	press(m, "enter")
	// The reply to a picker action shows in the picker, where the other
	// session's transcript is not.
	m.Update(textMsg{th: rows[2].th, ref: "x", text: "This ends the session… **really**\nmore"})
	if s := screen(m); !strings.Contains(s, "a-fork: This ends the session… really") {
		t.Errorf("the reply is not in the picker:\n%s", s)
	}
	press(m, "up")
	press(m, "enter")
	if m.current.Thread != "default" || m.mode != modeChat {
		t.Errorf("enter opened %q (mode %d)", m.current.Thread, m.mode)
	}
	// The prompt keeps what was in it before: T a-fork + renamed.
	want := []string{"a-fork: /title T a-forkrenamed", "a-fork: /fork", "a-fork: /backend docker", "a-fork: /destroy confirm"}
	if strings.Join(r.messages, "|") != strings.Join(want, "|") {
		t.Errorf("messages = %q, want %q", r.messages, want)
	}
	// New session asks for a name and a backend (refusing one not
	// offered), and its first task starts it there.
	press(m, "ctrl+s", "n")
	typeText(m, "exp")
	press(m, "enter")
	typeText(m, "lcoal")
	press(m, "enter")
	if m.mode != modePrompt || !strings.Contains(screen(m), "Pick one of: local, docker.") {
		t.Fatalf("an unknown backend was taken:\n%s", screen(m))
	}
	typeText(m, "docker")
	press(m, "enter")
	n := len(r.messages)
	if m.current.Thread != "exp" || !strings.Contains(screen(m), "session exp · docker · new") {
		t.Errorf("new session: current %q:\n%s", m.current.Thread, screen(m))
	}
	typeText(m, "/status")
	press(m, "enter")
	typeText(m, "first task")
	press(m, "enter")
	typeText(m, "second task")
	press(m, "enter")
	want = []string{"exp: /status", "exp: first task @docker", "exp: second task"}
	if got := r.messages[n:]; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("new session's messages = %q, want %q", got, want)
	}
	// Naming an existing session opens it.
	press(m, "ctrl+s", "n")
	typeText(m, "b")
	press(m, "enter")
	if m.current.Thread != "b" || m.mode != modeChat {
		t.Errorf("existing name: current %q mode %d", m.current.Thread, m.mode)
	}
}

func TestPasteSizeLimit(t *testing.T) {
	m, r := newTestModel(t)
	m.Update(tea.PasteMsg{Content: strings.Repeat("p", MaxMessageBytes+1)})
	if m.input.Value() != "" || !strings.Contains(screen(m), "the limit is 64.0 KiB") {
		t.Errorf("an oversized paste was taken or not reported:\n%s", screen(m))
	}
	big := strings.Repeat("q", 40<<10) + "\nsecond line"
	m.Update(tea.PasteMsg{Content: big})
	if m.input.Value() != big {
		t.Fatalf("a 40 KiB paste was not taken whole: %d bytes", len(m.input.Value()))
	}
	press(m, "enter")
	if len(r.messages) != 1 || r.messages[0] != "default: "+big {
		t.Errorf("the paste was not sent whole")
	}
}

func TestEverythingFromTheAgentIsNeutralised(t *testing.T) {
	m, _ := newTestModel(t)
	evil := "\x1b[2J\x1b]0;owned\x07\r\u202etxt.exe\x9b2J"
	ts := session.TurnState{Turn: 1, Status: session.StatusThinking, ToolCalls: []session.ToolCallState{
		{CallID: "c", Name: "shell", Commands: []string{"echo " + evil}, Status: session.CallCompleted, Output: "out " + evil},
	}}
	m.Update(cardMsg{th: th, ref: "card-1", card: chat.Card{Title: "Working " + evil, Blocks: []chat.Block{{Kind: chat.BlockActions, Buttons: []chat.Button{{ID: chat.ActionStop}}}}}, ts: &ts})
	m.Update(textMsg{th: th, ref: "t", text: "# Answer\n" + evil})
	m.Update(noticeMsg{text: "note " + evil})
	press(m, "tab", "enter")
	for _, v := range []string{screenRaw(m), func() string { press(m, "esc", "esc"); return screenRaw(m) }()} {
		for _, bad := range []string{"\x1b[2J", "\x1b]0;", "\x07", "\r", "\u202e", "\x9b"} {
			if strings.Contains(v, bad) {
				t.Errorf("screen holds %q", bad)
			}
		}
	}
	if s := screen(m); !strings.Contains(s, `\x1b[2J`) {
		t.Errorf("the escape is not shown visibly:\n%s", s)
	}
}

func screenRaw(m *model) string { return m.View().Content }

func TestResizeAndNarrowTerminal(t *testing.T) {
	m, _ := newTestModel(t)
	card, ts := approvalCard()
	m.Update(cardMsg{th: th, ref: "card-1", card: card, ts: &ts})
	for _, size := range [][2]int{{80, 24}, {40, 12}, {132, 50}} {
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		lines := strings.Split(screen(m), "\n")
		if len(lines) > size[1] {
			t.Errorf("%dx%d: %d lines", size[0], size[1], len(lines))
		}
		for _, l := range lines {
			if w := ansi.StringWidth(l); w > size[0] {
				t.Errorf("%dx%d: line of width %d: %q", size[0], size[1], w, l)
			}
		}
		if !strings.Contains(screen(m), "y approve once") {
			t.Errorf("%dx%d: approval keys not visible", size[0], size[1])
		}
	}
}

func TestInputHistoryAndCompletion(t *testing.T) {
	m, r := newTestModel(t)
	typeText(m, "first task")
	press(m, "enter")
	typeText(m, "second")
	press(m, "enter")
	press(m, "up", "up")
	if m.input.Value() != "first task" {
		t.Errorf("up up = %q", m.input.Value())
	}
	press(m, "down", "down")
	if m.input.Value() != "" {
		t.Errorf("down down = %q", m.input.Value())
	}
	typeText(m, "/sta")
	press(m, "tab")
	if m.input.Value() != "/status " {
		t.Errorf("completion = %q", m.input.Value())
	}
	if len(r.messages) != 2 {
		t.Errorf("messages = %q", r.messages)
	}
}

// cmd/dev's banner opens the transcript instead of being printed under
// the full-screen app.
func TestIntroOpensTheTranscript(t *testing.T) {
	r := &recorder{}
	m := newModel(Config{Intro: "sandbot dev\n  temporal: 127.0.0.1:7233\n  log: /tmp/x.log\n", UIURL: func(string) string { return "" }}, r.acts())
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	s := screen(m)
	for _, want := range []string{"sandbot dev", "temporal: 127.0.0.1:7233", "log: /tmp/x.log"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
}

// Ctrl-R searches earlier input, newest first; Ctrl-R again goes older,
// Enter takes the match into the input without sending it, Esc leaves it.
func TestCtrlRSearchesHistory(t *testing.T) {
	m, r := newTestModel(t)
	for _, l := range []string{"build the app", "run the tests", "build the docs"} {
		typeText(m, l)
		press(m, "enter")
	}
	press(m, "ctrl+r")
	typeText(m, "build")
	if got := m.input.Value(); got != "build the docs" {
		t.Errorf("first match = %q", got)
	}
	if s := screen(m); !strings.Contains(s, "(history search) build: build the docs") {
		t.Errorf("search line missing:\n%s", s)
	}
	press(m, "ctrl+r")
	if got := m.input.Value(); got != "build the app" {
		t.Errorf("older match = %q", got)
	}
	press(m, "enter")
	if m.inSrch || m.input.Value() != "build the app" || len(r.messages) != 3 {
		t.Errorf("enter: searching %v, input %q, %d messages sent", m.inSrch, m.input.Value(), len(r.messages))
	}
	press(m, "enter")
	if len(r.messages) != 4 || r.messages[3] != "default: build the app" {
		t.Errorf("messages = %q", r.messages)
	}
}

// At 80 columns the input's hint is whole, and the Temporal UI link is
// never cut: whole when it fits, else a hyperlinked label.
func TestNarrowStatusBarKeepsLinksWhole(t *testing.T) {
	long := "http://127.0.0.1:8233/namespaces/default/workflows/console%3Alocal%3Adefault"
	m, _ := newTestModel(t)
	m.cfg.UIURL = func(string) string { return long }
	s := screen(m)
	if !strings.Contains(s, "Shift-Enter newline") {
		t.Errorf("the hint is cut at 80 columns:\n%s", s)
	}
	raw := screenRaw(m)
	if strings.Contains(s, "127.0.0.1") || !strings.Contains(s, "Temporal UI · Ctrl-S sessions") || !strings.Contains(raw, "\x1b]8;;"+long) {
		t.Errorf("80 columns: want the hyperlinked label, not a cut URL:\n%q", raw[strings.LastIndex(raw, "\n")+1:])
	}
	for _, l := range strings.Split(s, "\n") {
		if w := ansi.StringWidth(l); w > 80 {
			t.Errorf("80 columns: line of width %d: %q", w, l)
		}
	}
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 24})
	if s := screen(m); !strings.Contains(s, long+" · Ctrl-S sessions") {
		t.Errorf("200 columns: the URL is not shown whole:\n%s", s)
	}
	for _, l := range strings.Split(screen(m), "\n") {
		if w := ansi.StringWidth(l); w > 200 {
			t.Errorf("line of width %d", w)
		}
	}
}

// A call that finishes while its details are open is shown finished there
// (CI caught the details view stuck at "running" under -race), and a
// state older than the one shown, from a slower query, changes nothing.
func TestDetailsFollowTheNewestState(t *testing.T) {
	m, _ := newTestModel(t)
	card, ts := approvalCard()
	ts.Version = 5
	ts.ToolCalls = append([]session.ToolCallState(nil), ts.ToolCalls...)
	ts.ToolCalls[1].Status = session.CallRunning
	m.Update(cardMsg{th: th, ref: "card-1", card: card, ts: &ts})
	press(m, "tab", "down", "enter")
	if m.mode != modeDetails || !strings.Contains(screen(m), "(running)") {
		t.Fatalf("details of the running call:\n%s", screen(m))
	}
	done := ts
	done.Version = 6
	done.ToolCalls = append([]session.ToolCallState(nil), ts.ToolCalls...)
	done.ToolCalls[1].Status = session.CallCompleted
	done.ToolCalls[1].Output = "FINISHED-OUTPUT"
	done.ToolCalls[1].ExitCode = new(int)
	m.Update(turnMsg{th: th, ts: done})
	if s := screen(m); !strings.Contains(s, "(completed)") || !strings.Contains(s, "FINISHED-OUTPUT") {
		t.Fatalf("the open details view did not follow the finished call:\n%s", s)
	}
	m.Update(turnMsg{th: th, ts: ts}) // version 5 again, answered late
	if s := screen(m); !strings.Contains(s, "(completed)") {
		t.Fatalf("an older state replaced the newer one:\n%s", s)
	}
}
