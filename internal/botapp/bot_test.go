package botapp

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat/discord"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/config"
)

// TestDocumentedDefaultsAreTheAdapters: the registry documents the
// adapters' defaults (config passes zero through and the adapter applies
// its own), so the documentation must say what the adapters do.
func TestDocumentedDefaultsAreTheAdapters(t *testing.T) {
	durations := map[string]time.Duration{
		"SANDBOT_SLACK_EDIT_INTERVAL":   slack.DefaultEditInterval,
		"SANDBOT_DISCORD_EDIT_INTERVAL": discord.DefaultEditInterval,
	}
	for name, want := range durations {
		v, ok := config.Lookup(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		if got, err := time.ParseDuration(v.Documented()); err != nil || got != want {
			t.Errorf("%s documents %q, the adapter's default is %s", name, v.Documented(), want)
		}
	}
	texts := map[string]string{
		"SANDBOT_SLACK_UPDATE_BUDGET":         strconv.Itoa(slack.DefaultUpdateBudgetPerMinute),
		"SANDBOT_SLACK_UPLOAD_THRESHOLD":      strconv.Itoa(slack.DefaultFileUploadThreshold),
		"SANDBOT_SLACK_LISTEN_ADDR":           slack.DefaultListenAddr,
		"SANDBOT_SLACK_MODE":                  string(slack.ModeSocket),
		"SANDBOT_DISCORD_REQUESTS_PER_SECOND": strconv.Itoa(discord.DefaultRequestsPerSecond),
	}
	for name, want := range texts {
		if v, _ := config.Lookup(name); v.Documented() != want {
			t.Errorf("%s documents %q, the adapter's default is %q", name, v.Documented(), want)
		}
	}
}

// TestMappingPassesEverySetting: what config validated reaches the
// adapters unchanged.
func TestMappingPassesEverySetting(t *testing.T) {
	cfg := config.Load()
	cfg.Slack = config.Slack{BotToken: "xoxb-1", AppToken: "xapp-1", Mode: "http", SigningSecret: "s", ListenAddr: ":1",
		AllowedChannels: []string{"C1"}, AllowedUsers: []string{"U1"}, Approvers: []string{"U2"}, RequireMention: true,
		APIBase: "http://x/api/", EditInterval: time.Second, UpdateBudget: 9, UploadThreshold: 2000, Streaming: true}
	sc := slackConfig(cfg)
	if sc.Mode != slack.ModeHTTP || sc.APIURL != "http://x/api/" || sc.UpdateBudgetPerMinute != 9 || sc.FileUploadThreshold != 2000 ||
		!sc.RequireMention || !sc.Streaming || sc.Approvers[0] != "U2" || sc.ListenAddr != ":1" || sc.EditInterval != time.Second {
		t.Errorf("slack: %+v", sc)
	}
	cfg.Discord = config.Discord{Token: "t", AppID: "1", GuildID: "2", AllowedRoles: []string{"3"}, ApproverRoles: []string{"4"},
		MessageContent: true, EditInterval: time.Second, APIBase: "http://d"}
	dc := discordConfig(cfg, nil)
	if dc.ApplicationID != "1" || dc.GuildID != "2" || !dc.MessageContentIntent || dc.ApproverRoles[0] != "4" || dc.APIBase != "http://d" {
		t.Errorf("discord: %+v", dc)
	}
}

// TestBotLinksNoWorker: the bot binary builds only what it runs.
func TestBotLinksNoWorker(t *testing.T) {
	// go test runs with the go command on PATH; a missing one is a broken
	// environment, not a reason to skip.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH (%v): this test lists cmd/bot's dependencies with it", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/sandbot/sandbot/cmd/bot").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/sashabaranov/go-openai", "github.com/moby/", "github.com/aws/aws-sdk",
			"gocloud.dev", "github.com/sandbot/sandbot/agent", "github.com/sandbot/sandbot/sandbox",
			"github.com/sandbot/sandbot/workflows", "go.temporal.io/server"} {
			if pkg == banned || strings.HasPrefix(pkg, banned) {
				t.Errorf("cmd/bot links %s", pkg)
			}
		}
	}
}
