package fakeslack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// runSocket connects a real socketmode client and forwards its Slack
// requests (events, interactions, commands), acking each immediately.
func runSocket(t *testing.T, s *Server, api *slack.Client) <-chan socketmode.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sm := socketmode.New(api)
	out := make(chan socketmode.Event, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sm.RunContext(ctx)
	}()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-sm.Events:
				switch ev.Type {
				case socketmode.EventTypeEventsAPI, socketmode.EventTypeInteractive, socketmode.EventTypeSlashCommand:
					if ev.Type == socketmode.EventTypeSlashCommand {
						_ = sm.Ack(*ev.Request, map[string]any{"text": "ok"})
					} else {
						_ = sm.Ack(*ev.Request)
					}
					out <- ev
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return out
}

func next(t *testing.T, ctx context.Context, ch <-chan socketmode.Event) socketmode.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-ctx.Done():
		t.Fatal("no event arrived")
		return socketmode.Event{}
	}
}

func TestSocketModeEnvelopes(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	events := runSocket(t, s, api)

	sent, err := s.SendMessage(ctx, UserMessage{Text: s.Mention() + " fix the build"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Envelopes) != 2 || sent.EventIDs[0] == sent.EventIDs[1] {
		t.Fatalf("a mention should come as app_mention + message with distinct event IDs: %+v", sent)
	}
	ev := next(t, ctx, events)
	api1 := ev.Data.(slackevents.EventsAPIEvent)
	mention, ok := api1.InnerEvent.Data.(*slackevents.AppMentionEvent)
	if !ok || mention.User != "U0001" || mention.TimeStamp != sent.Message.TS || !strings.Contains(mention.Text, "fix the build") {
		t.Fatalf("first event = %#v", api1.InnerEvent.Data)
	}
	if cb := api1.Data.(*slackevents.EventsAPICallbackEvent); cb.EventID != sent.EventIDs[0] || cb.TeamID != "T0001" {
		t.Fatalf("outer event = %+v", cb)
	}
	ev = next(t, ctx, events)
	msg, ok := ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok || msg.ChannelType != "channel" || msg.ClientMsgID == "" || msg.TimeStamp != sent.Message.TS {
		t.Fatalf("second event = %#v", ev.Data)
	}
	snap, err := s.WaitFor(ctx, func(s Snapshot) bool { return s.Acked(sent.Envelopes...) })
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := snap.Ack(sent.Envelopes[0]); a.Latency <= 0 || a.Latency > 10*time.Second {
		t.Fatalf("ack latency = %v", a.Latency)
	}

	// A redelivery carries the same event_id and a retry_attempt.
	env, err := s.Redeliver(ctx, sent.Envelopes[1])
	if err != nil {
		t.Fatal(err)
	}
	ev = next(t, ctx, events)
	if ev.Request.RetryAttempt != 1 || ev.Request.EnvelopeID != env ||
		ev.Data.(slackevents.EventsAPIEvent).Data.(*slackevents.EventsAPICallbackEvent).EventID != sent.EventIDs[1] {
		t.Fatalf("redelivery = %+v", ev.Request)
	}

	// Slash command: the ack carries a payload.
	env, err = s.SendSlashCommand(ctx, SlashCommand{Command: "/sandbot", Text: "sessions"})
	if err != nil {
		t.Fatal(err)
	}
	ev = next(t, ctx, events)
	if cmd := ev.Data.(slack.SlashCommand); cmd.Command != "/sandbot" || cmd.Text != "sessions" || !strings.Contains(cmd.ResponseURL, "/response/") {
		t.Fatalf("slash command = %+v", cmd)
	}
	snap, err = s.WaitFor(ctx, func(s Snapshot) bool { return s.Acked(env) })
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := snap.Ack(env); !strings.Contains(string(a.Payload), `"text":"ok"`) {
		t.Fatalf("slash ack payload = %s", a.Payload)
	}
}

func TestInteractionsAndViews(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	events := runSocket(t, s, api)
	root := s.Say(UserMessage{Text: s.Mention() + " go"}).Message
	_, ts, err := api.PostMessageContext(ctx, "C0001", slack.MsgOptionTS(root.TS), slack.MsgOptionText("approve?", false), slack.MsgOptionBlocks(
		slack.NewActionBlock("actions_1",
			slack.NewButtonBlockElement("approve", "1.s.T1.C1.t.call-1", slack.NewTextBlockObject("plain_text", "Approve", false, false)).WithStyle(slack.StylePrimary),
			slack.NewButtonBlockElement("reject", "1.s.T1.C1.t.call-1", slack.NewTextBlockObject("plain_text", "Reject", false, false)).WithStyle(slack.StyleDanger))))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClickButton(ctx, Click{User: "U0002", Channel: "C0001", MessageTS: ts, ActionID: "nope"}); err == nil {
		t.Fatal("clicking a button that is not on the message succeeded")
	}
	if _, err := s.ClickButton(ctx, Click{User: "U0002", Channel: "C0001", MessageTS: ts, ActionID: "reject"}); err != nil {
		t.Fatal(err)
	}
	cb := next(t, ctx, events).Data.(slack.InteractionCallback)
	if cb.Type != slack.InteractionTypeBlockActions || cb.User.ID != "U0002" || cb.Container.ThreadTs != root.TS ||
		cb.Container.MessageTs != ts || cb.Channel.ID != "C0001" || len(cb.ActionCallback.BlockActions) != 1 {
		t.Fatalf("block_actions = %+v", cb)
	}
	act := cb.ActionCallback.BlockActions[0]
	if act.ActionID != "reject" || act.Value != "1.s.T1.C1.t.call-1" || act.BlockID != "actions_1" {
		t.Fatalf("action = %+v", act)
	}

	modal := slack.ModalViewRequest{
		Type: slack.VTModal, Title: slack.NewTextBlockObject("plain_text", "Reject command", false, false),
		Submit: slack.NewTextBlockObject("plain_text", "Reject", false, false), CallbackID: "reject_reason", PrivateMetadata: "meta-1",
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewInputBlock("reason",
			slack.NewTextBlockObject("plain_text", "Reason", false, false), nil,
			slack.NewPlainTextInputBlockElement(nil, "reason_input"))}},
	}
	view, err := api.OpenViewContext(ctx, cb.TriggerID, modal)
	if err != nil {
		t.Fatalf("views.open: %v", err)
	}
	if _, err := api.OpenViewContext(ctx, cb.TriggerID, modal); slackErr(err) != "invalid_trigger_id" {
		t.Fatalf("reusing a trigger: %v", err)
	}
	if _, err := s.SubmitView(ctx, view.ID, "U0002", map[string]string{"reason_input": "too risky"}); err != nil {
		t.Fatal(err)
	}
	sub := next(t, ctx, events).Data.(slack.InteractionCallback)
	if sub.Type != slack.InteractionTypeViewSubmission || sub.View.PrivateMetadata != "meta-1" || sub.View.CallbackID != "reject_reason" ||
		sub.View.State.Values["reason"]["reason_input"].Value != "too risky" {
		t.Fatalf("view_submission = %+v", sub.View)
	}

	if _, err := s.UseShortcut(ctx, "fork_session", "U0003", "C0001", ts); err != nil {
		t.Fatal(err)
	}
	sc := next(t, ctx, events).Data.(slack.InteractionCallback)
	if sc.Type != slack.InteractionTypeMessageAction || sc.CallbackID != "fork_session" || sc.Message.ThreadTimestamp != root.TS || sc.User.ID != "U0003" {
		t.Fatalf("message_action = %+v", sc)
	}
}

