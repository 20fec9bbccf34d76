package tui

import (
	"fmt"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

// BenchmarkFrame is one frame of a session of 1,000 turns whose current
// turn has 50 tool calls: the card is edited (as on every poll) and the
// screen drawn.
func BenchmarkFrame(b *testing.B) {
	m, _ := newTestModel(b)
	for i := range 1000 {
		ts := session.TurnState{Turn: i + 1, Status: session.StatusComplete, ToolCalls: []session.ToolCallState{{CallID: "c", Commands: []string{"go test ./..."}, Status: session.CallCompleted, Output: "ok"}}}
		m.Update(textMsg{th: th, ref: fmt.Sprint("u", i), text: fmt.Sprintf("Turn %d: **done**, see `main.go`.", i)})
		m.Update(cardMsg{th: th, ref: fmt.Sprint("c", i), card: chat.Card{Title: "✅ Done"}, ts: &ts})
	}
	ts := session.TurnState{Turn: 1001, Status: session.StatusThinking}
	for i := range 50 {
		ts.ToolCalls = append(ts.ToolCalls, session.ToolCallState{CallID: fmt.Sprint(i), Commands: []string{fmt.Sprintf("make step%d", i)}, Status: session.CallCompleted, Output: "line\nline\nline", Duration: time.Second})
	}
	m.View()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		cur := ts
		m.Update(cardMsg{th: th, ref: "live", card: chat.Card{Title: fmt.Sprint("Working ", i)}, ts: &cur})
		_ = m.View()
	}
}

// BenchmarkOpenSession is opening a session of 1,000 turns: its history
// (a task, a command and a Markdown answer per turn) arrives and the first
// frame shows it. Only the UI goroutine's share is timed: the history is
// drawn by a command off it (reported as draw-ns/op).
func BenchmarkOpenSession(b *testing.B) {
	var h []session.HistoryEntry
	for i := range 1000 {
		h = append(h,
			session.HistoryEntry{Turn: i + 1, Msg: session.Message{Role: "user", Content: fmt.Sprintf("task %d: fix the build", i)}},
			session.HistoryEntry{Turn: i + 1, Msg: session.Message{Role: "assistant", ToolCalls: []session.ToolCall{{ID: "c", Name: "shell", Arguments: `{"commands":["go build ./..."]}`}}}},
			session.HistoryEntry{Turn: i + 1, Msg: session.Message{Role: "tool", Content: "ok"}},
			session.HistoryEntry{Turn: i + 1, Msg: session.Message{Role: "assistant", Content: fmt.Sprintf("Turn %d: **done**, see `main.go`.\n\n```go\nfunc main() {}\n```", i)}},
		)
	}
	var draw time.Duration
	for b.Loop() {
		b.StopTimer()
		m, _ := newTestModel(b)
		b.StartTimer()
		_, cmd := m.Update(historyMsg{th: th, entries: h})
		b.StopTimer()
		start := time.Now()
		ready := cmd()
		draw += time.Since(start)
		b.StartTimer()
		m.Update(ready)
		_ = m.View()
	}
	b.ReportMetric(float64(draw.Nanoseconds())/float64(b.N), "draw-ns/op")
}
