package chat_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

var outThread = chat.Thread{Platform: "discord", Workspace: "4000000000000000001", Channel: "5000000000000000001", Thread: "1300000000000000042"}

// outputTranscript is turn 1 with one call and turn 2 with three, the
// second printing an ANSI escape and a bidi override.
func outputTranscript() []session.HistoryEntry {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	call := func(id, cmd string) session.ToolCall {
		return session.ToolCall{ID: id, Name: "shell", Arguments: `{"commands":["` + cmd + `"]}`}
	}
	result := func(turn int, id, out string) session.HistoryEntry {
		return session.HistoryEntry{Turn: turn, At: at, Msg: session.Message{Role: session.RoleTool, ToolCallID: id, Name: "shell", Content: out}}
	}
	return []session.HistoryEntry{
		{Turn: 1, At: at, Msg: session.Message{Role: session.RoleUser, Content: "hi"}},
		{Turn: 1, At: at, Msg: session.Message{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{call("a1", "ls")}}},
		result(1, "a1", "$ ls\nREADME.md\nexit code: 0\n"),
		{Turn: 2, At: at, Msg: session.Message{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{call("b1", "make"), call("b2", "cat log")}}},
		result(2, "b1", "$ make\n"+strings.Repeat("building step\n", 400)+"exit code: 0\n"),
		result(2, "b2", "$ cat log\n\x1b[2Jred\u202etxt.exe\nexit code: 0\n"),
		{Turn: 2, At: at, Msg: session.Message{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{
			{ID: strings.Repeat("x", 90), Name: "shell", Arguments: `{"commands":["true"]}`}}}},
		result(2, strings.Repeat("x", 90), "$ true\n(no output)\nexit code: 0\n"),
	}
}

func outputCore(t *testing.T) (*chat.Core, *chattest.Sessions) {
	f := &chattest.Sessions{HistoryFn: func(id string, _ session.HistoryRequest) ([]session.HistoryEntry, error) {
		if id != outThread.ID() {
			return nil, errors.New("no such session: " + id)
		}
		return outputTranscript(), nil
	}}
	c := newTestCore(t, f, newAutoClock(), func(cfg *chat.CoreConfig) {
		cfg.Budgets = map[string]chat.Budget{"discord": {MaxButtonValue: chat.MaxDiscordButtonValue}}
		cfg.Authorize = func(_ context.Context, u chat.User, _ chat.Thread) error {
			if u.ID == "U666" {
				return &chat.UserError{Msg: "You may not use this bot here."}
			}
			return nil
		}
	})
	return c, f
}

// cardButton is the View output button of the card of ts.
func cardButton(t *testing.T, ts session.TurnState) chat.Button {
	t.Helper()
	card := chat.RenderTurn(ts, chat.RenderOptions{WorkflowID: outThread.ID(), MaxButtonValue: chat.MaxDiscordButtonValue, ViewOutput: true})
	for _, b := range card.Blocks {
		for _, btn := range b.Buttons {
			if btn.ID == chat.ActionViewOutput {
				return btn
			}
		}
	}
	t.Fatalf("card has no View output button: %+v", card)
	return chat.Button{}
}

func finishedTurn(turn int) session.TurnState {
	return session.TurnState{Turn: turn, Status: session.StatusComplete, ToolCalls: []session.ToolCallState{
		{CallID: "c", Name: "shell", Commands: []string{"ls"}, Status: session.CallCompleted, ExitCode: exit(0)}}}
}

