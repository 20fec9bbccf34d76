package tui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

func (r *recorder) tickCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ticks)
}

// A running call's elapsed time ticks on screen once a second with no card
// edit, and the ticking stops when nothing runs.
func TestElapsedTimeTicksWhileACallRuns(t *testing.T) {
	m, r := newTestModel(t)
	start := m.now()
	ts := session.TurnState{Turn: 1, Status: session.StatusThinking, ToolCalls: []session.ToolCallState{
		{CallID: "c", Name: "shell", Commands: []string{"sleep 30"}, Status: session.CallRunning, StartedAt: start.Add(-2 * time.Second)},
	}}
	card := chat.Card{Title: "⚙️ Working", Blocks: []chat.Block{{Kind: chat.BlockActions, Buttons: []chat.Button{{ID: chat.ActionStop}}}}}
	m.Update(cardMsg{th: th, ref: "card-1", card: card, ts: &ts})
	if r.tickCount() != 1 || r.ticks[0] != time.Second {
		t.Fatalf("a running call scheduled ticks %v, want one of 1s", r.ticks)
	}
	if s := screen(m); !strings.Contains(s, "sleep 30 · 2s") {
		t.Fatalf("elapsed time missing:\n%s", s)
	}
	// Another card edit while a tick is pending does not stack a second timer.
	m.Update(cardMsg{th: th, ref: "card-1", card: card, ts: &ts})
	if r.tickCount() != 1 {
		t.Errorf("ticks stacked: %v", r.ticks)
	}
	for i, want := range []string{"3s", "4s"} {
		now := start.Add(time.Duration(i+1) * time.Second)
		m.now = func() time.Time { return now }
		m.Update(tickMsg{})
		if s := screen(m); !strings.Contains(s, "sleep 30 · "+want) {
			t.Errorf("after a tick the elapsed time is not %s:\n%s", want, s)
		}
	}
	if r.tickCount() != 3 {
		t.Errorf("ticks while running = %d, want 3", r.tickCount())
	}
	done := ts
	done.Status = session.StatusComplete
	done.ToolCalls = []session.ToolCallState{{CallID: "c", Name: "shell", Commands: []string{"sleep 30"}, Status: session.CallCompleted, Duration: 30 * time.Second, ExitCode: new(int)}}
	m.Update(cardMsg{th: th, ref: "card-1", card: chat.Card{Title: "✅ Done"}, ts: &done})
	m.Update(tickMsg{}) // the tick that was pending
	m.Update(tickMsg{})
	if r.tickCount() != 3 {
		t.Errorf("the idle app kept ticking: %v", r.ticks)
	}
}

// An approval's expiry counts down, so it ticks too.
func TestApprovalCountdownTicks(t *testing.T) {
	m, r := newTestModel(t)
	card, ts := approvalCard()
	m.Update(cardMsg{th: th, ref: "card-1", card: card, ts: &ts})
	if r.tickCount() != 1 {
		t.Fatalf("ticks = %v", r.ticks)
	}
	m.now = func() time.Time { return time.Date(2026, 1, 1, 12, 10, 0, 0, time.UTC) }
	m.Update(tickMsg{})
	if s := screen(m); !strings.Contains(s, "expires in 20m0s") {
		t.Errorf("countdown not redrawn:\n%s", s)
	}
}

// An idle app asks for no timer at all, not even a cursor blink: typing,
// moving and opening the picker return no command that waits.
func TestIdleAppSchedulesNothing(t *testing.T) {
	m, r := newTestModel(t)
	// Init asks the core for the turn and the history, nothing else.
	if b, ok := m.Init()().(tea.BatchMsg); ok {
		for _, c := range b {
			if c == nil {
				continue
			}
			if msg := c(); msg != nil {
				t.Errorf("Init produced %T", msg)
			}
		}
	}
	for _, k := range []tea.KeyPressMsg{{Code: 'h', Text: "h"}, {Code: 'i', Text: "i"}, {Code: tea.KeyLeft}, {Code: tea.KeyHome}, {Code: tea.KeyBackspace}} {
		if _, cmd := m.Update(k); cmd != nil {
			t.Errorf("key %v returned a command (a cursor blink timer?)", k)
		}
	}
	m.Update(turnMsg{th: th, ts: session.TurnState{Turn: 3, Status: session.StatusComplete}})
	if r.tickCount() != 0 {
		t.Errorf("idle ticks: %v", r.ticks)
	}
}
