package chattest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
)

// waitTimeout bounds WaitFor: generous, because it waits for events on
// other goroutines, not for time.
const waitTimeout = 30 * time.Second

// Core is a recording chat.Handler for adapter tests: it records what the
// adapter hands the core and, through the On* hooks, acts like the core
// does (posts cards, answers commands) with the adapter as its Poster.
// Without OnCommand a command is answered "ran /<name>". The zero value is
// ready to use; it is safe for concurrent use, and hooks run without its
// lock held.
type Core struct {
	OnMessage func(ctx context.Context, p chat.Poster, m chat.Message) error
	OnCommand func(ctx context.Context, p chat.Poster, c CommandCall) (chat.Reply, error)
	OnAction  func(ctx context.Context, p chat.Poster, a chat.Action) error

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every call
	rec     Record
}

var _ chat.Handler = (*Core)(nil)

// Record is what a Core was handed, oldest first.
type Record struct {
	Messages []chat.Message
	Commands []CommandCall
	Actions  []chat.Action
	Resumed  []string // platforms
}

// CommandCall is one HandleCommand call.
type CommandCall struct {
	Thread chat.Thread
	User   chat.User
	Cmd    chat.Command
}

func (c *Core) note(f func(r *Record)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.rec)
	if c.changed != nil {
		close(c.changed)
	}
	c.changed = make(chan struct{})
}

// HandleMessage implements chat.Handler.
func (c *Core) HandleMessage(ctx context.Context, p chat.Poster, m chat.Message) error {
	c.note(func(r *Record) { r.Messages = append(r.Messages, m) })
	if c.OnMessage != nil {
		return c.OnMessage(ctx, p, m)
	}
	return nil
}

// HandleCommand implements chat.Handler.
func (c *Core) HandleCommand(ctx context.Context, p chat.Poster, th chat.Thread, u chat.User, cmd chat.Command) (chat.Reply, error) {
	call := CommandCall{Thread: th, User: u, Cmd: cmd}
	c.note(func(r *Record) { r.Commands = append(r.Commands, call) })
	if c.OnCommand != nil {
		return c.OnCommand(ctx, p, call)
	}
	return chat.Reply{Text: "ran /" + cmd.Name}, nil
}

// HandleAction implements chat.Handler.
func (c *Core) HandleAction(ctx context.Context, p chat.Poster, a chat.Action) error {
	c.note(func(r *Record) { r.Actions = append(r.Actions, a) })
	if c.OnAction != nil {
		return c.OnAction(ctx, p, a)
	}
	return nil
}

// Resume implements chat.Handler.
func (c *Core) Resume(_ context.Context, _ chat.Poster, platform string) error {
	c.note(func(r *Record) { r.Resumed = append(r.Resumed, platform) })
	return nil
}

// Record returns a copy of what the core was handed so far.
func (c *Core) Record() Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

func (c *Core) snapshotLocked() Record {
	return Record{
		Messages: slices.Clone(c.rec.Messages),
		Commands: slices.Clone(c.rec.Commands),
		Actions:  slices.Clone(c.rec.Actions),
		Resumed:  slices.Clone(c.rec.Resumed),
	}
}

// WaitFor blocks until cond holds for what the core was handed, and
// returns that record; it fails the test after a generous deadline.
func (c *Core) WaitFor(t testing.TB, what string, cond func(Record) bool) Record {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		c.mu.Lock()
		r := c.snapshotLocked()
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		ch := c.changed
		c.mu.Unlock()
		if cond(r) {
			return r
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("core never saw %s; it saw %d messages, %d commands, %d actions", what, len(r.Messages), len(r.Commands), len(r.Actions))
		}
	}
}