func TestViewOutputOneCallAndPicker(t *testing.T) {
	c, _ := outputCore(t)
	ctx := context.Background()
	alice := chat.User{ID: "U1", Name: "alice"}

	// Turn 1 has one call: the button opens it directly.
	v := c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewOutput, Value: cardButton(t, finishedTurn(1)).Value, User: alice, Thread: outThread})
	if v.Call == nil || v.Call.CallID != "a1" || !strings.Contains(v.Call.Output, "README.md") || v.Call.Heading() != "Turn 1 · tool call" {
		t.Fatalf("turn 1: %+v", v)
	}

	// Turn 2 has three: a picker, whose buttons open each call in full.
	v = c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewOutput, Value: cardButton(t, finishedTurn(2)).Value, User: alice, Thread: outThread})
	if v.Picker == nil {
		t.Fatalf("turn 2: want a picker, got %+v", v)
	}
	var buttons []chat.Button
	for _, b := range v.Picker.Blocks {
		buttons = append(buttons, b.Buttons...)
	}
	if len(buttons) != 3 || buttons[0].Label != "1. make" || buttons[1].Label != "2. cat log" {
		t.Fatalf("picker buttons: %+v", buttons)
	}
	for _, b := range buttons {
		if b.ID != chat.ActionViewCall || len(b.Value) > chat.MaxDiscordButtonValue {
			t.Errorf("picker button %+v: want %s within %d characters", b, chat.ActionViewCall, chat.MaxDiscordButtonValue)
		}
	}
	make := c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewCall, Value: buttons[0].Value, User: alice, Thread: outThread})
	if make.Call == nil || make.Call.Index != 1 || make.Call.Of != 3 || strings.Count(make.Call.Output, "building step") != 400 {
		t.Fatalf("call 1: the whole output, not the card's tail: %+v", make)
	}
	if got := make.Call.FileText(); !strings.HasPrefix(got, "# Turn 2 · call 1 of 3 (b1)\nmake\n\n# output\n$ make\n") {
		t.Errorf("file text starts %q", got[:80])
	}
	// Controls and bidi overrides in the output are neutralised.
	cat := c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewCall, Value: buttons[1].Value, User: alice, Thread: outThread})
	if cat.Call == nil || strings.ContainsAny(cat.Call.Output, "\x1b\u202e") || !strings.Contains(cat.Call.Output, `\x1b[2Jred\u202etxt.exe`) {
		t.Fatalf("call 2 not neutralised: %+v", cat.Call)
	}
	// A call ID too long for Discord's custom_id is named by its place.
	if !strings.Contains(buttons[2].Value, "%23") {
		t.Errorf("long call ID value %q: want the positional form", buttons[2].Value)
	}
	long := c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewCall, Value: buttons[2].Value, User: alice, Thread: outThread})
	if long.Call == nil || long.Call.Commands[0] != "true" {
		t.Fatalf("call 3: %+v", long)
	}
}

// A forged value naming another thread's session, a user the bot does not
// allow, and damaged values are refused without reading any session.
func TestViewOutputRefusals(t *testing.T) {
	c, f := outputCore(t)
	ctx := context.Background()
	other := chat.Thread{Platform: "discord", Workspace: "4000000000000000001", Channel: "5000000000000000001", Thread: "1300000000000000099"}
	forged := chat.RenderTurn(finishedTurn(1), chat.RenderOptions{WorkflowID: other.ID(), ViewOutput: true})
	var value string
	for _, b := range forged.Blocks {
		for _, btn := range b.Buttons {
			if btn.ID == chat.ActionViewOutput {
				value = btn.Value
			}
		}
	}
	cases := []struct {
		name string
		a    chat.Action
		want string
	}{
		{"another session", chat.Action{ID: chat.ActionViewOutput, Value: value, User: chat.User{ID: "U1"}, Thread: outThread}, "belongs to another thread's session"},
		{"not allowed", chat.Action{ID: chat.ActionViewOutput, Value: cardButton(t, finishedTurn(1)).Value, User: chat.User{ID: "U666"}, Thread: outThread}, "You may not use this bot here."},
		{"no thread", chat.Action{ID: chat.ActionViewOutput, Value: "2.1", User: chat.User{ID: "U1"}}, "does not say which session"},
		{"damaged", chat.Action{ID: chat.ActionViewOutput, Value: "2.x1", User: chat.User{ID: "U1"}, Thread: outThread}, "damaged"},
		{"digest", chat.Action{ID: chat.ActionViewCall, Value: "3.abcdefabcdefabcd", User: chat.User{ID: "U1"}, Thread: outThread}, "damaged"},
		{"call value on the card action", chat.Action{ID: chat.ActionViewOutput, Value: "2.1-a1", User: chat.User{ID: "U1"}, Thread: outThread}, "damaged"},
	}
	for _, tc := range cases {
		v := c.ViewOutput(ctx, tc.a)
		if v.Call != nil || v.Picker != nil || !strings.Contains(v.Text, tc.want) {
			t.Errorf("%s: got %+v, want a refusal with %q", tc.name, v, tc.want)
		}
	}
	if n := f.Count("history"); n != 0 {
		t.Errorf("refused clicks read the transcript %d times", n)
	}
	// A turn the transcript no longer holds says so.
	v := c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewOutput, Value: "2.9", User: chat.User{ID: "U1"}, Thread: outThread})
	if !strings.Contains(v.Text, "no longer in this session's transcript") {
		t.Errorf("trimmed turn: %+v", v)
	}
}

