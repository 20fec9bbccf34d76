package chat

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/session"
)

// RenderOptions shapes RenderTurn's card. Zero fields take the defaults
// named on each.
type RenderOptions struct {
	// WorkflowID goes into approval button values.
	WorkflowID string
	// MaxToolCalls is how many of the latest calls are listed (10); older
	// ones are counted in one line.
	MaxToolCalls int
	// MaxOutputCalls is how many of the latest listed calls show their
	// output (3).
	MaxOutputCalls int
	// MaxOutputLines and MaxOutputChars bound each output tail (5, 300).
	MaxOutputLines, MaxOutputChars int
	// MaxCommandChars bounds a command's one-line summary (80).
	MaxCommandChars int
	// MaxButtonValue bounds approval button values (0: no limit).
	MaxButtonValue int
	// MaxChars bounds the card's total text (3500); outputs, then the
	// oldest calls, are dropped to fit.
	MaxChars int
	// Mention renders a user ("@name" if nil).
	Mention func(User) string
	// Approvers says who may decide a pending approval ("" leaves it out).
	Approvers string
	// MaxApprovalChars bounds the pending call's commands shown on the
	// card, measured with MeasureCode (2500; negative: no bound, the
	// terminal shows everything). Past it the card says so and carries
	// the commands as an Attachment instead: a command is never cut.
	MaxApprovalChars int
	// MaxApprovalCommands is how many commands of one call the card shows
	// inline, one code block each (10); more go to the attachment.
	MaxApprovalCommands int
	// MeasureCode is the platform's length of text inside a code block,
	// after its own escaping (runes if nil).
	MeasureCode func(string) int
	// Prices turn the turn's tokens into a cost in the footer (zero:
	// tokens only).
	Prices session.Prices
	// FormatTime, when set, writes moments for the platform (each reader's
	// local time); nil writes UTC.
	FormatTime func(time.Time) string
	// Now, when set, shows how long running commands have run (in steps
	// of ElapsedStep, so a card changes only that often).
	Now time.Time
	// ViewOutput adds the View output button (ActionViewOutput) once a
	// call of the turn finished, for platforms that answer it (see
	// OutputShower).
	ViewOutput bool
}

// ElapsedStep is the granularity of a running command's elapsed time on
// its card: a long command's card is edited about this often, well within
// every platform's edit budget.
const ElapsedStep = 15 * time.Second

func (o RenderOptions) withDefaults() RenderOptions {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	def(&o.MaxToolCalls, 10)
	def(&o.MaxOutputCalls, 3)
	def(&o.MaxOutputLines, 5)
	def(&o.MaxOutputChars, 300)
	def(&o.MaxCommandChars, 80)
	def(&o.MaxChars, 3500)
	if o.MaxApprovalChars == 0 {
		o.MaxApprovalChars = 2500
	}
	def(&o.MaxApprovalCommands, 10)
	if o.MeasureCode == nil {
		o.MeasureCode = func(s string) int { return len([]rune(s)) }
	}
	if o.Mention == nil {
		o.Mention = func(u User) string { return mention(nil, u) }
	}
	return o
}

// RenderTurn renders a turn as a status card: a header with the turn's
// state, each tool call (status icon, one-line command, duration, exit
// code, decision, the tail of its output), the pending approval with
// buttons, the error, notices, and a footer. It is a pure function of its
// arguments, and the card stays within opts.MaxChars. Card text is
// Markdown: **bold**, _italic_, `code`; Code blocks hold raw text.
//
// Everything that comes from the agent, its commands or the model is
// neutralised (chat/internal/safetext): controls, escape sequences and
// bidirectional overrides show as visible escapes. The pending call's
// commands are shown complete, each in its own code block, or, when they
// do not fit the card, replaced by a notice naming their length with the
// full text in Card.Attachments; they are never cut to make a card fit.
func RenderTurn(ts session.TurnState, opts RenderOptions) Card {
	o := opts.withDefaults()
	listed := min(len(ts.ToolCalls), o.MaxToolCalls)
	outputs := o.MaxOutputCalls
	attach := false
	for {
		c := renderTurn(ts, o, listed, outputs, attach)
		switch {
		case cardLen(c) <= o.MaxChars:
			return c
		case outputs > 0:
			outputs--
		case listed > 1:
			listed-- // the oldest listed call joins the "earlier" count
		case !attach && o.MaxApprovalChars >= 0 && hasApproval(ts):
			// The commands alone overflow the card: attach them instead,
			// and start the fitting again with the room that frees.
			attach = true
			listed, outputs = min(len(ts.ToolCalls), o.MaxToolCalls), o.MaxOutputCalls
		default:
			return clampCard(c, o.MaxChars)
		}
	}
}

