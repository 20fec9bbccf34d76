package chat_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		in      string
		want    chat.Command
		ok      bool
		wantErr string
	}{
		{in: "fix the build", ok: false},
		{in: "", ok: false},
		{in: "/usr/bin/env is missing", ok: false},
		{in: "!important: fix it", ok: false},
		{in: "/", ok: false},
		{in: "/stop", want: chat.Command{Name: chat.CmdStop}, ok: true},
		{in: "  !STOP ", want: chat.Command{Name: chat.CmdStop}, ok: true},
		{in: "/cancel", want: chat.Command{Name: chat.CmdStop}, ok: true},
		{in: "/stop now", want: chat.Command{Name: chat.CmdStop, Args: []string{"now"}}, ok: true, wantErr: "takes no arguments"},
		{in: "/status", want: chat.Command{Name: chat.CmdStatus}, ok: true},
		{in: "/help", want: chat.Command{Name: chat.CmdHelp}, ok: true},
		{in: "/history", want: chat.Command{Name: chat.CmdHistory}, ok: true},
		{in: "/history 5", want: chat.Command{Name: chat.CmdHistory, Args: []string{"5"}, N: 5}, ok: true},
		{in: "/history 500", want: chat.Command{Name: chat.CmdHistory, Args: []string{"500"}, N: chat.MaxHistory}, ok: true},
		{in: "/history lots", want: chat.Command{Name: chat.CmdHistory, Args: []string{"lots"}}, ok: true, wantErr: "count from 1 to 50"},
		{in: "/backend", want: chat.Command{Name: chat.CmdBackend}, ok: true},
		{in: "/backend docker", want: chat.Command{Name: chat.CmdBackend, Args: []string{"docker"}, Backend: "docker"}, ok: true},
		{in: "/switch docker", want: chat.Command{Name: chat.CmdBackend, Args: []string{"docker"}, Backend: "docker"}, ok: true},
		{in: "/backend docker local", want: chat.Command{Name: chat.CmdBackend, Args: []string{"docker", "local"}}, ok: true, wantErr: "Usage: /backend [NAME]"},
		{in: "/fork", want: chat.Command{Name: chat.CmdFork}, ok: true},
		{in: "/fork experiment", want: chat.Command{Name: chat.CmdFork, Args: []string{"experiment"}, Title: "experiment"}, ok: true},
		{in: `/fork "try the other fix" docker`, want: chat.Command{Name: chat.CmdFork, Args: []string{"try the other fix", "docker"}, Title: "try the other fix", Backend: "docker"}, ok: true},
		{in: "/fork “curly quotes” e2b", want: chat.Command{Name: chat.CmdFork, Args: []string{"curly quotes", "e2b"}, Title: "curly quotes", Backend: "e2b"}, ok: true},
		{in: "/fork try the other fix", want: chat.Command{Name: chat.CmdFork, Args: []string{"try", "the", "other", "fix"}}, ok: true, wantErr: "in quotes"},
		{in: `/fork "unclosed`, want: chat.Command{Name: chat.CmdFork}, ok: true, wantErr: "quote is not closed"},
		{in: "/sessions", want: chat.Command{Name: chat.CmdSessions}, ok: true},
		{in: "/destroy", want: chat.Command{Name: chat.CmdDestroy}, ok: true},
		{in: "/destroy confirm", want: chat.Command{Name: chat.CmdDestroy, Args: []string{"confirm"}, Confirm: true}, ok: true},
		{in: "/destroy please", want: chat.Command{Name: chat.CmdDestroy, Args: []string{"please"}}, ok: true, wantErr: "Usage: /destroy confirm"},
		{in: "/fork @3", want: chat.Command{Name: chat.CmdFork, Args: []string{}, N: 3}, ok: true},
		{in: `/fork @2 "older try" docker`, want: chat.Command{Name: chat.CmdFork, Args: []string{"older try", "docker"}, Title: "older try", Backend: "docker", N: 2}, ok: true},
		{in: "/fork @two", want: chat.Command{Name: chat.CmdFork, Args: []string{"@two"}}, ok: true, wantErr: "/fork @N takes the number of a turn"},
		{in: "/rewind 3", want: chat.Command{Name: chat.CmdRewind, Args: []string{"3"}, N: 3}, ok: true},
		{in: "/rewind 3 confirm", want: chat.Command{Name: chat.CmdRewind, Args: []string{"3", "confirm"}, N: 3, Confirm: true}, ok: true},
		{in: "/rewind", want: chat.Command{Name: chat.CmdRewind}, ok: true, wantErr: "Usage: /rewind N confirm"},
		{in: "/rewind 0", want: chat.Command{Name: chat.CmdRewind, Args: []string{"0"}}, ok: true, wantErr: "/rewind takes the number of a turn"},
		{in: "/rewind 3 now", want: chat.Command{Name: chat.CmdRewind, Args: []string{"3", "now"}}, ok: true, wantErr: "Usage: /rewind N confirm"},
		{in: "/pause", want: chat.Command{Name: chat.CmdPause}, ok: true},
		{in: "/resume", want: chat.Command{Name: chat.CmdResume}, ok: true},
		{in: "/frobnicate", want: chat.Command{Name: "frobnicate"}, ok: true, wantErr: "no command /frobnicate"},
		{in: "/status\nand more", want: chat.Command{Name: chat.CmdStatus, Args: []string{"and", "more"}}, ok: true, wantErr: "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok, err := chat.ParseCommand(tt.in)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if tt.wantErr == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				var ue *chat.UserError
				if !errors.As(err, &ue) {
					t.Errorf("parse error %T is not a *UserError, so it would not be shown as is", err)
				}
			}
			if tt.wantErr == "" && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestHandleCommandStatus(t *testing.T) {
	f := &chattest.Sessions{
		InfoFn: func(id string) (session.Info, error) {
			return session.Info{WorkflowID: id, Title: "fix ci", Owner: chat.User{ID: "U1", Name: "ann"}, Backend: "docker", Turns: 4}, nil
		},
		TurnStateFn: func(string) (session.TurnState, error) {
			return session.TurnState{Turn: 4, Status: session.StatusThinking, Backend: "docker", PendingBackend: "local", Queued: 2}, nil
		},
	}
	c := newTestCore(t, f, newAutoClock(), nil)
	r, err := c.HandleCommand(context.Background(), &recPoster{}, testThread, chat.User{ID: "U1"}, chat.Command{Name: chat.CmdStatus})
	if err != nil {
		t.Fatal(err)
	}
	if r.Card == nil {
		t.Fatalf("status reply has no card: %+v", r)
	}
	got := map[string]string{}
	for _, b := range r.Card.Blocks {
		for _, fl := range b.Fields {
			got[fl.Label] = fl.Value
		}
	}
	want := map[string]string{"Backend": "docker → local (next turn)", "Turns": "4", "Status": "working", "Owner": "@ann", "Queued": "2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields = %v, want %v", got, want)
	}
	link := "http://ui.test/namespaces/default/workflows/" + "session%2Ftest%2FW1%2FC1%2FT1"
	if !strings.Contains(cardText(*r.Card), link) {
		t.Errorf("status card lacks the Temporal UI link %s:\n%s", link, cardText(*r.Card))
	}
}

