package console

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/safetext"
)

// console is the chat.Poster of the terminal. Cards are printed as text;
// an edit prints only the lines that changed, so a running turn reads as a
// log rather than a redrawn screen. It is safe for concurrent use (watchers
// of several sessions print at once).
type console struct {
	mu        sync.Mutex
	out       io.Writer
	current   chat.Thread
	n         int
	cards     map[string][]line // ref → lines last printed
	approvals map[string]string // thread ID → value of its pending approval
	// changed is closed and replaced whenever approvals changes, so a
	// waiter can select on it (see approvalChanged).
	changed chan struct{}
	// answered holds approval values already answered here: the card
	// still shows them until the watcher's next edit.
	answered map[string]bool
}

var (
	_ chat.Poster        = (*console)(nil)
	_ chat.ThreadStarter = (*console)(nil)
	_ chat.Mentioner     = (*console)(nil)
	_ chat.ThreadLinker  = (*console)(nil)
	_ chat.Deleter       = (*console)(nil)
)

func newConsole(out io.Writer) *console {
	return &console{
		out:       out,
		current:   chat.Thread{Platform: Platform, Channel: "local", Thread: "default"},
		cards:     map[string][]line{},
		approvals: map[string]string{},
		changed:   make(chan struct{}),
		answered:  map[string]bool{},
	}
}

// approvalChanged returns a channel closed at the next change of pending
// approvals.
func (c *console) approvalChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// pendingApproval reports whether th waits for an approval not answered
// here yet.
func (c *console) pendingApproval(th chat.Thread) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.approvals[th.ID()]
	return ok && !c.answered[v]
}

// noteAnswered records that the approval with value v was answered.
func (c *console) noteAnswered(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answered[v] = true
}

func (c *console) thread() chat.Thread {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current
}

func (c *console) switchTo(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current.Thread = name
}

func (c *console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, format, args...)
}

// write prints lines for th, prefixed with the session name when th is not
// the current session. c.mu must be held.
func (c *console) write(th chat.Thread, lines []string) {
	prefix := ""
	if th != c.current {
		prefix = "[" + th.Thread + "] "
	}
	for _, l := range lines {
		fmt.Fprintln(c.out, safe(prefix+l))
	}
}

// line is one printed line of a card; footer lines are left out of edits
// unless the header changed, so progress does not repeat them.
type line struct {
	text   string
	footer bool
}

// cardLines renders a card for the terminal.
func cardLines(card chat.Card) []line {
	out := []line{{text: "── " + plain(card.Title) + " ──"}}
	last := len(card.Blocks) - 1
	for i, b := range card.Blocks {
		switch b.Kind {
		case chat.BlockText:
			for _, s := range strings.Split(plain(b.Text), "\n") {
				out = append(out, line{text: s})
			}
		case chat.BlockContext:
			for _, s := range strings.Split(plain(b.Text), "\n") {
				out = append(out, line{text: "  " + s, footer: i == last})
			}
		case chat.BlockCode:
			for _, s := range strings.Split(safe(b.Text), "\n") {
				out = append(out, line{text: "    │ " + s})
			}
		case chat.BlockFields:
			for _, f := range b.Fields {
				out = append(out, line{text: plain(f.Label) + ": " + plain(f.Value)})
			}
		case chat.BlockActions:
			if approvalValue(b) != "" {
				out = append(out, line{text: "Approve? type a (approve once), A (approve always) or r [reason] (reject)"})
				continue
			}
			var labels []string
			for _, btn := range b.Buttons {
				labels = append(labels, "["+plain(btn.Label)+"]")
			}
			out = append(out, line{text: strings.Join(labels, " ")})
		case chat.BlockDivider:
			out = append(out, line{text: "  ·"})
		}
	}
	return out
}

// plain drops Markdown emphasis that a terminal would show literally, and
// neutralises what the terminal would interpret (see safe).
func plain(s string) string { return strings.ReplaceAll(safe(s), "**", "") }

