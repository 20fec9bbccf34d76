package chat_test

import (
	"context"
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
