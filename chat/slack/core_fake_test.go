package slack_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// recCore is a recording stand-in for chat.Core: it records what the
// adapter hands it and, through the hooks, acts like the core does (posts
// cards, answers commands) using the adapter as its chat.Poster.
type recCore struct {
	mu       sync.Mutex
	changed  chan struct{}
	messages []chat.Message
	actions  []chat.Action
	commands []recCommand
	resumed  []string

	onMessage func(ctx context.Context, p chat.Poster, m chat.Message) error
	onAction  func(ctx context.Context, p chat.Poster, a chat.Action) error
	onCommand func(ctx context.Context, p chat.Poster, th chat.Thread, u chat.User, cmd chat.Command) (chat.Reply, error)
}

type recCommand struct {
	Thread chat.Thread
	User   chat.User
	Cmd    chat.Command
}

var (
	_ slack.Core = (*recCore)(nil)
	// The real core plugs in as is.
	_ slack.Core    = (*chat.Core)(nil)
	_ slack.Resumer = (*chat.Core)(nil)
)

func newRecCore() *recCore { return &recCore{changed: make(chan struct{})} }

func (c *recCore) record(f func()) {
	c.mu.Lock()
	f()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *recCore) HandleMessage(ctx context.Context, p chat.Poster, m chat.Message) error {
	c.record(func() { c.messages = append(c.messages, m) })
	if c.onMessage != nil {
		return c.onMessage(ctx, p, m)
	}
	return nil
}

func (c *recCore) HandleAction(ctx context.Context, p chat.Poster, a chat.Action) error {
	c.record(func() { c.actions = append(c.actions, a) })
	if c.onAction != nil {
		return c.onAction(ctx, p, a)
	}
	return nil
}

func (c *recCore) HandleCommand(ctx context.Context, p chat.Poster, th chat.Thread, u chat.User, cmd chat.Command) (chat.Reply, error) {
	c.record(func() { c.commands = append(c.commands, recCommand{th, u, cmd}) })
	if c.onCommand != nil {
		return c.onCommand(ctx, p, th, u, cmd)
	}
	return chat.Reply{Text: "ok: " + cmd.Name, Ephemeral: true}, nil
}

// resumingCore also implements slack.Resumer.
type resumingCore struct{ *recCore }

func (c resumingCore) Resume(ctx context.Context, p chat.Poster, platform string) error {
	c.record(func() { c.resumed = append(c.resumed, platform) })
	return nil
}

// findingCore also implements slack.SessionFinder.
type findingCore struct {
	*recCore
	sessions map[string]bool // thread ts → session
	asked    *int
}

func (c findingCore) HasSession(ctx context.Context, th chat.Thread) (bool, error) {
	c.record(func() { *c.asked++ })
	return c.sessions[th.Thread], nil
}

type coreState struct {
	Messages []chat.Message
	Actions  []chat.Action
	Commands []recCommand
	Resumed  []string
}

// waitFor blocks until cond holds for the recorded calls.
func (c *recCore) waitFor(t *testing.T, ctx context.Context, what string, cond func(coreState) bool) coreState {
	t.Helper()
	for {
		c.mu.Lock()
		st := coreState{
			Messages: append([]chat.Message(nil), c.messages...),
			Actions:  append([]chat.Action(nil), c.actions...),
			Commands: append([]recCommand(nil), c.commands...),
			Resumed:  append([]string(nil), c.resumed...),
		}
		ch := c.changed
		c.mu.Unlock()
		if cond(st) {
			return st
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("core never saw %s; it saw %d messages, %d actions, %d commands", what, len(st.Messages), len(st.Actions), len(st.Commands))
		}
	}
}

func (c *recCore) state() coreState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return coreState{Messages: append([]chat.Message(nil), c.messages...), Actions: append([]chat.Action(nil), c.actions...),
		Commands: append([]recCommand(nil), c.commands...), Resumed: append([]string(nil), c.resumed...)}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// idle waits until the adapter has handled everything acked so far.
func idle(t *testing.T, ctx context.Context, env *slacktest.Env) {
	t.Helper()
	if err := env.Adapter.WaitIdle(ctx); err != nil {
		t.Fatalf("adapter not idle: %v", err)
	}
}

func waitFake(t *testing.T, ctx context.Context, env *slacktest.Env, what string, cond func(fakeslack.Snapshot) bool) fakeslack.Snapshot {
	t.Helper()
	s, err := env.Fake.WaitFor(ctx, cond)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return s
}

// approvalCard is a status card like the core's, with approval buttons.
func approvalCard(value string) chat.Card {
	return chat.Card{
		Title: "⏸ Waiting for approval",
		Blocks: []chat.Block{
			{Kind: chat.BlockText, Text: "`rm -rf build`"},
			{Kind: chat.BlockActions, Buttons: []chat.Button{
				{ID: chat.ActionApprove, Label: "Approve", Style: chat.StylePrimary, Value: value},
				{ID: chat.ActionApproveAlways, Label: "Approve always", Value: value},
				{ID: chat.ActionReject, Label: "Reject", Style: chat.StyleDanger, Value: value},
			}},
		},
	}
}

func mustSend(t *testing.T, ctx context.Context, env *slacktest.Env, m fakeslack.UserMessage) fakeslack.Sent {
	t.Helper()
	sent, err := env.Fake.SendMessage(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	waitFake(t, ctx, env, fmt.Sprintf("acks of %v", sent.Envelopes), func(s fakeslack.Snapshot) bool { return s.Acked(sent.Envelopes...) })
	return sent
}
