package agent

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sandbot/sandbot/session"
)

// Fitting a conversation into the model's context window. Budget (by
// bytes, dropping the oldest whole exchanges) made the model forget the
// user's earlier requests after one large turn, and sent the current turn
// whole even past the budget. Fit counts estimated tokens against the
// window and shrinks in the order a person would: old tool outputs first
// (head and tail kept, with a note of what was cut), then old tool calls
// (folded into one line each), and only then, oldest first, whole
// exchanges. User messages and the assistant's answers go last.

// Window is the model's context window in tokens and the part of it kept
// free for the answer.
type Window struct {
	ContextTokens int
	AnswerTokens  int
}

// Defaults for a zero Window.
const (
	DefaultContextTokens = 128000
	DefaultAnswerTokens  = 8192
)

// Available is how many tokens the request may use.
func (w Window) Available() int {
	ctx, ans := w.ContextTokens, w.AnswerTokens
	if ctx <= 0 {
		ctx = DefaultContextTokens
	}
	if ans <= 0 {
		ans = DefaultAnswerTokens
	}
	return max(ctx-ans, ctx/4)
}

// Cap lowers the window so that a request uses at most tokens.
func (w Window) Cap(tokens int) Window {
	if tokens <= 0 || w.Available() <= tokens {
		return w
	}
	ans := w.AnswerTokens
	if ans <= 0 {
		ans = DefaultAnswerTokens
	}
	return Window{ContextTokens: tokens + ans, AnswerTokens: ans}
}

// EstimateTokens estimates the tokens of a text the way BPE tokenizers
// split it: about four bytes of English or code per token, but a token
// per character or two of non-Latin text. It errs high: an estimate below
// the truth is a request the server refuses.
func EstimateTokens(s string) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		other++
		i += n
	}
	return (ascii+2)/3 + other
}

// MessageTokens estimates a message's tokens, with the per-message
// overhead of the chat format.
func MessageTokens(m session.Message) int {
	n := 4 + EstimateTokens(m.Content) + EstimateTokens(m.Name) + len(m.Images)*ImageTokens
	for _, tc := range m.ToolCalls {
		n += 8 + EstimateTokens(tc.Name) + EstimateTokens(tc.Arguments)
	}
	return n
}

// TranscriptTokens estimates the tokens of a transcript.
func TranscriptTokens(msgs []session.Message) int {
	n := 0
	for _, m := range msgs {
		n += MessageTokens(m)
	}
	return n
}

// elidedKeep is how much of an elided tool output is kept (half head, half
// tail).
const elidedKeep = 1024

// elideMarker replaces the middle of an elided tool output.
const elideMarker = "\n[... %d bytes of this output were cut to fit the context; run the command again if you need them ...]\n"

// elide shortens a tool output to its head and tail.
func elide(s string) (string, bool) {
	if len(s) <= elidedKeep+len(elideMarker)+16 {
		return s, false
	}
	head, tail := cutRunes(s, elidedKeep/2, true), cutRunes(s, elidedKeep/2, false)
	return head + fmt.Sprintf(elideMarker, len(s)-len(head)-len(tail)) + tail, true
}

// cutRunes returns about n bytes of the start (or end) of s, on a rune
// boundary.
func cutRunes(s string, n int, start bool) string {
	if start {
		i := n
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		return s[:i]
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// Fit returns msgs shrunk until they fit w. The last exchange (from the
// last user message on) is kept as long as anything else can give way,
// but its own older tool outputs are elided too when the turn alone is
// too big. msgs is never modified.
func Fit(msgs []session.Message, w Window) []session.Message {
	out, _ := FitReport(msgs, w)
	return out
}

// FitReport is Fit that also says how many messages of msgs it dropped
// whole (its last resort): a conversation that needs that is due for
// compaction.
func FitReport(msgs []session.Message, w Window) ([]session.Message, int) {
	limit := w.Available()
	total := TranscriptTokens(msgs)
	if total <= limit {
		return msgs, 0
	}
	out := append([]session.Message(nil), msgs...)
	current := currentStart(out)

	// 1. Old tool outputs, oldest first, then the current turn's but its
	// most recent one.
	lastTool := -1
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].Role == session.RoleTool {
			lastTool = i
			break
		}
	}
	for pass := 0; pass < 2 && total > limit; pass++ {
		for i := range out {
			if total <= limit {
				break
			}
			if out[i].Role != session.RoleTool || (pass == 0) != (i < current) || i == lastTool {
				continue
			}
			if short, ok := elide(out[i].Content); ok {
				before := MessageTokens(out[i])
				out[i].Content = short
				total += MessageTokens(out[i]) - before
			}
		}
	}
	if total <= limit {
		return out, 0
	}

	// 2. Old tool calls: an assistant message that called tools, and their
	// results, become one assistant line per call. One pass into a new
	// slice: rebuilding the whole transcript for every call folded made
	// each model call of a long session allocate the transcript once per
	// old call (the soak's workers allocated over 100 MB a turn here,
	// which kept their heaps at several times the live data).
	shrunk := make([]session.Message, 0, len(out))
	i := 0
	for i < current && total > limit {
		if out[i].Role != session.RoleAssistant || len(out[i].ToolCalls) == 0 {
			shrunk = append(shrunk, out[i])
			i++
			continue
		}
		j := i + 1
		for j < len(out) && out[j].Role == session.RoleTool {
			j++
		}
		folded := foldCalls(out[i], out[i+1:j])
		total += MessageTokens(folded) - TranscriptTokens(out[i:j])
		shrunk = append(shrunk, folded)
		i = j
	}
	out = append(shrunk, out[i:]...)
	if total <= limit {
		return out, 0
	}

	// 3. Whole exchanges, oldest first, with a note of how many messages
	// went; the current exchange stays.
	kept := dropOldest(out, total, limit)
	dropped := len(out) - len(kept)
	if len(kept) > 0 && isOmittedNote(kept[0]) {
		dropped++
	}
	return kept, max(dropped, 0)
}