func TestTriggerExpiry(t *testing.T) {
	s, api := newClient(t, Options{TriggerTTL: time.Nanosecond})
	ctx := testCtx(t)
	p, err := s.ShortcutPayload("x", "", "C0001", s.Say(UserMessage{Text: "hi"}).Message.TS)
	if err != nil {
		t.Fatal(err)
	}
	var cb slack.InteractionCallback
	if err := json.Unmarshal(p, &cb); err != nil {
		t.Fatal(err)
	}
	modal := slack.ModalViewRequest{Type: slack.VTModal, Title: slack.NewTextBlockObject("plain_text", "T", false, false),
		Blocks: slack.Blocks{BlockSet: []slack.Block{slack.NewDividerBlock()}}}
	if _, err := api.OpenViewContext(ctx, cb.TriggerID, modal); slackErr(err) != "expired_trigger_id" {
		t.Fatalf("expired trigger: %v", err)
	}
}

func TestSocketModeReconnects(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	events := runSocket(t, s, api)
	if _, err := s.WaitFor(ctx, func(s Snapshot) bool { return s.Open == 1 }); err != nil {
		t.Fatal(err)
	}
	s.Disconnect("refresh_requested")
	if _, err := s.WaitFor(ctx, func(s Snapshot) bool { return s.Connections == 2 && s.Open == 1 }); err != nil {
		t.Fatalf("no reconnect after a disconnect request: %v", err)
	}
	sent, err := s.SendMessage(ctx, UserMessage{ChannelType: "im", Channel: "D0001", Text: "after refresh"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, ctx, events); ev.Data.(slackevents.EventsAPIEvent).InnerEvent.Type != "message" {
		t.Fatalf("event after reconnect = %+v", ev)
	}
	if snap := s.Snapshot(); snap.Sent[len(snap.Sent)-1].Conn != 2 || len(sent.Envelopes) != 1 {
		t.Fatalf("a DM is one message event on the new connection: %+v", snap.Sent)
	}

	s.DropConnections()
	if _, err := s.WaitFor(ctx, func(s Snapshot) bool { return s.Connections == 3 && s.Open == 1 }); err != nil {
		t.Fatalf("no reconnect after a dropped socket: %v", err)
	}
	if _, err := s.SendMessage(ctx, UserMessage{ChannelType: "im", Channel: "D0001", Text: "after drop"}); err != nil {
		t.Fatal(err)
	}
	next(t, ctx, events)
}

func TestSendWaitsForConnection(t *testing.T) {
	s, _ := newClient(t, Options{})
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	if _, err := s.SendEvent(ctx, URLVerification("x")); !errors.Is(err, errNoConnection) {
		t.Fatalf("send without a client: %v", err)
	}
}

func TestHTTPSigning(t *testing.T) {
	s, _ := newClient(t, Options{})
	ctx := testCtx(t)
	secret := s.Options().SigningSecret
	var got []string
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sv, err := slack.NewSecretsVerifier(r.Header, secret)
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got = append(got, r.Header.Get("Content-Type")+" "+string(body))
		_, _ = io.WriteString(w, "ok")
	}))
	defer app.Close()

	said := s.Say(UserMessage{Text: s.Mention() + " hi"})
	if r, err := s.PostEvent(ctx, app.URL, said.Payloads[0], Signing{}); err != nil || r.Status != 200 {
		t.Fatalf("signed event: %+v %v", r, err)
	}
	if r, _ := s.PostEvent(ctx, app.URL, said.Payloads[0], Signing{Secret: "wrong"}); r.Status != 401 {
		t.Fatalf("wrong secret: %+v", r)
	}
	if r, _ := s.PostEvent(ctx, app.URL, said.Payloads[0], Signing{Timestamp: time.Now().Add(-10 * time.Minute)}); r.Status != 401 {
		t.Fatalf("stale timestamp: %+v", r)
	}
	if r, _ := s.PostEvent(ctx, app.URL, said.Payloads[0], Signing{Unsigned: true}); r.Status != 401 {
		t.Fatalf("unsigned: %+v", r)
	}
	if r, _ := s.PostSlashCommand(ctx, app.URL, SlashCommand{Command: "/sandbot", Text: "help"}, Signing{}); r.Status != 200 {
		t.Fatalf("signed command: %+v", r)
	}
	if r, _ := s.PostInteraction(ctx, app.URL, json.RawMessage(`{"type":"block_actions"}`), Signing{}); r.Status != 200 {
		t.Fatalf("signed interaction: %+v", r)
	}
	if len(got) != 3 || !strings.HasPrefix(got[1], "application/x-www-form-urlencoded") || !strings.Contains(got[1], "command=%2Fsandbot") ||
		!strings.Contains(got[2], "payload=") {
		t.Fatalf("accepted requests = %q", got)
	}
}

