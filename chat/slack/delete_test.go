package slack_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// Delete takes a status card out of the thread with chat.delete (the real
// slack-go client against the fake): the thread no longer lists it and the
// fake keeps it as deleted; a 429 is waited out; a card gone already
// (message_not_found: an earlier delete whose answer was lost) counts as
// deleted; a refusal (cant_delete_message) is returned, for the core to
// make the card a pointer instead.
func TestDeleteTakesTheCardOut(t *testing.T) {
	ctx := testCtx(t)
	env, th := posterEnv(t, slacktest.Options{})
	ref, err := env.Adapter.Post(ctx, th, chat.Card{Title: "⏳ Working"})
	if err != nil {
		t.Fatal(err)
	}
	env.Fake.RateLimit("chat.delete", 1, 1)
	if err := env.Adapter.Delete(ctx, th, ref); err != nil {
		t.Fatalf("delete after a 429: %v", err)
	}
	snap := env.Fake.Snapshot()
	calls := snap.AllCallsTo("chat.delete")
	if len(calls) != 2 || calls[0].Status != 429 || !calls[1].OK() {
		t.Fatalf("chat.delete calls = %+v", calls)
	}
	if got := calls[1].Form; got.Get("channel") != th.Channel || got.Get("ts") != ref {
		t.Errorf("chat.delete form = %v, want channel %s and ts %s", got, th.Channel, ref)
	}
	if gap := calls[1].At.Sub(calls[0].At); gap < time.Second {
		t.Errorf("retried %v after a 429 with Retry-After: 1", gap)
	}
	if _, ok := snap.Message(th.Channel, ref); ok {
		t.Error("the deleted card is still in the thread")
	}
	if d := snap.Deleted[th.Channel]; len(d) != 1 || d[0].TS != ref || !strings.Contains(d[0].Text, "Working") {
		t.Errorf("deleted messages = %+v, want the card", d)
	}

	if err := env.Adapter.Delete(ctx, th, ref); err != nil {
		t.Errorf("deleting a card that is gone already: %v, want done", err)
	}
	env.Fake.InjectFault("chat.delete", 1, fakeslack.Fault{Error: "cant_delete_message"})
	if err := env.Adapter.Delete(ctx, th, th.Thread); err == nil || !strings.Contains(err.Error(), "cant_delete_message") {
		t.Errorf("a refused delete: %v, want cant_delete_message", err)
	}
}
