package chat_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func exit(n int) *int { return &n }

var t0 = time.Date(2025, 3, 4, 10, 0, 0, 0, time.UTC)

func renderCases() map[string]session.TurnState {
	ann := chat.User{ID: "U1", Name: "ann"}
	longOut := ""
	for i := 1; i <= 40; i++ {
		longOut += fmt.Sprintf("ok  \tgithub.com/acme/pkg%d\t0.%02ds\n", i, i)
	}
	many := make([]session.ToolCallState, 14)
	for i := range many {
		many[i] = session.ToolCallState{CallID: fmt.Sprintf("call_%d", i), Name: "shell", Commands: []string{fmt.Sprintf("step %d", i)},
			Status: session.CallCompleted, ExitCode: exit(0), Duration: time.Duration(i+1) * 300 * time.Millisecond, Output: fmt.Sprintf("out %d", i)}
	}
	return map[string]session.TurnState{
		"thinking": {Turn: 1, Version: 3, Status: session.StatusThinking, Backend: "local", StartedAt: t0},
		"running": {Turn: 2, Version: 7, Status: session.StatusThinking, Backend: "docker", StartedAt: t0, Queued: 1,
			ToolCalls: []session.ToolCallState{
				{CallID: "call_a", Name: "shell", Commands: []string{"go build ./...", "go vet ./..."}, Status: session.CallCompleted, ExitCode: exit(0), Duration: 2300 * time.Millisecond, Output: "building\nvet ok\n"},
				{CallID: "call_b", Name: "shell", Arguments: `{"commands":["go test ./... 2>&1 | tail -n 50 && echo done with a very long command line that goes on"]}`, Status: session.CallRunning, Output: longOut},
			}},
		"awaiting approval": {Turn: 3, Version: 12, Status: session.StatusAwaitingApproval, Backend: "docker", StartedAt: t0,
			ToolCalls: []session.ToolCallState{
				{CallID: "call_c", Name: "shell", Commands: []string{"rm -rf build/ && make `release`"}, Status: session.CallAwaitingApproval},
			},
			Pending: &session.PendingApproval{CallID: "call_c", Command: "rm -rf build/ && make `release`", Reason: "writes outside the read-only allowlist",
				AskedAt: t0, ExpiresAt: t0.Add(30 * time.Minute)}},
		"decided": {Turn: 4, Version: 20, Status: session.StatusComplete, Backend: "docker", StartedAt: t0, EndedAt: t0.Add(75 * time.Second),
			FinalText: "All done.",
			ToolCalls: []session.ToolCallState{
				{CallID: "c1", Name: "shell", Commands: []string{"make deploy"}, Status: session.CallCompleted, ExitCode: exit(2), Duration: 4 * time.Second, Output: "error: no target\n",
					Decision: &session.DecisionRecord{CallID: "c1", Decision: session.DecisionApprove, User: ann}},
				{CallID: "c2", Name: "shell", Commands: []string{"git push --force"}, Status: session.CallRejected,
					Decision: &session.DecisionRecord{CallID: "c2", Decision: session.DecisionReject, Reason: "not on main", User: ann}},
				{CallID: "c3", Name: "shell", Commands: []string{"curl example.com"}, Status: session.CallRejected,
					Decision: &session.DecisionRecord{CallID: "c3", Decision: session.DecisionReject, Expired: true}},
				{CallID: "c4", Name: "shell", Commands: []string{"ls"}, Status: session.CallCompleted, ExitCode: exit(0), Duration: 100 * time.Millisecond,
					Decision: &session.DecisionRecord{CallID: "c4", Decision: session.DecisionApproveAlways, Auto: true}},
			},
			Notices: []string{"The approval request for `curl example.com` expired after 30m0s; the command was not run."}},
		"failed": {Turn: 5, Version: 30, Status: session.StatusFailed, Backend: "local", StartedAt: t0, EndedAt: t0.Add(3 * time.Second),
			Error: "the model endpoint refused the API key (401); check SANDBOT_MODEL_API_KEY",
			ToolCalls: []session.ToolCallState{
				{CallID: "c1", Name: "shell", Commands: []string{"sleep 999"}, Status: session.CallFailed, Error: "interrupted: the worker running this command stopped responding; the command was not re-run"},
			}},
		"stopped": {Turn: 6, Version: 31, Status: session.StatusComplete, Stopped: true, FinalText: "Stopped by ann.", Backend: "local", StartedAt: t0, EndedAt: t0.Add(9 * time.Second),
			PendingBackend: "docker", Paused: true},
		"many calls": {Turn: 7, Version: 99, Status: session.StatusThinking, Backend: "local", StartedAt: t0, ToolCalls: many},
	}
}