func hasApproval(ts session.TurnState) bool {
	return ts.Pending != nil && ts.Status == session.StatusAwaitingApproval
}

// TurnCardKey is the Card.Key of ts's turn's status card: the turn and
// when it started, so a turn number that comes again in the thread (after
// a rewind) names another card.
func TurnCardKey(ts session.TurnState) string {
	if ts.StartedAt.IsZero() {
		return fmt.Sprintf("t%d", ts.Turn)
	}
	return fmt.Sprintf("t%d-%d", ts.Turn, ts.StartedAt.UnixMilli())
}

func renderTurn(ts session.TurnState, o RenderOptions, listed, outputs int, attach bool) Card {
	card := Card{Title: turnTitle(ts), Key: TurnCardKey(ts)}
	add := func(b Block) { card.Blocks = append(card.Blocks, b) }

	shown := ts.ToolCalls[len(ts.ToolCalls)-listed:]
	if earlier := len(ts.ToolCalls) - len(shown); earlier > 0 {
		add(Block{Kind: BlockContext, Text: fmt.Sprintf("+%d earlier tool %s", earlier, plural(earlier, "call", "calls"))})
	}
	for i, c := range shown {
		if p := ts.Pending; p != nil && ts.Status == session.StatusAwaitingApproval && c.CallID == p.CallID {
			continue // the approval below shows its commands, once
		}
		add(Block{Kind: BlockText, Text: callLine(c, o)})
		if i >= len(shown)-outputs && c.Output != "" && c.Status != session.CallPending && c.Status != session.CallAwaitingApproval {
			add(Block{Kind: BlockCode, Text: outputTail(c.Output, o.MaxOutputLines, o.MaxOutputChars)})
		}
	}

	if p := ts.Pending; p != nil && ts.Status == session.StatusAwaitingApproval {
		add(Block{Kind: BlockDivider})
		head := "**Approval needed** before this runs"
		if p.Reason != "" {
			head += ": " + safetext.Line(p.Reason) + "."
		}
		add(Block{Kind: BlockText, Text: head})
		cmds := pendingCommands(ts)
		if !attach && !fitsInline(cmds, o) {
			attach = true
		}
		if attach {
			a := commandAttachment(p.CallID, cmds)
			card.Attachments = append(card.Attachments, a)
			add(Block{Kind: BlockText, Text: longNotice(cmds, a.Name), Keep: true})
		} else {
			for i, cmd := range cmds {
				if len(cmds) > 1 {
					add(Block{Kind: BlockText, Text: fmt.Sprintf("**Command %d of %d:**", i+1, len(cmds))})
				}
				add(Block{Kind: BlockCode, Text: safetext.Text(cmd), Keep: true})
			}
		}
		var small []string
		if o.Approvers != "" {
			small = append(small, "Can approve: "+o.Approvers)
		}
		if !p.ExpiresAt.IsZero() {
			small = append(small, "Expires "+expiry(p, o.FormatTime))
		}
		if len(small) > 0 {
			add(Block{Kind: BlockContext, Text: strings.Join(small, " · ")})
		}
		value, err := EncodeApprovalCompact(o.WorkflowID, p.CallID, o.MaxButtonValue)
		if err != nil {
			value = EncodeApproval(o.WorkflowID, p.CallID)
		}
		add(Block{Kind: BlockActions, Buttons: []Button{
			{ID: ActionApprove, Label: "Approve", Style: StylePrimary, Value: value},
			{ID: ActionApproveAlways, Label: "Approve always", Value: value},
			{ID: ActionReject, Label: "Reject", Style: StyleDanger, Value: value},
		}})
	}

	var controls []Button
	if ts.Status.Active() && !ts.Stopped && !ts.Destroyed {
		value := o.WorkflowID
		if o.MaxButtonValue > 0 && len(ActionStop)+1+len(value) > o.MaxButtonValue {
			value = "" // the click's own thread names the session
		}
		controls = append(controls, Button{ID: ActionStop, Label: "Stop", Value: value})
	}
	if o.ViewOutput && finishedCall(ts) {
		controls = append(controls, viewOutputButton(ts, o))
	}
	if len(controls) > 0 {
		add(Block{Kind: BlockActions, Buttons: controls})
	}
	if ts.Status == session.StatusFailed && ts.Error != "" {
		add(Block{Kind: BlockText, Text: "❌ " + safetext.Text(ts.Error)})
	}
	if n := len(ts.Notices); n > 0 {
		notes := ts.Notices[max(0, n-5):]
		lines := make([]string, len(notes))
		for i, s := range notes {
			lines[i] = "ℹ️ " + truncate(safetext.Text(s), 300)
		}
		add(Block{Kind: BlockContext, Text: strings.Join(lines, "\n")})
	}
	add(Block{Kind: BlockContext, Text: footer(ts, o.Prices)})
	return card
}

