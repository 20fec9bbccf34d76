package slack_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// viewingCore answers View output clicks with a fixed call.
type viewingCore struct {
	*chattest.Core
	asked atomic.Int32
}

func (c *viewingCore) ViewOutput(context.Context, chat.Action) chat.OutputView {
	c.asked.Add(1)
	return chat.OutputView{Call: &chat.CallOutput{Turn: 1, CallID: "c1", Index: 1, Of: 1, Commands: []string{"ls"}, Output: "README.md\n", HasOutput: true}}
}

// A View output click whose trigger has expired by the time the modal
// could open (Slack allows 3 s) is answered privately, and the session is
// not read for nothing.
func TestViewOutputWhenTheModalCannotOpen(t *testing.T) {
	ctx := testCtx(t)
	env := slacktest.New(t, slacktest.Options{Fake: fakeslack.Options{TriggerTTL: time.Nanosecond}})
	core := &viewingCore{Core: newRecCore()}
	core.OnMessage = func(ctx context.Context, p chat.Poster, m chat.Message) error {
		_, err := p.Post(ctx, m.Thread, chat.Card{Title: "✅ Done", Blocks: []chat.Block{{Kind: chat.BlockActions, Buttons: []chat.Button{
			{ID: chat.ActionViewOutput, Label: "View output", Value: "2.1"}}}}})
		return err
	}
	env.Run(core)
	if !env.Adapter.ShowsOutput() {
		t.Fatal("an adapter whose core answers View output must say it shows output")
	}
	sent := mustSend(t, ctx, env, fakeslack.UserMessage{Text: env.Fake.Mention() + " go"})
	snap := waitFake(t, ctx, env, "the card", func(s fakeslack.Snapshot) bool { return len(s.BotMessages("C0001", sent.Message.TS)) == 1 })
	card := snap.BotMessages("C0001", sent.Message.TS)[0].TS
	if _, err := env.Fake.ClickButton(ctx, fakeslack.Click{User: "U0001", Channel: "C0001", MessageTS: card, ActionID: chat.ActionViewOutput}); err != nil {
		t.Fatal(err)
	}
	snap = waitFake(t, ctx, env, "the private answer", func(s fakeslack.Snapshot) bool { return len(s.CallsTo("chat.postEphemeral")) == 1 })
	if text := snap.CallsTo("chat.postEphemeral")[0].Form.Get("text"); !strings.Contains(text, "could not open the output window") {
		t.Fatalf("ephemeral = %q", text)
	}
	if calls := snap.AllCallsTo("views.open"); len(calls) != 1 || calls[0].Error != "expired_trigger_id" {
		t.Fatalf("views.open calls = %+v", calls)
	}
	if n := core.asked.Load(); n != 0 {
		t.Fatalf("the session was read %d times for a modal that never opened", n)
	}
}
