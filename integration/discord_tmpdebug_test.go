package integration

import (
	"testing"

	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/workflows"
)

func TestDiscordTmpStopDuringApproval(t *testing.T) {
	s := newStack(t)
	th := s.thread("stopappr")
	s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch x")), fakeopenai.FinalStep("two"))
	s.say(th, "ev-1", "go")
	s.waitState(th, "pending", func(ts workflows.TurnState) bool { return ts.Pending != nil })
	s.say(th, "ev-2", "/stop")
	s.waitState(th, "done", done)
	t.Logf("%s", dump(s.state(th)))
	s.say(th, "ev-3", "again")
	s.waitState(th, "done2", func(ts workflows.TurnState) bool { return ts.Turn == 2 && done(ts) })
	last, _ := s.model.LastRequest()
	for _, m := range last.Body.Messages {
		t.Logf("%s tool_call_id=%q calls=%d content=%.80q", m.Role, m.ToolCallID, len(m.ToolCalls), m.Content)
	}
}