// ApprovalNoticeText is the new message that tells the people who may
// approve (approvers, as the card names them) that a command of turn waits
// for them: the card's edit that shows the buttons notifies nobody.
func ApprovalNoticeText(turn int, approvers string) string {
	return fmt.Sprintf("✋ A command of turn %d waits for approval: %s. The buttons are on the card above.", turn, approvers)
}

// turnTitle is the card's header: the turn's state in a word or two.
func turnTitle(ts session.TurnState) string {
	switch {
	case ts.Stopped && ts.Status.Active():
		return "⏹️ Stopping…"
	case ts.Stopped:
		if by, ok := strings.CutPrefix(strings.TrimSuffix(ts.FinalText, "."), "Stopped by "); ok && by != "" {
			return "⏹️ Stopped by " + safetext.Line(by)
		}
		return "⏹️ Stopped"
	case ts.Status == session.StatusFailed:
		return "❌ Failed"
	case ts.Status == session.StatusComplete:
		return "✅ Done"
	case ts.Status == session.StatusAwaitingApproval:
		return "✋ Waiting for approval"
	case ts.Status == session.StatusThinking:
		for _, c := range ts.ToolCalls {
			if c.Status == session.CallRunning {
				return "⚙️ Running"
			}
		}
		return "💭 Thinking"
	case ts.Destroyed:
		return "🗑️ Session destroyed"
	}
	return "💤 Idle"
}

func footer(ts session.TurnState, prices session.Prices) string {
	parts := []string{fmt.Sprintf("Turn %d", ts.Turn)}
	if ts.Backend != "" {
		b := ts.Backend
		if ts.PendingBackend != "" && ts.PendingBackend != ts.Backend {
			b += " → " + ts.PendingBackend + " after this turn"
		}
		parts = append(parts, b)
	}
	if n := len(ts.ToolCalls); n > 0 {
		parts = append(parts, fmt.Sprintf("%d tool %s", n, plural(n, "call", "calls")))
	}
	if !ts.StartedAt.IsZero() && !ts.EndedAt.IsZero() {
		parts = append(parts, fmtDuration(ts.EndedAt.Sub(ts.StartedAt)))
	}
	if u := ts.Usage; u.Calls > 0 {
		parts = append(parts, tokensText(u, prices))
	}
	if ts.Queued > 0 {
		parts = append(parts, fmt.Sprintf("%d %s queued for the next turn", ts.Queued, plural(ts.Queued, "message", "messages")))
	}
	if ts.Paused {
		parts = append(parts, "paused")
	}
	return strings.Join(parts, " · ")
}

