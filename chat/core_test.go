package chat_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

func TestHandleMessageEmptyAndOversized(t *testing.T) {
	f := &chattest.Sessions{}
	c := newTestCore(t, f, newAutoClock(), nil)
	p := &recPoster{}
	for _, text := range []string{"", "   \n\t "} {
		if err := c.HandleMessage(context.Background(), p, msg("e1", text)); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat("x", session.MaxMessageBytes+1)
	if err := c.HandleMessage(context.Background(), p, msg("e2", big)); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Calls()); n != 0 {
		t.Fatalf("sessions were called: %q", f.Calls())
	}
	got := texts(p)
	if len(got) != 3 || !strings.Contains(got[0], "/help") {
		t.Fatalf("replies = %q", got)
	}
	want := "Your message is 65537 bytes; the limit is 65536 bytes."
	if !strings.HasPrefix(got[2], want) {
		t.Errorf("oversized reply = %q, want it to start with %q", got[2], want)
	}
}

func TestHandleMessageStartsSession(t *testing.T) {
	var gotIn session.SessionInput
	var gotReq session.MessageRequest
	f := &chattest.Sessions{
		SendFn: func(in session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
			gotIn, gotReq = in, req
			return session.MessageResponse{Turn: 1}, nil
		},
		TurnStateFn: (&script{states: []session.TurnState{done(1, 1, "hi")}}).next,
	}
	settings := session.Settings{Policy: session.Policy{ApprovalMode: session.ApproveUnlessReadOnly, MaxToolCalls: 7}}
	c := newTestCore(t, f, newAutoClock(), func(cfg *chat.CoreConfig) {
		cfg.Start = chat.StartDefaults{Settings: settings, Backend: "docker"}
	})
	p := &recPoster{}
	text := "  fix the flaky test\nin pkg/foo, it times out  "
	if err := c.HandleMessage(context.Background(), p, msg("e1", text)); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if gotIn.Location != testThread || gotIn.Owner.ID != "U1" || gotIn.Backend != "docker" || gotIn.Settings.MaxToolCalls != 7 || gotIn.Title != "fix the flaky test" {
		t.Errorf("start input = %+v", gotIn)
	}
	if gotReq.EventID != "e1" || gotReq.Text != strings.TrimSpace(text) || gotReq.User.ID != "U1" {
		t.Errorf("request = %+v", gotReq)
	}
	// A quick answer with no tool calls needs no status card.
	if len(p.ops("post")) != 0 || len(texts(p)) != 1 {
		t.Errorf("events = %+v, want just the answer", p.Events())
	}
}

func TestHandleMessageShowsValidatorRejection(t *testing.T) {
	f := &chattest.Sessions{SendFn: func(session.SessionInput, session.MessageRequest) (session.MessageResponse, error) {
		return session.MessageResponse{}, &chat.UserError{Msg: "this session has been destroyed", Err: errors.New("validator")}
	}}
	c := newTestCore(t, f, newAutoClock(), nil)
	p := &recPoster{}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "hello")); err != nil {
		t.Fatalf("a rejection is the user's business, not an internal error: %v", err)
	}
	if got := texts(p); len(got) != 1 || got[0] != "this session has been destroyed" {
		t.Errorf("replies = %q", got)
	}
	if err := c.HandleMessage(context.Background(), p, chat.Message{Thread: testThread, Text: "no id"}); err == nil {
		t.Error("a message without EventID must be refused")
	}
}

func TestHandleMessageCommands(t *testing.T) {
	f := &chattest.Sessions{StopFn: func(string) (session.StopResponse, error) {
		return session.StopResponse{Stopped: true, Turn: 3}, nil
	},
		TurnStateFn: (&script{states: []session.TurnState{done(3, 9, "x")}}).next}
	c := newTestCore(t, f, newAutoClock(), nil)
	p := &recPoster{}
	for _, text := range []string{"/stop", "/nonsense", "/help", "!stop", "!nonsense"} {
		if err := c.HandleMessage(context.Background(), p, msg("e-"+text, text)); err != nil {
			t.Fatal(err)
		}
	}
	if f.Count("send") != 0 || f.Count("stop") != 2 {
		t.Errorf("calls = %q: commands must not reach the agent", f.Calls())
	}
	got := texts(p)
	// An unknown command gets the same one line however it was typed.
	if len(got) != 5 || got[0] != "Stopped turn 3." || got[1] != "There is no command /nonsense; /help lists them." ||
		!strings.Contains(got[2], "/destroy confirm") || got[4] != got[1] {
		t.Errorf("replies = %q", got)
	}
}

func TestAuthorize(t *testing.T) {
	f := &chattest.Sessions{}
	c := newTestCore(t, f, newAutoClock(), func(cfg *chat.CoreConfig) {
		cfg.Authorize = func(_ context.Context, u chat.User, _ chat.Thread) error {
			if u.ID == "U1" {
				return nil
			}
			return errors.New("not in allow list")
		}
	})
	p := &recPoster{}
	m := msg("e1", "hello")
	m.User = chat.User{ID: "U666"}
	if err := c.HandleMessage(context.Background(), p, m); err != nil {
		t.Fatal(err)
	}
	if got := texts(p); len(got) != 1 || got[0] != "You may not use this bot here." || len(f.Calls()) != 0 {
		t.Errorf("replies %q, calls %q", got, f.Calls())
	}
}
