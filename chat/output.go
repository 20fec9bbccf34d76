package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/session"
)

// Action IDs of the "View output" buttons. A status card carries one
// ActionViewOutput button for its turn (whatever the number of calls, so
// no card nears Slack's 25 elements per block or Discord's 5 rows of 5);
// when the turn ran several calls, the answer is a picker with one
// ActionViewCall button per call.
const (
	// ActionViewOutput's value is EncodeApprovalCompact's encoding of the
	// session and the turn number.
	ActionViewOutput = "view_output"
	// ActionViewCall's value encodes the session and "<turn>-<call ID>",
	// or "<turn>#<n>" (the n-th call of the turn) when a call ID is too
	// long for the platform's button value.
	ActionViewCall = "view_call"
)

// MaxPickerCalls is how many calls a picker offers: the latest, as many
// as one Discord message holds buttons (5 rows of 5).
const MaxPickerCalls = 25

// OutputShower is an optional Poster capability: the platform answers
// ActionViewOutput and ActionViewCall clicks (through Core.ViewOutput),
// so status cards carry the View output button. A terminal, which has
// its own details view, does not.
type OutputShower interface {
	ShowsOutput() bool
}

func showsOutput(p Poster) bool {
	s, ok := p.(OutputShower)
	return ok && s.ShowsOutput()
}

// OutputView is what a View output click shows the user who clicked,
// privately. Exactly one of Text, Picker and Call is set.
type OutputView struct {
	// Text is a refusal or a problem, written for the user.
	Text string
	// Picker lists the turn's calls, one ActionViewCall button each.
	Picker *Card
	// Call is one call's arguments and output.
	Call *CallOutput
}

// CallOutput is one tool call as the session's transcript keeps it. Every
// text is neutralised (chat/internal/safetext) and was scrubbed of the
// worker's secrets before it reached the session.
type CallOutput struct {
	Turn   int
	CallID string
	// Index and Of place the call in its turn ("call 2 of 4").
	Index, Of int
	Name      string
	// Commands are the shell commands, one entry each; Arguments is the
	// raw argument JSON of a call that is not a shell call.
	Commands  []string
	Arguments string
	// Output is the result the model was given; HasOutput is false while
	// the call runs (or if it never produced one).
	Output    string
	HasOutput bool
}

// Heading is "Turn 3 · call 2 of 4".
func (o CallOutput) Heading() string {
	if o.Of > 1 {
		return fmt.Sprintf("Turn %d · call %d of %d", o.Turn, o.Index, o.Of)
	}
	return fmt.Sprintf("Turn %d · tool call", o.Turn)
}

// FileName names a file holding the call's output, for example
// "output-turn3-2-AbCdEfGh.txt" (ASCII, stable for the call).
func (o CallOutput) FileName() string {
	return fmt.Sprintf("output-turn%d-%d-%s.txt", o.Turn, o.Index, callDigest(o.CallID)[:8])
}

// ArgumentsText is the call's arguments as text: its commands, one per
// line after "$ " and numbered when there are several, or the raw JSON.
func (o CallOutput) ArgumentsText() string {
	if len(o.Commands) == 0 {
		return o.Arguments
	}
	var b strings.Builder
	for i, c := range o.Commands {
		if len(o.Commands) > 1 {
			fmt.Fprintf(&b, "# command %d of %d\n", i+1, len(o.Commands))
		}
		b.WriteString(c)
		b.WriteString("\n")
	}
	return b.String()
}

// FileText is the whole call as one text file: its commands, then its
// output.
func (o CallOutput) FileText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s (%s)\n", o.Heading(), safetext.Line(o.CallID))
	b.WriteString(o.ArgumentsText())
	b.WriteString("\n# output\n")
	if o.HasOutput {
		b.WriteString(o.Output)
		if !strings.HasSuffix(o.Output, "\n") {
			b.WriteString("\n")
		}
	} else {
		b.WriteString(NoOutputText + "\n")
	}
	return b.String()
}

// NoOutputText stands in for the output of a call that has none yet.
const NoOutputText = "(no output yet: the call has not finished)"

// toolOutputReader is the optional Sessions capability that answers
// QueryToolOutput; without it the core computes the answer from History.
type toolOutputReader interface {
	ToolOutput(ctx context.Context, id string, req session.ToolOutputRequest) (session.ToolOutputResponse, error)
}

func (c *Core) toolOutput(ctx context.Context, id string, req session.ToolOutputRequest) (session.ToolOutputResponse, error) {
	return readToolOutput(ctx, c.s, id, req)
}