// /status lists the kept checkpoints, newest first, for /rewind and
// /fork @N; /rewind asks before it undoes anything.
func TestCheckpointsInStatusAndRewind(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 4, 0, 0, time.UTC)
	f := &chattest.Sessions{
		InfoFn: func(id string) (session.Info, error) {
			return session.Info{WorkflowID: id, Turns: 3, Checkpoints: []session.Checkpoint{
				{Turn: 1, At: at, Files: 2013, Bytes: 48 << 20}, {Turn: 3, At: at.Add(time.Hour)},
			}}, nil
		},
		TurnStateFn: func(string) (session.TurnState, error) { return session.TurnState{Turn: 3}, nil },
		RewindFn: func(_ string, req session.RewindRequest) (session.RewindResponse, error) {
			return session.RewindResponse{Turn: req.Turn, Undone: 3 - req.Turn}, nil
		},
	}
	c := newTestCore(t, f, newAutoClock(), nil)
	r, err := c.HandleCommand(context.Background(), &recPoster{}, testThread, chat.User{ID: "U1"}, chat.Command{Name: chat.CmdStatus})
	if err != nil || r.Card == nil {
		t.Fatal(r, err)
	}
	want := "turn 3 (12-02 11:04) · turn 1 (12-02 10:04, 2,013 files, 48 MiB) — `/rewind N` or `/fork @N`"
	if got := cardText(*r.Card); !strings.Contains(got, want) {
		t.Errorf("status card lacks %q:\n%s", want, got)
	}
	r, _ = c.HandleCommand(context.Background(), &recPoster{}, testThread, chat.User{ID: "U1"}, chat.Command{Name: chat.CmdRewind, N: 1})
	if f.Count("rewind") != 0 || !strings.Contains(r.Text, "/rewind 1 confirm") || !strings.Contains(r.Text, "undoing turns 2 to 3") {
		t.Fatalf("unconfirmed rewind: calls %v, reply %q", f.Calls(), r.Text)
	}
	r, _ = c.HandleCommand(context.Background(), &recPoster{}, testThread, chat.User{ID: "U1"}, chat.Command{Name: chat.CmdRewind, N: 1, Confirm: true})
	if f.Count("rewind") != 1 || !strings.Contains(r.Text, "Rewound to the end of turn 1; 2 later turns were undone") {
		t.Fatalf("confirmed rewind: calls %v, reply %q", f.Calls(), r.Text)
	}
}