func TestViewOutputButtonOnCards(t *testing.T) {
	opts := chat.RenderOptions{WorkflowID: outThread.ID(), ViewOutput: true}
	ids := func(ts session.TurnState, o chat.RenderOptions) []string {
		var out []string
		for _, b := range chat.RenderTurn(ts, o).Blocks {
			for _, btn := range b.Buttons {
				out = append(out, btn.ID)
			}
		}
		return out
	}
	running := session.TurnState{Turn: 1, Status: session.StatusThinking, ToolCalls: []session.ToolCallState{
		{CallID: "a", Status: session.CallCompleted, ExitCode: exit(0)}, {CallID: "b", Status: session.CallRunning}}}
	thinking := session.TurnState{Turn: 1, Status: session.StatusThinking, ToolCalls: []session.ToolCallState{{CallID: "b", Status: session.CallRunning}}}
	for _, tc := range []struct {
		name string
		ts   session.TurnState
		o    chat.RenderOptions
		want string
	}{
		{"running with a finished call", running, opts, "stop view_output"},
		{"nothing finished yet", thinking, opts, "stop"},
		{"finished", finishedTurn(1), opts, "view_output"},
		{"a platform without it", finishedTurn(1), chat.RenderOptions{WorkflowID: outThread.ID()}, ""},
	} {
		if got := strings.Join(ids(tc.ts, tc.o), " "); got != tc.want {
			t.Errorf("%s: buttons %q, want %q", tc.name, got, tc.want)
		}
	}
}

// toolSessions answers QueryToolOutput itself, as TemporalSessions does.
type toolSessions struct {
	*chattest.Sessions
	asked int
}

func (s *toolSessions) ToolOutput(_ context.Context, id string, req session.ToolOutputRequest) (session.ToolOutputResponse, error) {
	s.asked++
	return session.ToolOutputs(outputTranscript(), req), nil
}

// The bot's sessions are wrapped in the meter; View output must still use
// the session's tool_output query, not fetch the whole transcript.
func TestViewOutputThroughTheMeter(t *testing.T) {
	f := &toolSessions{Sessions: &chattest.Sessions{}}
	c := newTestCore(t, chat.MeterSessions(f), newAutoClock(), nil)
	v := c.ViewOutput(context.Background(), chat.Action{ID: chat.ActionViewOutput, Value: "2.1", User: chat.User{ID: "U1"}, Thread: outThread})
	if v.Call == nil || v.Call.CallID != "a1" {
		t.Fatalf("view: %+v", v)
	}
	if f.asked != 2 || f.Count("history") != 0 {
		t.Fatalf("tool_output asked %d times, history %d: the meter hides the query", f.asked, f.Count("history"))
	}
}

// The file names the call by its ID, which the model chose: neutralised
// like everything else shown.
func TestOutputFileNeutralisesTheCallID(t *testing.T) {
	o := chat.CallOutput{Turn: 1, CallID: "c1\x1b[2J\u202e", Index: 1, Of: 1, Commands: []string{"ls"}}
	if got := o.FileText(); strings.ContainsAny(got, "\x1b\u202e") || !strings.Contains(got, `c1\x1b[2J\u202e`) {
		t.Fatalf("file text %q", got)
	}
	if name := o.FileName(); strings.ContainsAny(name, "\x1b\u202e/") || !strings.HasSuffix(name, ".txt") {
		t.Fatalf("file name %q", name)
	}
}

// A turn of more calls than one Discord message holds buttons lists the
// latest MaxPickerCalls and says so.
func TestViewOutputPickerCap(t *testing.T) {
	var calls []session.ToolCall
	var h []session.HistoryEntry
	for i := range 30 {
		calls = append(calls, session.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "shell", Arguments: fmt.Sprintf(`{"commands":["echo %d"]}`, i)})
	}
	h = append(h, session.HistoryEntry{Turn: 1, Msg: session.Message{Role: session.RoleAssistant, ToolCalls: calls}})
	f := &chattest.Sessions{HistoryFn: func(string, session.HistoryRequest) ([]session.HistoryEntry, error) { return h, nil }}
	c := newTestCore(t, f, newAutoClock(), nil)
	v := c.ViewOutput(context.Background(), chat.Action{ID: chat.ActionViewOutput, Value: "2.1", User: chat.User{ID: "U1"}, Thread: outThread})
	if v.Picker == nil {
		t.Fatalf("want a picker: %+v", v)
	}
	var buttons []chat.Button
	for _, b := range v.Picker.Blocks {
		buttons = append(buttons, b.Buttons...)
	}
	if len(buttons) != chat.MaxPickerCalls || buttons[0].Label != "6. echo 5" || !strings.Contains(v.Picker.Blocks[0].Text, "The 25 latest are listed") {
		t.Fatalf("picker: %d buttons, first %q, %q", len(buttons), buttons[0].Label, v.Picker.Blocks[0].Text)
	}
	// A call that has not finished shows its arguments and says so.
	one := c.ViewOutput(context.Background(), chat.Action{ID: chat.ActionViewCall, Value: buttons[24].Value, User: chat.User{ID: "U1"}, Thread: outThread})
	if one.Call == nil || one.Call.HasOutput || !strings.Contains(one.Call.FileText(), chat.NoOutputText) {
		t.Fatalf("unfinished call: %+v", one)
	}
}