func TestRenderTurnGolden(t *testing.T) {
	opts := chat.RenderOptions{
		WorkflowID: chat.Thread{Platform: "discord", Workspace: "1184759316318441472", Channel: "1184759317027262536", Thread: "1290418820165537862"}.ID(),
		Approvers:  "@ann (owner), role ops", MaxButtonValue: chat.MaxDiscordButtonValue,
	}
	for name, ts := range renderCases() {
		t.Run(name, func(t *testing.T) {
			card := chat.RenderTurn(ts, opts)
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(card); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			path := filepath.Join("testdata", "render_"+strings.ReplaceAll(name, " ", "_")+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./chat/ -run Golden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("card differs from %s:\n%s", path, got)
			}
			if n := chat.CardLen(card); n > 3500 {
				t.Errorf("card has %d chars, over the 3500 budget", n)
			}
		})
	}
}

func TestRenderTurnBounds(t *testing.T) {
	// Many calls with long output and long commands stay within MaxChars,
	// listing the latest calls and counting the rest.
	calls := make([]session.ToolCallState, 60)
	for i := range calls {
		calls[i] = session.ToolCallState{CallID: fmt.Sprint(i), Commands: []string{strings.Repeat("x", 500)},
			Status: session.CallCompleted, ExitCode: exit(1), Output: strings.Repeat("line of output\n", 200)}
	}
	ts := session.TurnState{Turn: 1, Status: session.StatusThinking, ToolCalls: calls}
	for _, limit := range []int{3500, 1500, 600} {
		card := chat.RenderTurn(ts, chat.RenderOptions{MaxChars: limit})
		if n := chat.CardLen(card); n > limit {
			t.Errorf("MaxChars %d: card has %d chars", limit, n)
		}
		if !strings.Contains(cardText(card), "earlier tool calls") {
			t.Errorf("MaxChars %d: no count of earlier calls", limit)
		}
		if len(card.Blocks) > 40 {
			t.Errorf("MaxChars %d: %d blocks", limit, len(card.Blocks))
		}
	}
	line := chat.CommandLine(calls[0], 80)
	if n := len([]rune(line)); n != 80 || !strings.HasSuffix(line, "…") {
		t.Errorf("command line %q has %d runes, want 80 ending in …", line, n)
	}
	tail := chat.OutputTail(calls[0].Output, 5, 300)
	if got := strings.Count(tail, "\n"); got != 4 || !strings.HasPrefix(tail, "…") {
		t.Errorf("output tail %q: want 5 lines marked as cut", tail)
	}
}

func TestRenderApprovalButtons(t *testing.T) {
	ts := renderCases()["awaiting approval"]
	card := chat.RenderTurn(ts, chat.RenderOptions{WorkflowID: testThread.ID()})
	var buttons []chat.Button
	for _, b := range card.Blocks {
		buttons = append(buttons, b.Buttons...)
	}
	if len(buttons) != 4 {
		t.Fatalf("buttons = %+v", buttons)
	}
	for i, id := range []string{chat.ActionApprove, chat.ActionApproveAlways, chat.ActionReject, chat.ActionStop} {
		if buttons[i].ID != id {
			t.Errorf("button %d is %q, want %q", i, buttons[i].ID, id)
		}
		if id == chat.ActionStop {
			if buttons[i].Value != testThread.ID() {
				t.Errorf("the Stop button's value is %q, want the workflow ID", buttons[i].Value)
			}
			continue
		}
		wid, call, err := chat.DecodeApproval(buttons[i].Value)
		if err != nil || wid != testThread.ID() || call != "call_c" {
			t.Errorf("button %d value decodes to (%q, %q, %v)", i, wid, call, err)
		}
	}
	// Once decided, the approval buttons are gone; Stop stays while the
	// turn runs, and goes when it ends.
	ts.Status = session.StatusThinking
	ts.Pending = nil
	for _, b := range chat.RenderTurn(ts, chat.RenderOptions{}).Blocks {
		if b.Kind == chat.BlockActions && (len(b.Buttons) != 1 || b.Buttons[0].ID != chat.ActionStop) {
			t.Errorf("decided approval still has buttons: %+v", b.Buttons)
		}
	}
	ts.Status = session.StatusComplete
	for _, b := range chat.RenderTurn(ts, chat.RenderOptions{}).Blocks {
		if b.Kind == chat.BlockActions {
			t.Errorf("a finished turn has buttons: %+v", b.Buttons)
		}
	}
}
