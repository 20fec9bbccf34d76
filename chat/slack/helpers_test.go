package slack_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// newRecCore is the recording core of these tests: chattest.Core, whose
// commands answer "ok: <name>" privately unless a test sets OnCommand.
func newRecCore() *chattest.Core {
	return &chattest.Core{OnCommand: func(_ context.Context, _ chat.Poster, c chattest.CommandCall) (chat.Reply, error) {
		return chat.Reply{Text: "ok: " + c.Cmd.Name, Ephemeral: true}, nil
	}}
}

// findingCore also implements slack.SessionFinder.
type findingCore struct {
	*chattest.Core
	sessions map[string]bool // thread ts → session
	asked    atomic.Int32
}

var (
	_ slack.SessionFinder = (*findingCore)(nil)
	// The real core plugs in as is.
	_ chat.Handler = (*chat.Core)(nil)
)

func (c *findingCore) HasSession(_ context.Context, th chat.Thread) (bool, error) {
	c.asked.Add(1)
	return c.sessions[th.Thread], nil
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