var callIcons = map[session.CallStatus]string{
	session.CallPending:          "🕓",
	session.CallAwaitingApproval: "⏸️",
	session.CallRunning:          "⏳",
	session.CallCompleted:        "✅",
	session.CallRejected:         "🚫",
	session.CallFailed:           "❌",
}

// callLine is one tool call: icon, command, duration, exit code, and the
// decision or error on a second line.
func callLine(c session.ToolCallState, o RenderOptions) string {
	icon := callIcons[c.Status]
	if icon == "" {
		icon = "•"
	}
	if c.Status == session.CallCompleted && c.ExitCode != nil && *c.ExitCode != 0 {
		icon = "⚠️"
	}
	line := icon + " `" + commandLine(c, o.MaxCommandChars) + "`"
	if c.Duration > 0 {
		line += " · " + fmtDuration(c.Duration)
	} else if c.Status == session.CallRunning && !o.Now.IsZero() && !c.StartedAt.IsZero() {
		if d := o.Now.Sub(c.StartedAt).Truncate(ElapsedStep); d >= ElapsedStep {
			line += " · running " + fmtDuration(d) + "+"
		}
	}
	if c.ExitCode != nil {
		line += fmt.Sprintf(" · exit %d", *c.ExitCode)
	}
	if d := c.Decision; d != nil {
		line += "\n_" + decisionText(*d, o.Mention) + "_"
	}
	if c.Error != "" {
		line += "\n_" + truncate(safetext.Line(c.Error), 200) + "_"
	}
	return line
}

// decisionText describes a recorded approval decision.
func decisionText(d session.DecisionRecord, mention func(User) string) string {
	switch {
	case d.Expired:
		return "approval expired; not run"
	case d.Auto:
		return "auto-approved (approved always earlier)"
	case d.Decision == session.DecisionApproveAlways:
		return "approved always by " + mention(d.User)
	case d.Decision == session.DecisionApprove:
		return "approved by " + mention(d.User)
	case d.Decision == session.DecisionReject && d.Reason != "":
		return "rejected by " + mention(d.User) + ": " + truncate(safetext.Line(d.Reason), 200)
	case d.Decision == session.DecisionReject:
		return "rejected by " + mention(d.User)
	}
	return string(d.Decision)
}

// commandLine is a call's command on one line, at most n runes.
func commandLine(c session.ToolCallState, n int) string {
	cmds := c.Commands
	if len(cmds) == 0 {
		var args session.ShellArgs
		if json.Unmarshal([]byte(c.Arguments), &args) == nil {
			cmds = args.Commands
		}
	}
	text := strings.Join(cmds, "; ")
	if text == "" {
		text = strings.TrimSpace(c.Name + " " + c.Arguments)
	}
	first, rest, multi := strings.Cut(text, "\n")
	if multi {
		first += fmt.Sprintf(" [+%d lines]", strings.Count(rest, "\n")+1)
	}
	return truncate(strings.ReplaceAll(safetext.Line(first), "`", "'"), n)
}

// outputTail is the last lines of a call's output within the limits.
func outputTail(out string, lines, chars int) string {
	out = strings.TrimRight(safetext.Text(out), "\n")
	all := strings.Split(out, "\n")
	cut := len(all) > lines
	if cut {
		all = all[len(all)-lines:]
	}
	s := strings.Join(all, "\n")
	if r := []rune(s); len(r) > chars {
		s = string(r[len(r)-chars:])
		cut = true
	}
	if cut {
		s = "…" + s
	}
	return s
}

// pendingCommands are the commands of the pending call, one entry each:
// from its tool call state (the workflow joins them with newlines in
// Pending.Command, which would blur where one ends and the next begins),
// else from the call's arguments, else Pending.Command as one.
func pendingCommands(ts session.TurnState) []string {
	p := ts.Pending
	for _, c := range ts.ToolCalls {
		if c.CallID != p.CallID {
			continue
		}
		if len(c.Commands) > 0 {
			return c.Commands
		}
		var args session.ShellArgs
		if json.Unmarshal([]byte(c.Arguments), &args) == nil && len(args.Commands) > 0 {
			return args.Commands
		}
	}
	return []string{p.Command}
}

