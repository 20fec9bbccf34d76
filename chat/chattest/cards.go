package chattest

import (
	"strings"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

// CardTime is the moment the CardStates happen at.
var CardTime = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

func exitCode(n int) *int { return &n }

// CardStates are turn states that show every kind of status card the
// adapters' golden files pin: a running card with Stop and View output, a
// command waiting for approval, a stopped turn, a finished one with its
// usage and cost in the footer.
func CardStates() map[string]session.TurnState {
	t0 := CardTime
	done := session.ToolCallState{CallID: "call_a1", Name: "shell", Commands: []string{"go build ./..."}, Status: session.CallCompleted,
		ExitCode: exitCode(0), Duration: 1200 * time.Millisecond, StartedAt: t0, EndedAt: t0.Add(1200 * time.Millisecond),
		Output: "$ go build ./...\n(no output)\nexit code: 0\n"}
	return map[string]session.TurnState{
		"running_stop": {Turn: 2, Version: 9, Status: session.StatusThinking, Backend: "docker", StartedAt: t0,
			ToolCalls: []session.ToolCallState{done,
				{CallID: "call_a2", Name: "shell", Commands: []string{"go test ./..."}, Status: session.CallRunning, StartedAt: t0.Add(2 * time.Second)}}},
		"approval": {Turn: 3, Version: 12, Status: session.StatusAwaitingApproval, Backend: "docker", StartedAt: t0,
			ToolCalls: []session.ToolCallState{done,
				{CallID: "call_b1", Name: "shell", Commands: []string{"rm -rf build/ && make release"}, Status: session.CallAwaitingApproval}},
			Pending: &session.PendingApproval{CallID: "call_b1", Command: "rm -rf build/ && make release", Reason: "it is not a read-only command",
				AskedAt: t0, ExpiresAt: t0.Add(30 * time.Minute)}},
		"stopped": {Turn: 4, Version: 20, Status: session.StatusComplete, Stopped: true, FinalText: "Stopped by ann.", Backend: "local",
			StartedAt: t0, EndedAt: t0.Add(9 * time.Second),
			ToolCalls: []session.ToolCallState{{CallID: "call_c1", Name: "shell", Commands: []string{"sleep 600"}, Status: session.CallFailed,
				Duration: 8 * time.Second, Error: "stopped by the user while running; the command was killed"}}},
		"done_usage": {Turn: 5, Version: 31, Status: session.StatusComplete, FinalText: "All tests pass.", Backend: "local",
			StartedAt: t0, EndedAt: t0.Add(75 * time.Second), Usage: session.Usage{Calls: 3, PromptTokens: 12400, CompletionTokens: 3456},
			ToolCalls: []session.ToolCallState{done}},
	}
}

// CardPrices are the prices the done_usage card's cost is worked out at
// (USD per million tokens).
var CardPrices = session.Prices{Input: 2.5, Output: 10}

// CardOptions are the RenderOptions of the golden cards for a platform
// that shows output (chat.OutputShower), with its mention and time
// formats.
func CardOptions(th chat.Thread, maxButtonValue int, mention func(chat.User) string, formatTime func(time.Time) string) chat.RenderOptions {
	return chat.RenderOptions{
		WorkflowID: th.ID(), MaxButtonValue: maxButtonValue, Mention: mention, FormatTime: formatTime,
		Approvers: mention(chat.User{ID: "U0ALICE", Name: "alice"}) + " (owner)", Prices: CardPrices,
		Now: CardTime.Add(50 * time.Second), ViewOutput: true,
	}
}

// OutputTranscript is a transcript whose turn 1 ran one call and turn 2
// two, for View output goldens.
func OutputTranscript() []session.HistoryEntry {
	at := CardTime
	call := func(id, cmds string) session.ToolCall {
		return session.ToolCall{ID: id, Name: session.ShellToolName, Arguments: `{"commands":[` + cmds + `]}`}
	}
	result := func(turn int, id, out string) session.HistoryEntry {
		return session.HistoryEntry{Turn: turn, At: at, Msg: session.Message{Role: session.RoleTool, ToolCallID: id, Name: session.ShellToolName, Content: out}}
	}
	var long strings.Builder
	long.WriteString("$ go test ./...\n")
	for i := 1; i <= 60; i++ {
		long.WriteString("ok  \tgithub.com/acme/widgets/pkg" + strings.Repeat("x", i%7) + "\t0.01s\n")
	}
	long.WriteString("FAIL <main> & done\nexit code: 1\n")
	return []session.HistoryEntry{
		{Turn: 1, At: at, Msg: session.Message{Role: session.RoleUser, Content: "run the tests"}},
		{Turn: 1, At: at, Msg: session.Message{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{call("call_t1", `"go vet ./...","go test ./..."`)}}},
		result(1, "call_t1", "$ go vet ./...\n(no output)\nexit code: 0\n\n"+long.String()),
		{Turn: 2, At: at, Msg: session.Message{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{call("call_u1", `"ls"`), call("call_u2", `"cat \u001b[31mred.txt"`)}}},
		result(2, "call_u1", "$ ls\nREADME.md\nexit code: 0\n"),
		result(2, "call_u2", "$ cat \x1b[31mred.txt\nhello\nexit code: 0\n"),
	}
}
