package agent_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sandbot/sandbot/agent"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/sandbox/blobstore"
	"github.com/sandbot/sandbot/session"
)

// BenchmarkStoredCall measures the model calls of a session from its 25th
// turn on (24 turns of ten tool calls before it, two messages more at each
// call), in the same run: the whole transcript sent each time (as the
// real-work floor of the turn-overhead benchmark sends it) against the
// previous call's stored transcript plus what is new, stored in a real file
// store (as sessions send it). The difference is what the stored
// transcript costs a call: the chunk's digest and its write, which the
// answer waits for. Use a fixed -benchtime (e.g. 300x), so both end at the
// same transcript.
//
//	go test ./agent -run '^$' -bench StoredCall -benchtime 300x -count 4
func BenchmarkStoredCall(b *testing.B) {
	var history []session.Message
	for turn := 1; turn <= 24; turn++ {
		history = append(history, userMsg("go"))
		for call := range 10 {
			history = append(history, trueCall(fmt.Sprintf("call_%d_%d", turn, call))...)
		}
		history = append(history, session.Message{Role: session.RoleAssistant, Content: "done"})
	}
	callAgain := func(fakeopenai.RecordedRequest) fakeopenai.Step {
		return fakeopenai.ToolCallStep("call_x", "shell", `{"commands":["true"]}`)
	}
	ctx := context.Background()
	b.Run("whole", func(b *testing.B) {
		a, f := newAgent(b, nil)
		f.SetResponder(callAgain)
		i := 0
		msgs := history[:len(history):len(history)]
		for b.Loop() {
			i++
			msgs = append(msgs, trueCall(fmt.Sprintf("call_b_%d", i))...)
			if _, err := a.Complete(ctx, agent.ModelRequest{Messages: msgs}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stored", func(b *testing.B) {
		a, f := newAgent(b, nil)
		f.SetResponder(callAgain)
		s, err := blobstore.Open(ctx, "file://"+b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		a.Transcripts = s
		r, err := a.Complete(ctx, agent.ModelRequest{Stored: true, SessionID: sid, Messages: history})
		if err != nil {
			b.Fatal(err)
		}
		base := r.Transcript
		i := 0
		for b.Loop() {
			i++
			r, err := a.CompleteStored(ctx, agent.ModelRequest{Stored: true, SessionID: sid, Base: base, Messages: trueCall(fmt.Sprintf("call_b_%d", i))})
			if err != nil {
				b.Fatal(err)
			}
			base = r.Transcript
		}
	})
}

// trueCall is one shell call of `true` and its result, as a session's
// transcript holds them.
func trueCall(id string) []session.Message {
	return []session.Message{
		{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{{ID: id, Name: "shell", Arguments: `{"commands":["true"]}`}}},
		{Role: session.RoleTool, ToolCallID: id, Name: "shell", Content: "$ true\n(exit 0)\n"},
	}
}
