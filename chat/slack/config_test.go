package slack

import (
	"strings"
	"testing"
)

func validConfig() Config {
	return Config{BotToken: "xoxb-123-abc", AppToken: "xapp-1-A1-xyz"}
}

// TestConfigValidate: the adapter refuses configurations it cannot run
// with, naming fields (package config names the variables, earlier).
func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want []string // substrings of the error; none: valid
	}{
		{"socket defaults", func(*Config) {}, nil},
		{"http", func(c *Config) { c.Mode, c.AppToken, c.SigningSecret = ModeHTTP, "", "s3cret" }, nil},
		{"missing bot token", func(c *Config) { c.BotToken = "" }, []string{"BotToken is empty"}},
		{"missing app token in socket mode", func(c *Config) { c.AppToken = "" }, []string{"AppToken is empty", "Socket Mode"}},
		{"http without secret", func(c *Config) { c.Mode = ModeHTTP }, []string{"SigningSecret is empty"}},
		{"bad mode", func(c *Config) { c.Mode = "websocket" }, []string{`Mode "websocket"`, `"socket"`, `"http"`}},
		{"api url without slash", func(c *Config) { c.APIURL = "http://127.0.0.1:9/api" }, []string{"APIURL", `end in "/"`}},
		{"negative budget", func(c *Config) { c.UpdateBudgetPerMinute = -1 }, []string{"must not be negative"}},
		{"slash command", func(c *Config) { c.SlashCommand = "sandbot" }, []string{"SlashCommand"}},
		{"several problems at once", func(c *Config) { c.BotToken, c.AppToken = "", "" }, []string{"BotToken", "AppToken"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mod(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "SANDBOT_") {
				t.Fatalf("the adapter names an environment variable: %v", err)
			}
			if strings.Contains(err.Error(), "xoxb-123-abc") || strings.Contains(err.Error(), "xapp-1-A1-xyz") {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
	if _, err := New(Config{}, nil); err == nil {
		t.Fatal("New accepted an empty config")
	}
}

func TestStripMention(t *testing.T) {
	cases := []struct{ in, want string }{
		{"<@UBOT> fix the build", "fix the build"},
		{"  <@UBOT>   ", ""},
		{"ask <@U42> about <#C1|general> and <!here>", "ask @U42 about #general and @here"},
		{"see <https://x.io/a|the doc> or <https://x.io/b|x.io/b> or <https://x.io/c>", "see the doc (https://x.io/a) or https://x.io/b or https://x.io/c"},
		{"if a &lt; b &amp;&amp; c &gt; d", "if a < b && c > d"},
		{"/backend docker <@UBOT>", "/backend docker"},
	}
	for _, tc := range cases {
		if got := stripMention(tc.in, "UBOT"); got != tc.want {
			t.Errorf("stripMention(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSessionArg(t *testing.T) {
	cases := []struct{ in, ts, ch, rest string }{
		{"sessions", "", "C0", "sessions"},
		{"stop https://acme.slack.com/archives/C123/p1700000000000100", "1700000000.000100", "C123", "stop"},
		{"stop <https://acme.slack.com/archives/C123/p1700000000000200?thread_ts=1700000000.000100&cid=C123>", "1700000000.000100", "C123", "stop"},
		{`fork "my try" docker 1700000000.000300`, "1700000000.000300", "C0", `fork "my try" docker`},
		{"backend docker", "", "C0", "backend docker"},
	}
	for _, tc := range cases {
		ts, ch, rest := sessionArg(tc.in, "C0")
		if ts != tc.ts || ch != tc.ch || rest != tc.rest {
			t.Errorf("sessionArg(%q) = %q %q %q, want %q %q %q", tc.in, ts, ch, rest, tc.ts, tc.ch, tc.rest)
		}
	}
}