// readToolOutput asks s for QueryToolOutput's answer, or computes it from
// s's History when s cannot answer it.
func readToolOutput(ctx context.Context, s Sessions, id string, req session.ToolOutputRequest) (session.ToolOutputResponse, error) {
	if r, ok := s.(toolOutputReader); ok {
		return r.ToolOutput(ctx, id, req)
	}
	h, err := s.History(ctx, id, session.HistoryRequest{})
	if err != nil {
		return session.ToolOutputResponse{}, err
	}
	return session.ToolOutputs(h, req), nil
}

// ToolOutput passes QueryToolOutput through the meter (it counts nothing),
// so the sessions it wraps still answer it.
func (m *meteredSessions) ToolOutput(ctx context.Context, id string, req session.ToolOutputRequest) (session.ToolOutputResponse, error) {
	return readToolOutput(ctx, m.Sessions, id, req)
}

// ViewOutput answers a View output click (ActionViewOutput or
// ActionViewCall) with what to show the clicking user privately: a
// picker of the turn's calls, one call's arguments and output, or a
// refusal.
//
// It checks what /history checks: the user may use the bot in the thread
// the click came from (Authorize). The button's value is not trusted to
// name the session: it must name the click's own thread, so a forged
// value naming another session's call is refused, and a thread-relative
// value reads the click's thread.
func (c *Core) ViewOutput(ctx context.Context, a Action) OutputView {
	refuse := func(text string) OutputView { return OutputView{Text: text} }
	if err := c.authorize(ctx, a.User, a.Thread); err != nil {
		return refuse(UserMessage(err))
	}
	if a.Thread == (Thread{}) {
		return refuse("This button does not say which session it belongs to; use /history in the session's thread.")
	}
	id, token, err := DecodeApproval(a.Value)
	if err != nil || strings.HasPrefix(token, digestPrefix) {
		c.log.Warn("bad view output value", "action", a.ID, "err", err)
		return refuse("This button's data is damaged; use the button on the latest status message, or /history.")
	}
	if id != "" && id != a.Thread.ID() {
		c.log.Warn("view output refused: the button names another thread's session", "thread_id", a.Thread.ID(), "named", id, "user", a.User.ID)
		return refuse("This button belongs to another thread's session; open the output from that thread.")
	}
	id = a.Thread.ID()
	turn, call, err := parseOutputToken(a.ID, token)
	if err != nil {
		c.log.Warn("bad view output value", "action", a.ID, "err", err)
		return refuse("This button's data is damaged; use the button on the latest status message, or /history.")
	}
	cctx, cancel := c.quick(ctx)
	defer cancel()
	list, err := c.toolOutput(cctx, id, session.ToolOutputRequest{Turn: turn})
	if err != nil {
		if ue := (*UserError)(nil); !errors.As(err, &ue) {
			c.log.Error("view output: list calls failed", "workflow_id", id, "turn", turn, "err", err)
		}
		return refuse(UserMessage(err))
	}
	if len(list.Calls) == 0 {
		return refuse(fmt.Sprintf("The tool calls of turn %d are no longer in this session's transcript (old turns are trimmed or compacted).", turn))
	}
	index := -1
	switch {
	case a.ID == ActionViewOutput && len(list.Calls) == 1:
		index = 0
	case a.ID == ActionViewOutput:
		return OutputView{Picker: c.picker(a.Thread, list)}
	case call.n > 0 && call.n <= len(list.Calls):
		index = call.n - 1
	default:
		for i, tc := range list.Calls {
			if tc.CallID == call.id {
				index = i
			}
		}
	}
	if index < 0 {
		return refuse(fmt.Sprintf("That call of turn %d is no longer in this session's transcript.", turn))
	}
	one, err := c.toolOutput(cctx, id, session.ToolOutputRequest{Turn: turn, CallID: list.Calls[index].CallID})
	if err != nil || len(one.Calls) == 0 {
		if err != nil {
			c.log.Error("view output: read call failed", "workflow_id", id, "turn", turn, "err", err)
			return refuse(UserMessage(err))
		}
		return refuse(fmt.Sprintf("That call of turn %d is no longer in this session's transcript.", turn))
	}
	c.log.Info("view output", "workflow_id", id, "turn", turn, "call_id", one.Calls[0].CallID, "user", a.User.ID)
	out := callOutput(turn, index+1, len(list.Calls), one.Calls[0])
	return OutputView{Call: &out}
}

