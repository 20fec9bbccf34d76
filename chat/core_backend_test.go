package chat_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// A message that names a backend starts its session there (the terminal's
// New session asks for one); a backend no worker serves is refused before
// anything starts.
func TestMessageBackendStartsTheSessionThere(t *testing.T) {
	var gotIn session.SessionInput
	f := &chattest.Sessions{
		SendFn: func(in session.SessionInput, _ session.MessageRequest) (session.MessageResponse, error) {
			gotIn = in
			return session.MessageResponse{Turn: 1}, nil
		},
		TurnStateFn: (&script{states: []session.TurnState{done(1, 1, "hi")}}).next,
	}
	c := newTestCore(t, f, newAutoClock(), func(cfg *chat.CoreConfig) {
		cfg.Start = chat.StartDefaults{Backend: "local"}
		cfg.ServedBackends = func(context.Context) ([]string, error) { return []string{"local", "docker"}, nil }
	})
	p := &recPoster{}
	m := msg("e1", "build it")
	m.Backend = "docker"
	if err := c.HandleMessage(context.Background(), p, m); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if gotIn.Backend != "docker" {
		t.Errorf("started on %q, want docker", gotIn.Backend)
	}

	gotIn = session.SessionInput{}
	m = msg("e2", "build it")
	m.Backend = "daytona"
	if err := c.HandleMessage(context.Background(), p, m); err != nil {
		t.Fatal(err)
	}
	if gotIn.Location != (chat.Thread{}) {
		t.Errorf("a session was started on an unserved backend: %+v", gotIn)
	}
	got := texts(p)
	if last := got[len(got)-1]; !strings.Contains(last, "daytona") || !strings.Contains(last, "not available") {
		t.Errorf("refusal = %q", last)
	}
}
