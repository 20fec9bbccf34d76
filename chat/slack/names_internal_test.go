package slack

import (
	"strings"
	"testing"

	slackgo "github.com/slack-go/slack"
)

// TestProfileName: the display name, else the real name, else the handle,
// each made one safe line first (a name of only spaces or invisible
// characters counts as none).
func TestProfileName(t *testing.T) {
	user := func(display, real, name string) *slackgo.User {
		return &slackgo.User{Name: name, Profile: slackgo.UserProfile{DisplayName: display, RealName: real}}
	}
	cases := []struct {
		u    *slackgo.User
		want string
	}{
		{user("Alice", "Alice Liddell", "alice"), "Alice"},
		{user("", "Alice Liddell", "alice"), "Alice Liddell"},
		{user("", "", "alice"), "alice"},
		{user(" \u200b ", "\u202e", "alice"), "alice"},
		{user("Eve\u202e\u2066gnp.exe", "", ""), "Evegnp.exe"},
		{user("two\nlines\tand\x1b[2Jcodes", "", ""), "two lines and [2Jcodes"},
		{user("", "", ""), ""},
	}
	for _, tc := range cases {
		if got := profileName(tc.u); got != tc.want {
			t.Errorf("profileName(%+v) = %q, want %q", tc.u.Profile, got, tc.want)
		}
	}
	if got := cleanName(strings.Repeat("x", 200)); TextLen(got) > maxNameRunes {
		t.Errorf("a 200-character name became %d characters, want at most %d", TextLen(got), maxNameRunes)
	}
}
