package discord

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
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

// The slash commands are the core's command table, no more and no less, and
// each option reaches the core's Command.
func TestSlashCommandsAreTheCoreTable(t *testing.T) {
	var want, got []string
	for _, c := range chat.Commands() {
		want = append(want, c.Name)
	}
	byName := map[string]*discordgo.ApplicationCommand{}
	for _, c := range Commands(nil) {
		got = append(got, c.Name)
		byName[c.Name] = c
	}
	if !slices.Equal(got, want) {
		t.Fatalf("slash commands %q, core commands %q", got, want)
	}
	opt := func(name string, v any) *discordgo.ApplicationCommandInteractionDataOption {
		o := &discordgo.ApplicationCommandInteractionDataOption{Name: name, Value: v}
		switch v.(type) {
		case bool:
			o.Type = discordgo.ApplicationCommandOptionBoolean
		case float64:
			o.Type = discordgo.ApplicationCommandOptionInteger
		default:
			o.Type = discordgo.ApplicationCommandOptionString
		}
		return o
	}
	for _, tc := range []struct {
		name string
		opts []*discordgo.ApplicationCommandInteractionDataOption
		want chat.Command
	}{
		{chat.CmdSessions, []*discordgo.ApplicationCommandInteractionDataOption{opt("all", true)}, chat.Command{Name: chat.CmdSessions, Args: []string{"all"}}},
		{chat.CmdSessions, []*discordgo.ApplicationCommandInteractionDataOption{opt("all", false)}, chat.Command{Name: chat.CmdSessions}},
		{chat.CmdHistory, []*discordgo.ApplicationCommandInteractionDataOption{opt("count", 7.0)}, chat.Command{Name: chat.CmdHistory, N: 7}},
		{chat.CmdFork, []*discordgo.ApplicationCommandInteractionDataOption{opt("title", "t"), opt("backend", "docker")}, chat.Command{Name: chat.CmdFork, Title: "t", Backend: "docker"}},
		{chat.CmdDestroy, []*discordgo.ApplicationCommandInteractionDataOption{opt("confirm", true)}, chat.Command{Name: chat.CmdDestroy, Confirm: true}},
	} {
		for _, o := range tc.opts {
			found := false
			for _, def := range byName[tc.name].Options {
				found = found || def.Name == o.Name
			}
			if !found {
				t.Errorf("/%s has no option %q", tc.name, o.Name)
			}
		}
		got := toCommand(discordgo.ApplicationCommandInteractionData{Name: tc.name, Options: tc.opts})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("/%s %v: command %+v, want %+v", tc.name, tc.opts, got, tc.want)
		}
	}
}

func TestInviteURL(t *testing.T) {
	if Permissions != 309237763136 {
		t.Fatalf("Permissions = %d; update the README if the bot needs new permissions", Permissions)
	}
	want := "https://discord.com/oauth2/authorize?client_id=1000000000000000001&permissions=309237763136&scope=bot+applications.commands"
	if got := InviteURL("1000000000000000001"); got != want {
		t.Fatalf("InviteURL = %s", got)
	}
}
