package tui

import (
	"strings"
	"testing"

	"github.com/sandbot/sandbot/session"
)

// Opening a session shows its earlier transcript (asked for once per
// session), so the scrollback covers the whole history, not only what
// this run of the app saw.
func TestOpeningASessionShowsItsHistory(t *testing.T) {
	m, r := newTestModel(t)
	do(m, m.Init())
	typeText(m, "/session other")
	press(m, "enter")
	typeText(m, "/session default")
	press(m, "enter")
	if got := strings.Join(r.histories, ","); got != "default,other" {
		t.Errorf("history asked for %q, want default then other, once each", got)
	}
	typeText(m, "third task")
	press(m, "enter")
	_, cmd := m.Update(historyMsg{th: th, entries: []session.HistoryEntry{
		{Turn: 1, Msg: session.Message{Role: "user", Content: "first task"}},
		{Turn: 1, Msg: session.Message{Role: "assistant", ToolCalls: []session.ToolCall{{ID: "c", Name: "shell", Arguments: `{"commands":["make test"]}`}}}},
		{Turn: 1, Msg: session.Message{Role: "tool", Content: "ok all passed", ToolCallID: "c"}},
		{Turn: 1, Msg: session.Message{Role: "assistant", Content: "All **tests** pass."}},
		{Turn: 2, Msg: session.Message{Role: "user", Content: "third task"}}, // typed above, already shown
	}})
	if strings.Contains(screen(m), "first task") {
		t.Fatal("history shown before it was drawn off the UI goroutine")
	}
	do(m, cmd)
	s := screen(m)
	first, ran, answer, third := strings.Index(s, "first task"), strings.Index(s, "$ make test"), strings.Index(s, "All tests pass."), strings.Index(s, "third task")
	if first < 0 || ran < first || answer < ran || third < answer {
		t.Fatalf("history out of order or missing (%d %d %d %d):\n%s", first, ran, answer, third, s)
	}
	if strings.Count(s, "third task") != 1 || strings.Contains(s, "ok all passed") {
		t.Errorf("a message shown twice, or tool output in the transcript:\n%s", s)
	}
}
