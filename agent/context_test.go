package agent_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/session"
)

// turnMsgs is one turn: a request, a shell call, its large output, an
// answer.
func turnMsgs(n, outBytes int) []session.Message {
	id := fmt.Sprintf("call_%d", n)
	return []session.Message{
		{Role: session.RoleUser, Content: fmt.Sprintf("request %d: please look at module %d", n, n)},
		{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{{ID: id, Name: "shell", Arguments: `{"commands":["cat module.go"]}`}}},
		{Role: session.RoleTool, ToolCallID: id, Name: "shell", Content: "$ cat module.go\n" + strings.Repeat("x", outBytes) + "\nexit code: 0"},
		{Role: session.RoleAssistant, Content: fmt.Sprintf("answer %d: module %d looks fine", n, n)},
	}
}

// Over a long conversation with large outputs, what is sent never passes
// the window, and shrinking takes old tool outputs first, then old tool
// calls: the user's requests and the assistant's answers stay longest.
func TestFitKeepsWhatMatters(t *testing.T) {
	w := agent.Window{ContextTokens: 32000, AnswerTokens: 4000}
	var msgs []session.Message
	for n := 1; n <= 200; n++ {
		msgs = append(msgs, turnMsgs(n, 12000)...)
		fit := agent.Fit(msgs, w)
		if got := agent.TranscriptTokens(fit); got > w.Available() {
			t.Fatalf("turn %d: sent %d tokens, window allows %d", n, got, w.Available())
		}
		if n == 8 {
			// Eight turns of 12 KB fit once the old outputs are cut: every
			// request and answer is still there, the last output whole.
			text := fmt.Sprint(fit)
			for i := 1; i <= 8; i++ {
				if !strings.Contains(text, fmt.Sprintf("request %d:", i)) || !strings.Contains(text, fmt.Sprintf("answer %d:", i)) {
					t.Fatalf("turn 8 lost request or answer %d", i)
				}
			}
			if last := fit[len(fit)-2]; last.Role != session.RoleTool || len(last.Content) < 12000 {
				t.Fatalf("the current turn's output was cut: %d bytes", len(last.Content))
			}
			if !strings.Contains(fit[2].Content, "bytes of this output were cut") {
				t.Fatalf("the oldest output was not elided: %.80q", fit[2].Content)
			}
		}
	}
	// A transcript within the window is sent as it is.
	small := turnMsgs(1, 100)
	if got := agent.Fit(small, w); len(got) != len(small) || got[2].Content != small[2].Content {
		t.Fatal("a small transcript was changed")
	}
}

// The current turn alone can be larger than the window: its older outputs
// are cut too, never its latest one's head and tail.
func TestFitCutsWithinATurn(t *testing.T) {
	w := agent.Window{ContextTokens: 16000, AnswerTokens: 2000}
	msgs := []session.Message{{Role: session.RoleUser, Content: "do many things"}}
	for i := range 20 {
		id := fmt.Sprint("c", i)
		msgs = append(msgs,
			session.Message{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{{ID: id, Name: "shell", Arguments: `{"commands":["make"]}`}}},
			session.Message{Role: session.RoleTool, ToolCallID: id, Name: "shell", Content: strings.Repeat("y", 8000)})
	}
	fit := agent.Fit(msgs, w)
	if got := agent.TranscriptTokens(fit); got > w.Available() {
		t.Fatalf("sent %d tokens, window allows %d", got, w.Available())
	}
	if fit[0].Content != "do many things" || len(fit[len(fit)-1].Content) != 8000 {
		t.Fatal("the request or the latest output did not survive")
	}
}

func TestEstimateTokensErrsHigh(t *testing.T) {
	for _, s := range []string{"hello world, this is English text", "func main() { fmt.Println(x) }", "日本語のテキストです", strings.Repeat("a", 4000)} {
		if n := agent.EstimateTokens(s); n < len([]rune(s))/4 {
			t.Errorf("%.20q: %d tokens is below any tokenizer's count", s, n)
		}
	}
}

// The README documents the window's defaults as config's registry shows
// them; they are this package's.
func TestWindowDefaults(t *testing.T) {
	if agent.DefaultContextTokens != 128000 || agent.DefaultAnswerTokens != 8192 {
		t.Fatal("update SANDBOT_MODEL_CONTEXT_TOKENS / SANDBOT_MODEL_ANSWER_TOKENS's DefaultDoc in config/registry.go")
	}
	if got := (agent.Window{}).Available(); got != 128000-8192 {
		t.Fatalf("a zero window allows %d tokens", got)
	}
}

// TestFitAllocatesInProportion: folding old tool calls rebuilt the whole
// transcript for every call folded, so one model call of a long session
// allocated the transcript once per old call (the soak's workers: over
// 100 MB a turn, which held their heaps at several times the live data).
// Fitting a transcript of 1,500 turns that needs every old call folded
// must allocate in proportion to the transcript, not to its square.
func TestFitAllocatesInProportion(t *testing.T) {
	var msgs []session.Message
	for n := 1; n <= 1500; n++ {
		msgs = append(msgs, turnMsgs(n, 40)...)
	}
	// Small outputs, so eliding them frees nothing and every old call is
	// folded before the window is met (then whole exchanges go).
	w := agent.Window{ContextTokens: 20000, AnswerTokens: 4000}
	var size int
	for _, m := range msgs {
		size += len(m.Content) + 200 // its header, about
	}
	var fit []session.Message
	allocs := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			fit = agent.Fit(msgs, w)
		}
	})
	if got := agent.TranscriptTokens(fit); got > w.Available() {
		t.Fatalf("sent %d tokens, window allows %d", got, w.Available())
	}
	per := allocs.AllocedBytesPerOp()
	t.Logf("fitting %d messages (about %d KB) allocated %d KB", len(msgs), size>>10, per>>10)
	if per > int64(20*size) {
		t.Fatalf("fitting %d messages (about %d KB) allocated %d KB: more than 20 times the transcript", len(msgs), size>>10, per>>10)
	}
}
