package session

import "testing"

func TestToolOutputs(t *testing.T) {
	h := []HistoryEntry{
		{Turn: 1, Msg: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "a", Name: "shell", Arguments: `{"commands":["ls"]}`}}}},
		{Turn: 1, Msg: Message{Role: RoleTool, ToolCallID: "a", Content: "out a"}},
		{Turn: 2, Msg: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "b"}, {ID: "c"}}}},
		{Turn: 2, Msg: Message{Role: RoleTool, ToolCallID: "b", Content: "out b"}},
		// A result whose call is not in the turn (trimmed) is ignored.
		{Turn: 2, Msg: Message{Role: RoleTool, ToolCallID: "a", Content: "stray"}},
		{Turn: 3, Msg: Message{Role: RoleAssistant, Content: "no calls"}},
	}
	if r := ToolOutputs(h, ToolOutputRequest{}); r.Turn != 2 || len(r.Calls) != 2 || r.Calls[0].Output != "" ||
		!r.Calls[0].HasOutput || r.Calls[0].OutputBytes != 5 || r.Calls[1].HasOutput {
		t.Errorf("latest turn: %+v", r)
	}
	if r := ToolOutputs(h, ToolOutputRequest{Turn: 1, CallID: "a"}); len(r.Calls) != 1 || r.Calls[0].Output != "out a" || r.Calls[0].Arguments != `{"commands":["ls"]}` {
		t.Errorf("one call: %+v", r)
	}
	if r := ToolOutputs(h, ToolOutputRequest{Turn: 2, CallID: "a"}); len(r.Calls) != 0 {
		t.Errorf("a call of another turn: %+v", r)
	}
	if r := ToolOutputs(h, ToolOutputRequest{Turn: 9}); r.Turn != 9 || len(r.Calls) != 0 {
		t.Errorf("a turn no longer kept: %+v", r)
	}
}
