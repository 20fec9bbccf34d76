package agent_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

var cutRe = regexp.MustCompile(`\n\[\.\.\. (\d+) bytes cut \.\.\.\]\n`)

func TestCapToolResult(t *testing.T) {
	if got := agent.CapToolResult("short", 100); got != "short" {
		t.Fatalf("short = %q", got)
	}
	if got := agent.CapToolResult("bad \xff byte", 100); got != "bad \uFFFD byte" {
		t.Fatalf("invalid UTF-8 not repaired: %q", got)
	}

	s := "HEAD-" + strings.Repeat("m", 10000) + "-TAIL"
	got := agent.CapToolResult(s, 1000)
	if len(got) > 1000 || !strings.HasPrefix(got, "HEAD-") || !strings.HasSuffix(got, "-TAIL") {
		t.Fatalf("len %d, head/tail lost: %q…", len(got), got[:40])
	}
	m := cutRe.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("no cut marker in %q", got)
	}
	cut, _ := strconv.Atoi(m[1])
	if kept := len(got) - len(m[0]); kept+cut != len(s) {
		t.Fatalf("marker says %d cut, but kept %d of %d", cut, kept, len(s))
	}

	// Default cap.
	big := strings.Repeat("z", agent.MaxToolResultBytes*3)
	if got := agent.CapToolResult(big, 0); len(got) > agent.MaxToolResultBytes || !cutRe.MatchString(got) {
		t.Fatalf("default cap: len %d", len(got))
	}

	// Multi-byte runes are never split.
	runes := strings.Repeat("日本語✓", 500)
	for _, max := range []int{7, 40, 41, 42, 43, 100, 999} {
		got := agent.CapToolResult(runes, max)
		if len(got) > max || !utf8.ValidString(got) {
			t.Fatalf("max %d: len %d valid %v", max, len(got), utf8.ValidString(got))
		}
	}
	// A cap too small for the marker still respects max.
	if got := agent.CapToolResult(strings.Repeat("a", 100), 10); got != strings.Repeat("a", 10) {
		t.Fatalf("tiny cap = %q", got)
	}
}

func TestFormatShellResult(t *testing.T) {
	got := agent.FormatShellResult([]sandbox.CommandResult{
		{Command: "ls", Result: sandbox.Result{Stdout: "a.txt\nb.txt\n", ExitCode: 0}},
		{Command: "cat missing", Result: sandbox.Result{Stderr: "cat: missing: No such file", ExitCode: 1}},
		{Command: "true", Result: sandbox.Result{}},
		{Command: "sleep 100", Result: sandbox.Result{TimedOut: true, ExitCode: -1, Duration: 30*time.Second + 20*time.Millisecond}},
		{Command: "yes", Result: sandbox.Result{Stdout: "y\ny", Truncated: true, DroppedBytes: 4096, ExitCode: 0}},
		{Command: "make deploy", Interrupted: true},
		{Command: "echo after", Skipped: true},
		{Command: "printf '\\xff'", Result: sandbox.Result{Stdout: "\xff"}},
	})
	want := strings.Join([]string{
		"$ ls", "a.txt", "b.txt", "exit code: 0", "",
		"$ cat missing", "stderr:", "cat: missing: No such file", "exit code: 1", "",
		"$ true", "(no output)", "exit code: 0", "",
		"$ sleep 100", "(no output)", "timed out after 30s (killed)", "exit code: -1", "",
		"$ yes", "y", "y", "output truncated: 4096 bytes dropped", "exit code: 0", "",
		"$ make deploy", agent.InterruptedNote, "",
		"$ echo after", agent.SkippedNote, "",
		"$ printf '\\xff'", "\uFFFD", "exit code: 0",
	}, "\n")
	if got != want {
		t.Fatalf("got:\n%s\n--- want:\n%s", got, want)
	}
	if !strings.Contains(agent.InterruptedNote, "NOT re-run") {
		t.Fatal("interrupted note must say the command was not re-run")
	}
	if agent.FormatShellResult(nil) == "" {
		t.Fatal("empty results must still say something")
	}
}

// turn builds one exchange: a user message, tool calls with results, and a
// final answer, each content padded to size bytes.
func turn(n, calls, size int) []session.Message {
	pad := strings.Repeat(".", size)
	msgs := []session.Message{{Role: session.RoleUser, Content: fmt.Sprintf("q%d %s", n, pad)}}
	for c := range calls {
		id := fmt.Sprintf("call_%d_%d", n, c)
		msgs = append(msgs,
			session.Message{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{{ID: id, Name: "shell", Arguments: `{"commands":["ls"]}`}}},
			session.Message{Role: session.RoleTool, ToolCallID: id, Content: pad})
	}
	return append(msgs, session.Message{Role: session.RoleAssistant, Content: fmt.Sprintf("a%d %s", n, pad)})
}

func size(msgs []session.Message) int {
	n := 0
	for _, m := range msgs {
		n += agent.MessageSize(m)
	}
	return n
}

