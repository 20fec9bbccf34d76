package agent

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// MaxToolResultBytes is the default cap on one tool result kept in the
// transcript (and so in workflow history).
const MaxToolResultBytes = 16 << 10

// CapToolResult makes s valid UTF-8 and, when it is longer than max bytes
// (max <= 0 means MaxToolResultBytes), keeps its head and tail around a
// marker saying how many bytes were cut. The result is never longer than
// max and never splits a rune. Head and tail both matter for command output:
// what ran first and, often, the error summary at the end.
func CapToolResult(s string, max int) string {
	if max <= 0 {
		max = MaxToolResultBytes
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	// The real count is smaller than len(s), so its marker is no longer.
	room := max - len(cutMarker(len(s)))
	if room < 16 {
		return s[:runeFloor(s, max)]
	}
	head := runeFloor(s, room/2)
	tail := runeCeil(s, len(s)-(room-head))
	return s[:head] + cutMarker(tail-head) + s[tail:]
}

func cutMarker(n int) string { return fmt.Sprintf("\n[... %d bytes cut ...]\n", n) }

// runeFloor is the largest rune boundary <= i.
func runeFloor(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// runeCeil is the smallest rune boundary >= i.
func runeCeil(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// Lines FormatShellResult writes for commands whose outcome is not a plain
// exit.
const (
	InterruptedNote = "interrupted: the worker running this command died; it was NOT re-run, its effects are unknown"
	SkippedNote     = "skipped: not run, because an earlier command in this call was interrupted"
)

// FormatShellResult renders a shell call's results for the model, one block
// per command:
//
//	$ <command>
//	<stdout>
//	stderr:
//	<stderr>
//	timed out after 30s (killed)
//	output truncated: 1234 bytes dropped
//	exit code: 0
//
// Interrupted and skipped commands say so instead of an exit code. The text
// is valid UTF-8 but not capped; pass it through CapToolResult.
func FormatShellResult(results []sandbox.CommandResult) string {
	if len(results) == 0 {
		return "(no commands were run)"
	}
	var b strings.Builder
	for i, r := range results {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("$ ")
		b.WriteString(r.Command)
		b.WriteString("\n")
		if r.Skipped {
			b.WriteString(SkippedNote + "\n")
			continue
		}
		if r.Stdout != "" {
			writeLines(&b, r.Stdout)
		}
		if r.Stderr != "" {
			b.WriteString("stderr:\n")
			writeLines(&b, r.Stderr)
		}
		if r.Interrupted {
			b.WriteString(InterruptedNote + "\n")
			continue
		}
		if r.Error != "" {
			// It did not run to an end the backend saw (the sandbox
			// could not start it, or the call was stopped): the error,
			// never an exit code, which would read as the command's.
			b.WriteString(r.Error + "\n")
			continue
		}
		if r.Stdout == "" && r.Stderr == "" {
			b.WriteString("(no output)\n")
		}
		if r.TimedOut {
			fmt.Fprintf(&b, "timed out after %s (killed)\n", roundDuration(r.Duration))
		}
		if r.Truncated || r.DroppedBytes > 0 {
			if r.DroppedBytes > 0 {
				fmt.Fprintf(&b, "output truncated: %d bytes dropped\n", r.DroppedBytes)
			} else {
				b.WriteString("output truncated\n")
			}
		}
		fmt.Fprintf(&b, "exit code: %d\n", r.ExitCode)
	}
	return strings.ToValidUTF8(strings.TrimRight(b.String(), "\n"), "\uFFFD")
}

func writeLines(b *strings.Builder, s string) {
	b.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
}

func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// omittedNotePrefix starts the note Budget puts where it dropped messages;
// Budget recognises its own note so budgeting twice does not stack notes.
const omittedNotePrefix = "[Note: earlier messages of this conversation were omitted to fit the context budget"

func omittedNote(n int) session.Message {
	return session.Message{Role: session.RoleUser, Content: fmt.Sprintf("%s (%d messages). If something from them matters, ask the user to repeat it.]", omittedNotePrefix, n)}
}

func isOmittedNote(m session.Message) bool {
	return m.Role == session.RoleUser && strings.HasPrefix(m.Content, omittedNotePrefix)
}

// noteCount reads the message count back out of a note.
func noteCount(m session.Message) int {
	rest := strings.TrimPrefix(m.Content, omittedNotePrefix+" (")
	digits, _, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(digits)
	return n
}

// MessageSize is the approximate wire size of a message in bytes, the unit
// Budget counts in.
func MessageSize(m session.Message) int {
	n := 16 + len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID)
	for _, tc := range m.ToolCalls {
		n += 16 + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
	}
	return n
}

// Budget fits a transcript into maxBytes (by MessageSize; maxBytes <= 0
// means no limit) by dropping the oldest whole exchanges. An exchange starts
// at a user message and runs to the next one, so an assistant message is
// never separated from its tool results. The current turn (from its first
// user message onward) is always kept, even if it alone exceeds the budget.
// Where messages were dropped, a short user-role note says so (a user
// message, because several servers reject system messages after the first).
// A transcript within budget is returned as is; otherwise a new slice is
// returned and the input is not modified.
func Budget(messages []session.Message, maxBytes int) []session.Message {
	if maxBytes <= 0 {
		return messages
	}
	total := 0
	for _, m := range messages {
		total += MessageSize(m)
	}
	if total <= maxBytes {
		return messages
	}

	starts := exchangeStarts(messages)
	if len(starts) == 0 {
		return messages
	}
	current := starts[len(starts)-1]
	prior := 0
	if isOmittedNote(messages[0]) {
		prior = noteCount(messages[0]) - 1 // the note itself is not a message of the conversation
	}

	// Walk the candidate cut points oldest first, subtracting what each cut
	// drops, until the rest plus a note fits (or only the current turn
	// remains).
	cut, remaining, i := 0, total, 0
	for _, s := range starts {
		if s == 0 {
			continue
		}
		for ; i < s; i++ {
			remaining -= MessageSize(messages[i])
		}
		cut = s
		if s == current || remaining+MessageSize(omittedNote(prior+s)) <= maxBytes {
			break
		}
	}
	if cut == 0 {
		return messages
	}
	out := make([]session.Message, 0, len(messages)-cut+1)
	out = append(out, omittedNote(prior+cut))
	return append(out, messages[cut:]...)
}

// exchangeStarts lists the indexes where an exchange begins: a user message
// (not a Budget note) after a non-user message, excluding positions that
// would separate tool results from the assistant message that called them.
func exchangeStarts(messages []session.Message) []int {
	userMsg := func(i int) bool { return messages[i].Role == session.RoleUser && !isOmittedNote(messages[i]) }
	// forbidden[b] marks cut points between a tool call and its result.
	forbidden := make([]bool, len(messages)+1)
	caller := map[string]int{}
	for i, m := range messages {
		for _, tc := range m.ToolCalls {
			caller[tc.ID] = i
		}
		if m.Role == session.RoleTool {
			if p, ok := caller[m.ToolCallID]; ok {
				for b := p + 1; b <= i; b++ {
					forbidden[b] = true
				}
			}
		}
	}
	var starts []int
	for i := range messages {
		if userMsg(i) && (i == 0 || !userMsg(i-1)) && !forbidden[i] {
			starts = append(starts, i)
		}
	}
	return starts
}