// callOutput neutralises a call for showing.
func callOutput(turn, index, of int, tc session.ToolOutput) CallOutput {
	o := CallOutput{Turn: turn, CallID: tc.CallID, Index: index, Of: of, Name: safetext.Line(tc.Name), HasOutput: tc.HasOutput,
		Output: safetext.Text(tc.Output)}
	var args session.ShellArgs
	if tc.Name == session.ShellToolName && json.Unmarshal([]byte(tc.Arguments), &args) == nil && len(args.Commands) > 0 {
		for _, cmd := range args.Commands {
			o.Commands = append(o.Commands, safetext.Text(cmd))
		}
	} else {
		o.Arguments = safetext.Text(tc.Arguments)
	}
	return o
}

// picker is the card that lists a turn's calls, the latest
// MaxPickerCalls, one button each.
func (c *Core) picker(th Thread, list session.ToolOutputResponse) *Card {
	calls := list.Calls
	first := max(0, len(calls)-MaxPickerCalls)
	card := &Card{Title: fmt.Sprintf("Turn %d ran %d tool calls", list.Turn, len(calls))}
	text := "Pick one to see its arguments and full output (only you see this)."
	if first > 0 {
		text += fmt.Sprintf(" The %d latest are listed; /history shows the earlier ones.", len(calls)-first)
	}
	card.Blocks = append(card.Blocks, Block{Kind: BlockContext, Text: text})
	maxValue := c.budget(th.Platform).MaxButtonValue
	var buttons []Button
	for i := first; i < len(calls); i++ {
		tc := calls[i]
		label := fmt.Sprintf("%d. %s", i+1, commandLine(session.ToolCallState{Name: tc.Name, Arguments: tc.Arguments}, 60))
		buttons = append(buttons, Button{ID: ActionViewCall, Label: label, Value: callValue(th.ID(), list.Turn, i+1, tc.CallID, maxValue)})
	}
	card.Blocks = append(card.Blocks, Block{Kind: BlockActions, Buttons: buttons})
	return card
}

// outputValue is the value of a card's View output button.
func outputValue(workflowID string, turn, maxValue int) string {
	v, err := EncodeApprovalCompact(workflowID, strconv.Itoa(turn), maxValue)
	if err != nil {
		return approvalRelative + "." + strconv.Itoa(turn)
	}
	return v
}

// callValue is the value of a picker's button for the n-th call of turn.
func callValue(workflowID string, turn, n int, callID string, maxValue int) string {
	token := fmt.Sprintf("%d-%s", turn, callID)
	if v := EncodeApproval(workflowID, token); maxValue <= 0 || len(v) <= maxValue {
		return v
	}
	if v := approvalRelative + "." + escapePart(token); len(v) <= maxValue {
		return v
	}
	return approvalRelative + "." + escapePart(fmt.Sprintf("%d#%d", turn, n))
}

// callRef is the call a picker button names: by ID, or by position.
type callRef struct {
	id string
	n  int
}

// parseOutputToken reads the turn (and, for ActionViewCall, the call) a
// View output value carries.
func parseOutputToken(action, token string) (int, callRef, error) {
	digits := strings.IndexFunc(token, func(r rune) bool { return r < '0' || r > '9' })
	if digits < 0 {
		digits = len(token)
	}
	turn, err := strconv.Atoi(token[:digits])
	if err != nil || turn <= 0 {
		return 0, callRef{}, fmt.Errorf("chat: view output: %q names no turn", truncate(token, 40))
	}
	rest := token[digits:]
	switch {
	case action == ActionViewOutput && rest == "":
		return turn, callRef{}, nil
	case action == ActionViewCall && strings.HasPrefix(rest, "-") && len(rest) > 1:
		return turn, callRef{id: rest[1:]}, nil
	case action == ActionViewCall && strings.HasPrefix(rest, "#"):
		n, err := strconv.Atoi(rest[1:])
		if err != nil || n <= 0 {
			break
		}
		return turn, callRef{n: n}, nil
	}
	return 0, callRef{}, fmt.Errorf("chat: view output: %q is not a %s value", truncate(token, 40), action)
}

// finishedCall reports whether the turn has a call in a final status: the
// card then offers its output.
func finishedCall(ts session.TurnState) bool {
	for _, c := range ts.ToolCalls {
		switch c.Status {
		case session.CallCompleted, session.CallFailed, session.CallRejected:
			return true
		}
	}
	return false
}

// viewOutputButton is the card's View output button.
func viewOutputButton(ts session.TurnState, o RenderOptions) Button {
	return Button{ID: ActionViewOutput, Label: "View output", Value: outputValue(o.WorkflowID, ts.Turn, o.MaxButtonValue)}
}
