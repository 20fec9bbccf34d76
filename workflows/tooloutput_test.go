package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/session"
)

// The tool_output query answers a turn's calls from the transcript, and
// one call with the result the model was given, while the session runs.
func TestToolOutputQuery(t *testing.T) {
	h := newHarness(t, shellCall("c1", "echo one"), shellCall("c2", "echo two"), final("done"))
	h.at(0, func() { h.send("e1", "go") })
	var list, one, latest session.ToolOutputResponse
	query := func(req session.ToolOutputRequest, out *session.ToolOutputResponse) {
		v, err := h.env.QueryWorkflow(session.QueryToolOutput, req)
		if err != nil {
			t.Errorf("query %+v: %v", req, err)
			return
		}
		if err := v.Get(out); err != nil {
			t.Error(err)
		}
	}
	h.at(time.Minute, func() {
		query(session.ToolOutputRequest{Turn: 1}, &list)
		query(session.ToolOutputRequest{Turn: 1, CallID: "c2"}, &one)
		query(session.ToolOutputRequest{}, &latest)
	})
	h.destroyAt(2 * time.Minute)
	h.run(h.input(session.ApproveNever))
	if len(list.Calls) != 2 || list.Calls[0].CallID != "c1" || list.Calls[1].Output != "" || !list.Calls[1].HasOutput || list.Calls[1].OutputBytes == 0 {
		t.Fatalf("list = %+v", list)
	}
	if len(one.Calls) != 1 || one.Calls[0].CallID != "c2" || !strings.Contains(one.Calls[0].Arguments, "echo two") || one.Calls[0].OutputBytes != len(one.Calls[0].Output) {
		t.Fatalf("one = %+v", one)
	}
	if latest.Turn != 1 || len(latest.Calls) != 2 {
		t.Fatalf("latest turn = %+v", latest)
	}
}
