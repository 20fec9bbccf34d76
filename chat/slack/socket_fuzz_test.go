package slack_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// FuzzSlackSocket pushes Socket Mode envelopes (events_api and
// interactive) whose payload is fuzzed, over the fake's websocket, through
// slack-go's socketmode client into the adapter (the default mode in
// production). Whatever the payload, the adapter acks it or reports it
// unreadable, does not panic or leak goroutines, changes nothing for an
// unreadable one, and otherwise does only what FuzzSlackEvents and
// FuzzSlackInteraction allow.
func FuzzSlackSocket(f *testing.F) {
	h := newFuzzEnv(f, slack.ModeSocket)
	fake := h.env.Fake
	root, card := seedThread(f, h)
	for _, m := range []fakeslack.UserMessage{
		{Text: fake.Mention() + " run the tests"},
		{Text: "reply in the thread", ThreadTS: root},
		{Text: "dm", ChannelType: "im", Channel: "D0001"},
	} {
		for _, p := range fake.Say(m).Payloads {
			f.Add(uint8(0), []byte(p))
		}
	}
	_, stop := fake.EventCallback(map[string]any{"type": "agent_session_stopped", "channel": "C0001", "thread_ts": root, "user": "U0001", "event_ts": fake.NewTS()})
	f.Add(uint8(0), []byte(stop))
	for _, id := range []string{chat.ActionApprove, chat.ActionReject} {
		p, err := fake.ClickPayload(fakeslack.Click{Channel: "C0001", MessageTS: card, ActionID: id})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(1), []byte(p))
	}
	if p, err := fake.ShortcutPayload(slack.ForkShortcut, "U0001", "C0001", root); err == nil {
		f.Add(uint8(1), []byte(p))
	}
	for _, s := range []string{`null`, `{}`, `[]`, `"x"`, `{"type":"event_callback","event":null}`, `{"type":"block_actions","actions":[{}]}`} {
		f.Add(uint8(0), []byte(s))
		f.Add(uint8(1), []byte(s))
	}
	f.Fuzz(func(t *testing.T, kind uint8, payload []byte) {
		if !json.Valid(payload) {
			return // it travels inside the envelope's JSON: Slack cannot send it
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		before, was, bad := runtime.NumGoroutine(), h.state(), h.log.unreadables()
		send := fake.SendEvent
		if kind%2 == 1 {
			send = fake.SendInteraction
		}
		id, err := send(ctx, payload)
		if err != nil {
			t.Fatal(err)
		}
		// The client acks what it reads and reports what it cannot.
		unreadable := false
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			if h.log.unreadables() > bad {
				unreadable = true
				break
			}
			if fake.Snapshot().Acked(id) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("envelope %s neither acked nor reported unreadable", id)
			}
		}
		if err := h.env.Adapter.WaitIdle(ctx); err != nil {
			t.Fatalf("the adapter did not finish with the envelope: %v", err)
		}
		if p := h.log.take(); len(p) > 0 {
			t.Fatalf("the adapter panicked handling the envelope: %s", strings.Join(p, "\n"))
		}
		now := h.state()
		checkGone(t, before)
		switch {
		case unreadable:
			if now != was {
				t.Fatalf("an unreadable envelope changed state: %+v → %+v", was, now)
			}
		case kind%2 == 0:
			checkEvent(t, h, payload, was, now)
		default:
			checkInteraction(t, h, payload, was, now)
		}
	})
}
