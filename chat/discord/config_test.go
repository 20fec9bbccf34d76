package discord

import (
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
)

const goodToken = "MTAwMDAwMDAwMDAwMDAwMDAwMQ.ZmFrZQ.fake-signature-for-tests-only"

// TestValidate: the adapter refuses configurations it cannot run with,
// naming fields (package config names the variables, earlier).
func TestValidate(t *testing.T) {
	good := Config{Token: goodToken, ApplicationID: "1000000000000000001"}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	cases := []struct {
		name  string
		edit  func(c *Config)
		wants []string
	}{
		{"missing token and app", func(c *Config) { c.Token, c.ApplicationID = "", "" },
			[]string{"Token is empty", "ApplicationID is empty"}},
		{"Bot prefix", func(c *Config) { c.Token = "Bot " + goodToken }, []string{"bare token"}},
		{"edit interval", func(c *Config) { c.EditInterval = -time.Second }, []string{"EditInterval -1s must not be negative"}},
		{"token ttl", func(c *Config) { c.InteractionTokenTTL = time.Hour }, []string{"InteractionTokenTTL 1h0m0s must be between 0 and 15m0s"}},
		{"archive", func(c *Config) { c.ThreadAutoArchive = 30 }, []string{"ThreadAutoArchive 30 must be 60, 1440, 4320 or 10080"}},
		{"api base", func(c *Config) { c.APIBase = "127.0.0.1:80" }, []string{"APIBase"}},
		{"too many backends", func(c *Config) { c.Backends = make([]string, 26) }, []string{"at most 25 choices"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), goodToken) {
				t.Error("the error repeats the token")
			}
			if strings.Contains(err.Error(), "SANDBOT_") {
				t.Errorf("the adapter names an environment variable: %v", err)
			}
		})
	}
}

func TestAuthorize(t *testing.T) {
	const g, ch, th = "4000000000000000001", "5000000000000000001", "5000000000000000009"
	inThread := chat.Thread{Platform: Platform, Workspace: g, Channel: ch, Thread: th}
	dm := chat.Thread{Platform: Platform, Channel: "6", Thread: "6"}
	alice := chat.User{ID: "7000000000000000001", Roles: []string{"9000000000000000001"}}
	bob := chat.User{ID: "7000000000000000002"}
	cases := []struct {
		name string
		cfg  Config
		u    chat.User
		th   chat.Thread
		ok   bool
	}{
		{"open config", Config{}, bob, inThread, true},
		{"allowed user", Config{AllowedUsers: []string{bob.ID}}, bob, inThread, true},
		{"user not allowed", Config{AllowedUsers: []string{alice.ID}}, bob, inThread, false},
		{"allowed role", Config{AllowedUsers: []string{"1"}, AllowedRoles: []string{"9000000000000000001"}}, alice, inThread, true},
		{"guild not allowed", Config{AllowedGuilds: []string{"1"}}, alice, inThread, false},
		{"thread counts as its parent channel", Config{AllowedChannels: []string{ch}}, alice, inThread, true},
		{"other channel", Config{AllowedChannels: []string{"2"}}, alice, inThread, false},
		{"guild and channel lists do not apply to DMs", Config{AllowedGuilds: []string{"1"}, AllowedChannels: []string{"2"}}, bob, dm, true},
		{"DMs disabled", Config{DisableDMs: true}, bob, dm, false},
		{"roles are unknown in DMs", Config{AllowedRoles: []string{"9000000000000000001"}}, chat.User{ID: alice.ID}, dm, false},
	}
	for _, tc := range cases {
		err := tc.cfg.Authorize(tc.u, tc.th)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && chat.UserMessage(err) != "You may not use this bot here." {
			t.Errorf("%s: user text %q", tc.name, chat.UserMessage(err))
		}
	}
}

func TestCommandsValidForDiscord(t *testing.T) {
	names := []string{"local", "docker", "daytona", "e2b"}
	for _, c := range Commands(names) {
		if len(c.Description) == 0 || len(c.Description) > 100 || strings.ToLower(c.Name) != c.Name {
			t.Errorf("/%s: bad name or description %q", c.Name, c.Description)
		}
	}
	// Choices are capped at Discord's 25.
	many := make([]string, 40)
	for i := range many {
		many[i] = "b" + strings.Repeat("x", i)
	}
	if n := len(backendChoices(many)); n != maxChoices {
		t.Fatalf("choices = %d", n)
	}
}

func TestInviteURL(t *testing.T) {
	if Permissions != 309237763072 {
		t.Fatalf("Permissions = %d; update the README if the bot needs new permissions", Permissions)
	}
	want := "https://discord.com/oauth2/authorize?client_id=1000000000000000001&permissions=309237763072&scope=bot+applications.commands"
	if got := InviteURL("1000000000000000001"); got != want {
		t.Fatalf("InviteURL = %s", got)
	}
}