// checkPairs fails if a tool result lacks its calling assistant message.
func checkPairs(t *testing.T, msgs []session.Message) {
	t.Helper()
	called := map[string]bool{}
	for _, m := range msgs {
		for _, tc := range m.ToolCalls {
			called[tc.ID] = true
		}
		if m.Role == session.RoleTool && !called[m.ToolCallID] {
			t.Fatalf("tool result %s separated from its call", m.ToolCallID)
		}
	}
}

func TestBudget(t *testing.T) {
	var msgs []session.Message
	for i := range 10 {
		msgs = append(msgs, turn(i, 2, 200)...)
	}
	current := turn(10, 3, 200)
	msgs = append(msgs, current...)

	if got := agent.Budget(msgs, 0); len(got) != len(msgs) {
		t.Fatal("no limit must keep everything")
	}
	if got := agent.Budget(msgs, size(msgs)); len(got) != len(msgs) {
		t.Fatal("a transcript within budget must be kept")
	}

	limit := size(current) + size(turn(0, 2, 200))*3 + 300
	got := agent.Budget(msgs, limit)
	if size(got) > limit {
		t.Fatalf("budgeted size %d > %d", size(got), limit)
	}
	if !strings.Contains(got[0].Content, "omitted") || got[0].Role != session.RoleUser {
		t.Fatalf("first message should be the omission note, got %+v", got[0])
	}
	if got[1].Role != session.RoleUser || !strings.HasPrefix(got[1].Content, "q") {
		t.Fatalf("cut must land on a user message, got %+v", got[1])
	}
	tail := got[len(got)-len(current):]
	for i := range current {
		if tail[i].Content != current[i].Content || tail[i].ToolCallID != current[i].ToolCallID {
			t.Fatal("current turn not kept intact")
		}
	}
	checkPairs(t, got)
	// Kept as many whole exchanges as fit: 3 earlier ones.
	if !strings.HasPrefix(got[1].Content, "q7 ") {
		t.Fatalf("expected to keep exchanges from q7, got %q", got[1].Content[:3])
	}
	dropped := len(msgs) - (len(got) - 1)
	if !strings.Contains(got[0].Content, fmt.Sprintf("(%d messages)", dropped)) {
		t.Fatalf("note %q does not count %d dropped messages", got[0].Content, dropped)
	}

	// Budgeting again is stable and does not stack notes; a tighter budget
	// drops more and counts all dropped messages.
	again := agent.Budget(got, limit)
	if len(again) != len(got) || again[0].Content != got[0].Content {
		t.Fatal("re-budgeting within budget changed the transcript")
	}
	tighter := agent.Budget(got, size(current)+400)
	notes := 0
	for _, m := range tighter {
		if strings.Contains(m.Content, "were omitted") {
			notes++
		}
	}
	droppedAll := len(msgs) - (len(tighter) - 1)
	if notes != 1 || !strings.Contains(tighter[0].Content, fmt.Sprintf("(%d messages)", droppedAll)) {
		t.Fatalf("notes %d, note %q, want count %d", notes, tighter[0].Content, droppedAll)
	}

	// The current turn is kept even when it alone is over budget.
	only := agent.Budget(msgs, 10)
	if len(only) != len(current)+1 || only[1].Content != current[0].Content {
		t.Fatalf("current turn not kept under a tiny budget: %d messages", len(only))
	}

	// The input is not modified.
	if msgs[0].Content != turn(0, 2, 200)[0].Content || len(msgs) != 10*6+8 {
		t.Fatal("input modified")
	}
}

func TestBudgetQueuedUserMessagesStayTogether(t *testing.T) {
	msgs := append(turn(0, 1, 500),
		session.Message{Role: session.RoleUser, Content: "first queued"},
		session.Message{Role: session.RoleUser, Content: "second queued"},
		session.Message{Role: session.RoleAssistant, Content: "ok"})
	got := agent.Budget(msgs, 300)
	if len(got) != 4 || got[1].Content != "first queued" || got[2].Content != "second queued" {
		t.Fatalf("current turn must start at its first user message: %+v", got)
	}
}

func TestBudgetNeverSplitsToolResults(t *testing.T) {
	// A user message that (unusually) sits between a tool call and its
	// result is not a valid cut point.
	msgs := []session.Message{
		{Role: session.RoleUser, Content: strings.Repeat("x", 500)},
		{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{{ID: "c1", Name: "shell", Arguments: "{}"}}},
		{Role: session.RoleUser, Content: "interjection " + strings.Repeat("y", 500)},
		{Role: session.RoleTool, ToolCallID: "c1", Content: "result"},
		{Role: session.RoleAssistant, Content: "answer"},
		{Role: session.RoleUser, Content: "now"},
	}
	got := agent.Budget(msgs, 100)
	checkPairs(t, got)
	if got[len(got)-1].Content != "now" {
		t.Fatal("current turn lost")
	}
}