// dropOldest drops whole exchanges from the start of msgs (total tokens)
// until the rest and a note saying so fit limit, or only the current
// exchange is left.
func dropOldest(msgs []session.Message, total, limit int) []session.Message {
	if len(msgs) > 1 && msgs[0].Role == session.RoleUser && strings.HasPrefix(msgs[0].Content, CompactNotePrefix) {
		// A compaction's summary stands for everything before it: it goes
		// last, with the current exchange.
		note := MessageTokens(msgs[0])
		return append([]session.Message{msgs[0]}, dropOldest(msgs[1:], total-note, limit-note)...)
	}
	starts := exchangeStarts(msgs)
	if len(starts) == 0 {
		return msgs
	}
	current := starts[len(starts)-1]
	prior := 0
	if isOmittedNote(msgs[0]) {
		prior = noteCount(msgs[0]) - 1
	}
	cut, remaining, i := 0, total, 0
	for _, s := range starts {
		if s == 0 {
			continue
		}
		for ; i < s; i++ {
			remaining -= MessageTokens(msgs[i])
		}
		cut = s
		if s == current || remaining+MessageTokens(omittedNote(prior+s)) <= limit {
			break
		}
	}
	if cut == 0 {
		return msgs
	}
	return append([]session.Message{omittedNote(prior + cut)}, msgs[cut:]...)
}

// currentStart is the index of the last user message (the current
// exchange), or 0.
func currentStart(msgs []session.Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == session.RoleUser && !isOmittedNote(msgs[i]) {
			return i
		}
	}
	return 0
}

// foldCalls writes an assistant message's tool calls and their results as
// one plain assistant message: what ran and how it ended.
func foldCalls(call session.Message, results []session.Message) session.Message {
	byID := map[string]string{}
	for _, r := range results {
		byID[r.ToolCallID] = r.Content
	}
	var b strings.Builder
	if c := strings.TrimSpace(call.Content); c != "" {
		b.WriteString(c)
		b.WriteString("\n")
	}
	b.WriteString("[Earlier tool calls, summarised to fit the context:")
	for _, tc := range call.ToolCalls {
		args := tc.Arguments
		if a, err := ParseShellArgs(tc.Arguments); err == nil {
			args = strings.Join(a.Commands, "; ")
		}
		if len(args) > 200 {
			args = cutRunes(args, 200, true) + "…"
		}
		fmt.Fprintf(&b, "\n- %s: %s → %s", tc.Name, args, outcome(byID[tc.ID]))
	}
	b.WriteString("]")
	return session.Message{Role: session.RoleAssistant, Content: b.String()}
}

// outcome is the last line of a tool result that says how it ended.
func outcome(result string) string {
	lines := strings.Split(strings.TrimSpace(result), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "exit code") || strings.HasPrefix(l, "not run") || strings.HasPrefix(l, "timed out") {
			return l
		}
	}
	if len(lines) == 0 || lines[0] == "" {
		return "no output"
	}
	return "done"
}

// CompactRequest asks for the oldest part of a conversation to be
// summarised.
type CompactRequest struct {
	Messages []session.Message `json:"messages"`
}

// CompactResponse is the summary that replaces them.
type CompactResponse struct {
	Summary string `json:"summary"`
	Usage   Usage  `json:"usage"`
}

// compactPrompt asks the model for a summary it can continue from.
const compactPrompt = `The conversation above no longer fits your context window. Write a summary of it that lets you continue the work without it:
- every request the user made, the first one quoted word for word, and whether it was done;
- decisions taken and why, and what the user approved or refused;
- the files created or changed and their state; commands that matter and what they showed;
- what is still open.
Write plain text, at most 500 words. Do not call tools.`

// CompactNotePrefix starts the transcript entry a summary becomes.
const CompactNotePrefix = "[Summary of the earlier conversation, written when it no longer fit the model's context:"
