package session

import "time"

// ToolOutputRequest is the argument of QueryToolOutput: the calls of one
// turn, or one call.
type ToolOutputRequest struct {
	// Turn picks the turn whose calls are listed (0: the latest turn the
	// transcript holds).
	Turn int `json:"turn,omitempty"`
	// CallID, when set, asks for that call alone, with its output; without
	// it the answer lists the turn's calls without their outputs.
	CallID string `json:"call_id,omitempty"`
}

// ToolOutputResponse answers QueryToolOutput.
type ToolOutputResponse struct {
	Turn  int          `json:"turn"`
	Calls []ToolOutput `json:"calls,omitempty"`
}

// ToolOutput is one tool call as the session's transcript keeps it: the
// arguments the model sent and the result the model was given. Both were
// scrubbed of the worker's secrets by the activities that produced them
// before they reached workflow state.
type ToolOutput struct {
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Output is the tool result (only when the request named the call).
	// It is what the transcript keeps: capped at the tool result limit,
	// head and tail around a marker saying how much was cut.
	Output string `json:"output,omitempty"`
	// OutputBytes is the length of the kept result; HasOutput says whether
	// there is one (a call still running has none yet).
	OutputBytes int  `json:"output_bytes"`
	HasOutput   bool `json:"has_output"`
	// At is when the call's result was recorded (zero without one).
	At time.Time `json:"at,omitzero"`
}

// ToolOutputs answers req from a transcript: the calls of the requested
// turn in the order the model asked for them, each with its result. It is
// the query handler's answer, and what a bot computes from QueryHistory
// when a session's worker predates QueryToolOutput, so both agree.
func ToolOutputs(h []HistoryEntry, req ToolOutputRequest) ToolOutputResponse {
	turn := req.Turn
	if turn <= 0 {
		for _, e := range h {
			if e.Msg.Role == RoleAssistant && len(e.Msg.ToolCalls) > 0 {
				turn = max(turn, e.Turn)
			}
		}
	}
	resp := ToolOutputResponse{Turn: turn}
	index := map[string]int{}
	for _, e := range h {
		if e.Turn != turn {
			continue
		}
		switch e.Msg.Role {
		case RoleAssistant:
			for _, tc := range e.Msg.ToolCalls {
				if req.CallID != "" && tc.ID != req.CallID {
					continue
				}
				if _, dup := index[tc.ID]; dup {
					continue
				}
				index[tc.ID] = len(resp.Calls)
				resp.Calls = append(resp.Calls, ToolOutput{CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
			}
		case RoleTool:
			i, ok := index[e.Msg.ToolCallID]
			if !ok {
				continue
			}
			c := &resp.Calls[i]
			c.HasOutput, c.OutputBytes, c.At = true, len(e.Msg.Content), e.At
			if req.CallID != "" {
				c.Output = e.Msg.Content
			}
		}
	}
	return resp
}