// TestUnackedEventsAreSentAgain: as Slack does, an events_api envelope
// nobody acknowledges comes again with the next retry_attempt, up to the
// configured number of retries; an acknowledged one does not.
func TestUnackedEventsAreSentAgain(t *testing.T) {
	// The third delivery's retry would wait an hour: its ack, whenever it
	// lands, comes first.
	s, api := newClient(t, Options{RedeliverUnacked: []time.Duration{time.Millisecond, time.Millisecond, time.Hour}})
	ctx := testCtx(t)
	sm := socketmode.New(api)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = sm.RunContext(sctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// A DM is one envelope. The client acks nothing but the third
	// delivery (retry_attempt 2).
	sent, err := s.SendMessage(ctx, UserMessage{Channel: "D0001", ChannelType: "im", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	var attempts []int
	for len(attempts) < 3 {
		select {
		case ev := <-sm.Events:
			if ev.Type != socketmode.EventTypeEventsAPI {
				continue
			}
			attempts = append(attempts, ev.Request.RetryAttempt)
			if ev.Request.RetryAttempt == 2 {
				_ = sm.Ack(*ev.Request)
			}
		case <-ctx.Done():
			t.Fatalf("deliveries so far: %v", attempts)
		}
	}
	if attempts[0] != 0 || attempts[1] != 1 || attempts[2] != 2 {
		t.Fatalf("retry attempts = %v, want [0 1 2]", attempts)
	}
	snap, err := s.WaitFor(ctx, func(sn Snapshot) bool { return len(sn.Acks) == 1 })
	if err != nil {
		t.Fatal(err)
	}
	var resent int
	for _, e := range snap.Sent {
		if e.Unacked {
			resent++
			if e.Retry == 0 {
				t.Fatalf("a resent envelope without retry_attempt: %+v", e)
			}
		} else if e.ID != sent.Envelopes[0] {
			t.Fatalf("an envelope neither sent first nor resent: %+v", e)
		}
	}
	if resent != 2 {
		t.Fatalf("%d envelopes resent, want 2 (the third delivery was acknowledged)", resent)
	}
}