func TestHandleCommandRelaysWorkflowErrors(t *testing.T) {
	f := &chattest.Sessions{
		SetBackendFn: func(string, session.SetBackendRequest) (session.SetBackendResponse, error) {
			return session.SetBackendResponse{}, &chat.UserError{Msg: `backend "gpu" is not available; available backends: local, docker`}
		},
	}
	c := newTestCore(t, f, newAutoClock(), nil)
	r, err := c.HandleCommand(context.Background(), &recPoster{}, testThread, chat.User{ID: "U1"}, chat.Command{Name: chat.CmdBackend, Backend: "gpu"})
	if err != nil {
		t.Fatalf("a user error must not be an internal error: %v", err)
	}
	if r.Text != `backend "gpu" is not available; available backends: local, docker` {
		t.Errorf("reply = %q", r.Text)
	}

	// An internal error shows a generic line and is returned.
	f.SetBackendFn = func(string, session.SetBackendRequest) (session.SetBackendResponse, error) {
		return session.SetBackendResponse{}, errors.New("dial tcp 10.0.0.7:7233: connection refused")
	}
	r, err = c.HandleCommand(context.Background(), &recPoster{}, testThread, chat.User{ID: "U1"}, chat.Command{Name: chat.CmdBackend, Backend: "gpu"})
	if err == nil {
		t.Fatal("internal error not returned")
	}
	if strings.Contains(r.Text, "10.0.0.7") || r.Text != chat.InternalErrorText {
		t.Errorf("internal detail leaked to the user: %q", r.Text)
	}
}

func TestHandleCommandDestroyNeedsConfirm(t *testing.T) {
	f := &chattest.Sessions{DestroyFn: func(string) (session.DestroyResponse, error) { return session.DestroyResponse{Turns: 3}, nil }}
	c := newTestCore(t, f, newAutoClock(), nil)
	r, _ := c.HandleCommand(context.Background(), &recPoster{}, testThread, chat.User{ID: "U1"}, chat.Command{Name: chat.CmdDestroy})
	if f.Count("destroy") != 0 || !strings.Contains(r.Text, "/destroy confirm") {
		t.Fatalf("unconfirmed destroy: calls %v, reply %q", f.Calls(), r.Text)
	}
	r, _ = c.HandleCommand(context.Background(), &recPoster{}, testThread, chat.User{ID: "U1"}, chat.Command{Name: chat.CmdDestroy, Confirm: true})
	if f.Count("destroy") != 1 || !strings.Contains(r.Text, "destroyed after 3 turns") {
		t.Fatalf("confirmed destroy: calls %v, reply %q", f.Calls(), r.Text)
	}
}

// forkPoster can open threads.
type forkPoster struct {
	recPoster
	opened []string
}

func (p *forkPoster) StartThread(_ context.Context, from chat.Thread, title string) (chat.Thread, error) {
	p.opened = append(p.opened, title)
	from.Thread = "T2"
	return from, nil
}

func TestHandleCommandFork(t *testing.T) {
	var got session.ForkRequest
	f := &chattest.Sessions{
		InfoFn: func(string) (session.Info, error) { return session.Info{Title: "fix ci"}, nil },
		ForkFn: func(id string, req session.ForkRequest) (session.ForkResponse, error) {
			got = req
			return session.ForkResponse{WorkflowID: req.Location.ID(), AtTurn: 3, Backend: "docker"}, nil
		},
	}
	c := newTestCore(t, f, newAutoClock(), nil)

	// Without ThreadStarter the platform cannot fork.
	r, err := c.HandleCommand(context.Background(), &recPoster{}, testThread, chat.User{ID: "U1"}, chat.Command{Name: chat.CmdFork})
	if err != nil || !strings.Contains(r.Text, "not supported") || f.Count("fork") != 0 {
		t.Fatalf("fork without ThreadStarter: %q, %v, calls %v", r.Text, err, f.Calls())
	}

	p := &forkPoster{}
	r, err = c.HandleCommand(context.Background(), p, testThread, chat.User{ID: "U1"}, chat.Command{Name: chat.CmdFork, Title: "other", Backend: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Location.Thread != "T2" || got.Title != "other" || got.Backend != "docker" || got.User.ID != "U1" {
		t.Errorf("fork request = %+v", got)
	}
	if len(p.opened) != 1 || p.opened[0] != "other" {
		t.Errorf("threads opened: %v", p.opened)
	}
	if !strings.Contains(r.Text, "Forked at turn 3") {
		t.Errorf("reply = %q", r.Text)
	}
	if texts := p.ops("text"); len(texts) != 1 || !strings.Contains(texts[0].Text, "Forked from") {
		t.Errorf("the new thread got %+v, want one intro message", texts)
	}
}

// cardText joins all text of a card.
func cardText(c chat.Card) string {
	parts := []string{c.Title}
	for _, b := range c.Blocks {
		parts = append(parts, b.Text)
		for _, f := range b.Fields {
			parts = append(parts, f.Label+": "+f.Value)
		}
		for _, btn := range b.Buttons {
			parts = append(parts, "["+btn.Label+"]")
		}
	}
	return strings.Join(parts, "\n")
}
