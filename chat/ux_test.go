package chat_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// The Stop button of a running card stops the turn, for the thread it is
// in only, and answers the clicker privately.
func TestStopButton(t *testing.T) {
	var stopped []string
	f := &chattest.Sessions{StopFn: func(id string) (session.StopResponse, error) {
		stopped = append(stopped, id)
		return session.StopResponse{Stopped: true, Turn: 3}, nil
	}}
	c := newTestCore(t, f, newAutoClock(), nil)
	var replies []string
	act := chat.Action{ID: chat.ActionStop, Value: testThread.ID(), Thread: testThread, User: chat.User{ID: "U1"},
		Reply: func(_ context.Context, text string) error { replies = append(replies, text); return nil }}
	if err := c.HandleAction(context.Background(), &recPoster{}, act); err != nil {
		t.Fatal(err)
	}
	if len(stopped) != 1 || stopped[0] != testThread.ID() || len(replies) != 1 || replies[0] != "Stopped turn 3." {
		t.Fatalf("stopped %q, replies %q", stopped, replies)
	}
	// A button copied into another thread stops nothing.
	other := testThread
	other.Thread = "elsewhere"
	act.Thread = other
	if err := c.HandleAction(context.Background(), &recPoster{}, act); err != nil {
		t.Fatal(err)
	}
	if len(stopped) != 1 || !strings.Contains(replies[1], "another thread") {
		t.Fatalf("a Stop button from another thread: stopped %q, replies %q", stopped, replies)
	}
}

// /history shows the tail of each tool output, lines kept, well past the
// old 120 characters, in a block the output cannot close.
func TestHistoryShowsMoreOfEachOutput(t *testing.T) {
	var out strings.Builder
	for i := range 10 {
		fmt.Fprintf(&out, "line %d of the build output, long enough to matter\n", i)
	}
	out.WriteString("```\nDONE")
	h := []session.HistoryEntry{{Turn: 1, Msg: session.Message{Role: session.RoleTool, Content: out.String()}}}
	got := chat.RenderHistory(h, 4000)
	if !strings.Contains(got, "line 9 of the build output, long enough to matter\n") || !strings.Contains(got, "DONE") || len(got) < 400 {
		t.Fatalf("history = %q", got)
	}
	if strings.Count(got, "```") != 2 {
		t.Fatalf("the output closed its block: %q", got)
	}
}

// A long command shows how long it has run, in steps, so its card is
// edited only that often.
func TestRunningCommandShowsElapsedTime(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ts := session.TurnState{Turn: 1, Status: session.StatusThinking, ToolCalls: []session.ToolCallState{
		{CallID: "c1", Name: "shell", Commands: []string{"make test"}, Status: session.CallRunning, StartedAt: start},
	}}
	text := func(now time.Time) string {
		var b strings.Builder
		for _, bl := range chat.RenderTurn(ts, chat.RenderOptions{Now: now}).Blocks {
			b.WriteString(bl.Text + "\n")
		}
		return b.String()
	}
	if got := text(start.Add(5 * time.Second)); strings.Contains(got, "running") {
		t.Fatalf("a command running for 5 s shows %q", got)
	}
	if a, b := text(start.Add(31*time.Second)), text(start.Add(44*time.Second)); !strings.Contains(a, "running 30s+") || a != b {
		t.Fatalf("at 31 s and 44 s: %q and %q (want the same 30s+ step)", a, b)
	}
	if got := text(start.Add(46 * time.Second)); !strings.Contains(got, "running 45s+") {
		t.Fatalf("at 46 s: %q", got)
	}
}

// A thread's earlier conversation is capped: at most MaxContextBytes, the
// newest lines kept, each line cut; and a message whose text and context
// together pass the message limit goes without the context.
func TestThreadContextIsCapped(t *testing.T) {
	var lines []chat.ContextLine
	for i := range 200 {
		lines = append(lines, chat.ContextLine{User: "bob", Text: fmt.Sprintf("message %03d %s", i, strings.Repeat("x", 3000))})
	}
	got := chat.ContextText(lines)
	if len(got) > chat.MaxContextBytes || !strings.Contains(got, "message 199") || strings.Contains(got, "message 100 ") {
		t.Fatalf("context of %d bytes (newest kept? %v)", len(got), strings.Contains(got, "message 199"))
	}
	var sent session.MessageRequest
	f := &chattest.Sessions{
		SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
			sent = req
			return session.MessageResponse{Turn: 1}, nil
		},
		TurnStateFn: (&script{states: []session.TurnState{done(1, 1, "ok")}}).next,
	}
	c := newTestCore(t, f, newAutoClock(), nil)
	m := msg("e-big", strings.Repeat("y", session.MaxMessageBytes-100))
	m.Context = lines
	if err := c.HandleMessage(context.Background(), &recPoster{}, m); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if sent.Context != "" || len(sent.Text)+len(sent.Context) > session.MaxMessageBytes {
		t.Fatalf("a near-limit message carried %d bytes of context", len(sent.Context))
	}
}
