package session

import (
	"strings"
	"testing"
)

func TestParseRepoSpec(t *testing.T) {
	const host = "https://github.com"
	for _, c := range []struct{ in, url, branch, err string }{
		{in: "acme/widgets", url: "https://github.com/acme/widgets.git"},
		{in: "acme/widgets.git", url: "https://github.com/acme/widgets.git"},
		{in: "acme/widgets@release-2", url: "https://github.com/acme/widgets.git", branch: "release-2"},
		{in: "https://git.example/acme/widgets.git", url: "https://git.example/acme/widgets.git"},
		{in: "<https://git.example/acme/widgets.git|widgets>", url: "https://git.example/acme/widgets.git"},
		{in: "https://git.example/acme/widgets.git@dev", url: "https://git.example/acme/widgets.git", branch: "dev"},
		{in: "https://git.example/acme/widgets#feature/x", url: "https://git.example/acme/widgets", branch: "feature/x"},
		{in: "git@github.com:acme/widgets.git", url: "git@github.com:acme/widgets.git"},
		{in: "https://user:pw@git.example/acme/w.git", err: "credentials"},
		{in: "acme", err: "not a repository"},
		{in: "../etc/passwd", err: "not a repository"},
		{in: "acme/widgets@--upload-pack=evil", err: "not a branch name"},
		{in: "acme/widgets@a..b", err: "not a branch name"},
		{in: "https://git.example/?q=1", err: "not a repository URL"},
	} {
		got, err := ParseRepoSpec(c.in, host)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseRepoSpec(%q) = %+v, %v; want an error about %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got.URL != c.url || got.Branch != c.branch {
			t.Errorf("ParseRepoSpec(%q) = %+v, %v; want %s @ %q", c.in, got, err, c.url, c.branch)
		}
	}
}

func TestRepoAllowed(t *testing.T) {
	for _, c := range []struct {
		patterns []string
		url      string
		want     bool
	}{
		{nil, "https://github.com/acme/widgets.git", false},
		{[]string{"*"}, "https://evil.example/x/y.git", true},
		{[]string{"acme/*"}, "https://github.com/acme/widgets.git", true},
		{[]string{"acme/*"}, "https://github.com/other/widgets.git", false},
		{[]string{"acme/widgets"}, "https://github.com/acme/widgets2.git", false},
		{[]string{"github.com/acme/*"}, "https://github.com/acme/widgets.git", true},
		{[]string{"github.com/acme/*"}, "https://evil.example/acme/widgets.git", false},
		{[]string{"acme/*"}, "git@github.com:acme/widgets.git", true},
	} {
		if got := RepoAllowed(c.patterns, c.url); got != c.want {
			t.Errorf("RepoAllowed(%q, %s) = %v", c.patterns, c.url, got)
		}
	}
}

func TestSessionBranchesDiffer(t *testing.T) {
	a, b := SessionBranch("session/slack/T/C/1.1", 1), SessionBranch("session/slack/T/C/1.2", 1)
	if a == b || !strings.HasPrefix(a, "sandbot/") || !strings.HasSuffix(a, "-1") {
		t.Fatalf("branches %q and %q", a, b)
	}
	if SessionBranch("x", 2) == SessionBranch("x", 1) {
		t.Fatal("the n-th branch of one session must differ")
	}
}

func TestRepoMessageSignatureCoversTheRepo(t *testing.T) {
	key := []byte(strings.Repeat("k", MinKeyBytes))
	req := MessageRequest{EventID: "e", Text: "go", User: User{ID: "U"}, Repo: &RepoSpec{URL: "https://github.com/acme/w.git"}}
	now := req.Auth.At
	Sign(key, "wf", UpdateSendMessage, &req, now)
	if err := Verify(key, "wf", UpdateSendMessage, &req, now); err != nil {
		t.Fatalf("the signed message does not verify: %v", err)
	}
	req.Repo = &RepoSpec{URL: "https://github.com/evil/w.git"}
	if err := Verify(key, "wf", UpdateSendMessage, &req, now); err == nil {
		t.Fatal("a message whose repository was changed after signing verified")
	}
}