// fitsInline reports whether cmds can be shown on the card in full.
func fitsInline(cmds []string, o RenderOptions) bool {
	if o.MaxApprovalChars < 0 {
		return true
	}
	if len(cmds) > o.MaxApprovalCommands {
		return false
	}
	n := 0
	for _, c := range cmds {
		n += o.MeasureCode(safetext.Text(c))
	}
	return n <= o.MaxApprovalChars
}

// commandsLen is the commands' length in characters, as the notice says.
func commandsLen(cmds []string) int {
	n := 0
	for _, c := range cmds {
		n += len([]rune(c))
	}
	return n
}

// longNotice replaces commands too long for the card.
func longNotice(cmds []string, file string) string {
	if len(cmds) > 1 {
		return fmt.Sprintf("📎 Long command (%d commands, %d characters): see the attached file `%s`; it holds every command in full.",
			len(cmds), commandsLen(cmds), file)
	}
	return fmt.Sprintf("📎 Long command (%d characters): see the attached file `%s`; it holds the command in full.", commandsLen(cmds), file)
}

// commandAttachment is the file that carries a pending call's commands in
// full, neutralised like the card, numbered when there are several.
func commandAttachment(callID string, cmds []string) Attachment {
	var b strings.Builder
	for i, c := range cmds {
		if len(cmds) > 1 {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "# command %d of %d (%d characters)\n", i+1, len(cmds), len([]rune(c)))
		}
		b.WriteString(safetext.Text(c))
		b.WriteString("\n")
	}
	return Attachment{
		Name:    "command-" + callDigest(callID)[:8] + ".txt",
		Title:   fmt.Sprintf("Command awaiting approval (%d characters)", commandsLen(cmds)),
		Content: b.String(),
	}
}

// expiry formats when a pending approval expires, in UTC.
func expiry(p *session.PendingApproval, format func(time.Time) string) string {
	if format != nil {
		return "at " + format(p.ExpiresAt)
	}
	t := p.ExpiresAt.UTC()
	if p.AskedAt.IsZero() || t.Sub(p.AskedAt) > 12*time.Hour {
		return "at " + t.Format("Jan 2 15:04 UTC")
	}
	return "at " + t.Format("15:04 UTC")
}

// fmtDuration is a compact duration: 0.4s, 12s, 2m05s, 1h02m.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// cardLen counts a card's text in runes.
func cardLen(c Card) int {
	n := len([]rune(c.Title))
	for _, b := range c.Blocks {
		n += len([]rune(b.Text))
		for _, f := range b.Fields {
			n += len([]rune(f.Label)) + len([]rune(f.Value))
		}
		for _, btn := range b.Buttons {
			n += len([]rune(btn.Label))
		}
	}
	return n
}

// clampCard shortens block texts, longest first, until the card fits. A
// Keep block (a command awaiting approval) is never shortened.
func clampCard(c Card, limit int) Card {
	for cardLen(c) > limit {
		longest := -1
		for i, b := range c.Blocks {
			if b.Keep {
				continue
			}
			if longest < 0 || len([]rune(b.Text)) > len([]rune(c.Blocks[longest].Text)) {
				longest = i
			}
		}
		if longest < 0 {
			return c
		}
		r := []rune(c.Blocks[longest].Text)
		if len(r) <= 20 {
			return c
		}
		c.Blocks[longest].Text = truncate(string(r), max(20, len(r)-(cardLen(c)-limit)))
	}
	return c
}

// tokensText is "12,345 tokens" or, with prices, "12,345 tokens ($0.04)".
func tokensText(u session.Usage, prices session.Prices) string {
	s := thousands(u.Total()) + " tokens"
	if cost, ok := u.Cost(prices); ok {
		s += " (" + costText(cost) + ")"
	}
	return s
}

// costText writes USD with the precision small amounts need.
func costText(usd float64) string {
	if usd < 0.01 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}
