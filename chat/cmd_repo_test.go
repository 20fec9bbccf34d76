package chat_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// A message that names a repository carries it to the session; one the
// allowlist refuses starts nothing and says what is allowed.
func TestMessagesNameRepositories(t *testing.T) {
	var got []*session.RepoSpec
	f := &chattest.Sessions{
		SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
			got = append(got, req.Repo)
			return session.MessageResponse{Turn: 1}, nil
		},
		TurnStateFn: (&script{states: []session.TurnState{done(1, 1, "ok")}}).next,
	}
	c := newTestCore(t, f, newAutoClock(), func(cfg *chat.CoreConfig) {
		cfg.Repos = chat.RepoConfig{Allow: []string{"acme/*"}, GitURL: "https://git.example",
			ChannelDefault: func(ch string) (session.RepoSpec, bool) {
				return session.RepoSpec{URL: "https://git.example/acme/default.git"}, ch == "C-default"
			}}
	})
	p := &recPoster{}
	cases := []struct{ text, url, branch string }{
		{"acme/widgets: fix the flaky test", "https://git.example/acme/widgets.git", ""},
		{"in acme/widgets@release-2 bump the version", "https://git.example/acme/widgets.git", "release-2"},
		{"https://git.example/acme/api.git add a route", "https://git.example/acme/api.git", ""},
		{"src/main.go is broken, look", "", ""}, // a path, not a repository
	}
	for i, tc := range cases {
		if err := c.HandleMessage(context.Background(), p, msg("e"+string(rune('a'+i)), tc.text)); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, c, testThread)
		r := got[len(got)-1]
		switch {
		case tc.url == "" && r != nil:
			t.Errorf("%q carried repository %+v", tc.text, r)
		case tc.url != "" && (r == nil || r.URL != tc.url || r.Branch != tc.branch):
			t.Errorf("%q carried %+v, want %s@%s", tc.text, r, tc.url, tc.branch)
		}
	}
	n := len(got)
	if err := c.HandleMessage(context.Background(), p, msg("e-evil", "evil/repo: steal things")); err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatal("a repository off the allowlist reached the session")
	}
	if last := texts(p)[len(texts(p))-1]; !strings.Contains(last, "evil/repo is not on this deployment's repository allowlist (allowed: acme/*)") {
		t.Fatalf("refusal = %q", last)
	}
	// The channel's default when the message names none.
	m := msg("e-def", "fix it")
	m.Thread.Channel = "C-default"
	if err := c.HandleMessage(context.Background(), p, m); err != nil {
		t.Fatal(err)
	}
	if r := got[len(got)-1]; r == nil || r.URL != "https://git.example/acme/default.git" {
		t.Fatalf("a message in a channel with a default carried %+v", r)
	}
}

// The Stop button of a running card stops the turn, for the thread it is
// in only, and answers the clicker privately.
func TestStopButton(t *testing.T) {
	var stopped []string
	f := &chattest.Sessions{StopFn: func(id string) (session.StopResponse, error) {
		stopped = append(stopped, id)
		return session.StopResponse{Stopped: true, Turn: 3}, nil
	}}
	c := newTestCore(t, f, newAutoClock(), nil)
	var replies []string
	act := chat.Action{ID: chat.ActionStop, Value: testThread.ID(), Thread: testThread, User: chat.User{ID: "U1"},
		Reply: func(_ context.Context, text string) error { replies = append(replies, text); return nil }}
	if err := c.HandleAction(context.Background(), &recPoster{}, act); err != nil {
		t.Fatal(err)
	}
	if len(stopped) != 1 || stopped[0] != testThread.ID() || len(replies) != 1 || replies[0] != "Stopped turn 3." {
		t.Fatalf("stopped %q, replies %q", stopped, replies)
	}
	// A button copied into another thread stops nothing.
	other := testThread
	other.Thread = "elsewhere"
	act.Thread = other
	if err := c.HandleAction(context.Background(), &recPoster{}, act); err != nil {
		t.Fatal(err)
	}
	if len(stopped) != 1 || !strings.Contains(replies[1], "another thread") {
		t.Fatalf("a Stop button from another thread: stopped %q, replies %q", stopped, replies)
	}
}

// /history shows the tail of each tool output, lines kept, well past the
// old 120 characters, in a block the output cannot close.
func TestHistoryShowsMoreOfEachOutput(t *testing.T) {
	var out strings.Builder
	for i := range 10 {
		fmt.Fprintf(&out, "line %d of the build output, long enough to matter\n", i)
	}
	out.WriteString("```\nDONE")
	h := []session.HistoryEntry{{Turn: 1, Msg: session.Message{Role: session.RoleTool, Content: out.String()}}}
	got := chat.RenderHistory(h, 4000)
	if !strings.Contains(got, "line 9 of the build output, long enough to matter\n") || !strings.Contains(got, "DONE") || len(got) < 400 {
		t.Fatalf("history = %q", got)
	}
	if strings.Count(got, "```") != 2 {
		t.Fatalf("the output closed its block: %q", got)
	}
}