// safe shows controls, escape sequences and bidi overrides as visible
// escapes (\x1b, \r, \u202e): nothing the agent or the model writes may
// move the cursor, clear the screen, overprint a command or reorder it.
func safe(s string) string { return safetext.Text(s) }

// approvalValue is the value of an approval button in b, if any.
func approvalValue(b chat.Block) string {
	for _, btn := range b.Buttons {
		if btn.ID == chat.ActionApprove {
			return btn.Value
		}
	}
	return ""
}

// noteApproval remembers whether card asks for an approval in th. c.mu
// must be held.
func (c *console) noteApproval(th chat.Thread, card chat.Card) {
	old, had := c.approvals[th.ID()]
	v := ""
	for _, b := range card.Blocks {
		if v = approvalValue(b); v != "" {
			break
		}
	}
	if v != "" {
		c.approvals[th.ID()] = v
	} else {
		delete(c.approvals, th.ID())
	}
	if had != (v != "") || old != v {
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// Post prints a card in full.
func (c *console) Post(_ context.Context, th chat.Thread, card chat.Card) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	ref := fmt.Sprintf("card-%d", c.n)
	lines := cardLines(card)
	c.write(th, texts(lines))
	c.cards[ref] = lines
	c.noteApproval(th, card)
	return ref, nil
}

// Edit prints the lines of card that were not on screen before: a new or
// changed tool call, a new header, the approval prompt. A card it never
// printed (after a restart) is printed in full.
func (c *console) Edit(_ context.Context, th chat.Thread, ref string, card chat.Card) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	lines := cardLines(card)
	old, ok := c.cards[ref]
	c.cards[ref] = lines
	c.noteApproval(th, card)
	if !ok {
		c.write(th, texts(lines))
		return nil
	}
	seen := map[string]int{}
	for _, l := range old {
		seen[l.text]++
	}
	headerChanged := lines[0].text != old[0].text
	var fresh []string
	for _, l := range lines {
		if seen[l.text] > 0 {
			seen[l.text]--
			continue
		}
		if l.footer && !headerChanged {
			continue
		}
		fresh = append(fresh, l.text)
	}
	c.write(th, fresh)
	return nil
}

// Delete implements chat.Deleter for the terminal, which cannot take back
// lines it printed: it forgets the card (a later Edit of ref prints it
// anew) and prints one line saying that the card printed as ref is void, so
// the reader does not take its calls for the turn's. The core deletes a
// status card when another replica's card was recorded for the turn; a
// terminal runs one bot, so in practice only a restart racing its own
// record gets here.
func (c *console) Delete(_ context.Context, th chat.Thread, ref string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cards[ref]; !ok {
		return nil // never printed here: nothing to take back
	}
	delete(c.cards, ref)
	c.write(th, []string{"── (the status card above was a second copy; this turn goes on in its other card) ──"})
	return nil
}

func texts(lines []line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out
}

// PostText prints an answer.
func (c *console) PostText(_ context.Context, th chat.Thread, markdown string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	c.write(th, strings.Split(strings.TrimRight(safe(markdown), "\n"), "\n"))
	fmt.Fprintln(c.out)
	return fmt.Sprintf("text-%d", c.n), nil
}

// StartThread opens a new console session for a fork, named after the
// source with a random suffix ("default-fork-3fa9c2"): console sessions
// outlive the process, so a counter would collide with an earlier fork.
func (c *console) StartThread(_ context.Context, from chat.Thread, title string) (chat.Thread, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	th := from
	th.Thread = from.Thread + "-fork-" + strings.TrimPrefix(newEventID(), "console-")[:6]
	fmt.Fprintf(c.out, "Opened session %q for %q; /session %s switches to it.\n", th.Thread, title, th.Thread)
	return th, nil
}

// Mention is "@name".
func (c *console) Mention(u chat.User) string {
	if u.Name != "" {
		return "@" + u.Name
	}
	return "@" + u.ID
}

// ThreadLink names a console session.
func (c *console) ThreadLink(th chat.Thread) string { return "session " + th.Thread }
