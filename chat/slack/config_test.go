package slack

import (
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{BotToken: "xoxb-123-abc", AppToken: "xapp-1-A1-xyz"}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want []string // substrings of the error; none: valid
	}{
		{"socket defaults", func(*Config) {}, nil},
		{"http", func(c *Config) { c.Mode, c.AppToken, c.SigningSecret = ModeHTTP, "", "s3cret" }, nil},
		{"missing bot token", func(c *Config) { c.BotToken = "" }, []string{"SANDBOT_SLACK_BOT_TOKEN is not set", `"xoxb-"`}},
		{"user token as bot token", func(c *Config) { c.BotToken = "xoxp-999-secretpart" }, []string{"SANDBOT_SLACK_BOT_TOKEN", `must start with "xoxb-"`, "got xoxp-"}},
		{"secret without prefix", func(c *Config) { c.BotToken = "abcdefsecret" }, []string{"(no token prefix)"}},
		{"missing app token in socket mode", func(c *Config) { c.AppToken = "" }, []string{"SANDBOT_SLACK_APP_TOKEN is not set", "Socket Mode"}},
		{"bot token as app token", func(c *Config) { c.AppToken = "xoxb-1-2" }, []string{"SANDBOT_SLACK_APP_TOKEN", `"xapp-"`}},
		{"http without secret", func(c *Config) { c.Mode = ModeHTTP }, []string{"SANDBOT_SLACK_SIGNING_SECRET is not set"}},
		{"bad mode", func(c *Config) { c.Mode = "websocket" }, []string{"SANDBOT_SLACK_MODE", `"socket"`, `"http"`}},
		{"api url without slash", func(c *Config) { c.APIURL = "http://127.0.0.1:9/api" }, []string{"SANDBOT_SLACK_API_URL", `ending in "/"`}},
		{"edit interval too short", func(c *Config) { c.EditInterval = 10 * time.Millisecond }, []string{"SANDBOT_SLACK_EDIT_INTERVAL"}},
		{"budget", func(c *Config) { c.UpdateBudgetPerMinute = -1 }, []string{"SANDBOT_SLACK_UPDATE_BUDGET"}},
		{"threshold", func(c *Config) { c.FileUploadThreshold = 10 }, []string{"SANDBOT_SLACK_FILE_UPLOAD_THRESHOLD"}},
		{"slash command", func(c *Config) { c.SlashCommand = "sandbot" }, []string{"SANDBOT_SLACK_SLASH_COMMAND"}},
		{"names instead of IDs", func(c *Config) { c.Approvers = []string{"@alice"} }, []string{"SANDBOT_SLACK_APPROVERS", `"@alice"`}},
		{"several problems at once", func(c *Config) { c.BotToken, c.AppToken = "", "" }, []string{"SANDBOT_SLACK_BOT_TOKEN", "SANDBOT_SLACK_APP_TOKEN"}},
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
			if strings.Contains(err.Error(), "secretpart") || strings.Contains(err.Error(), "abcdefsecret") {
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
