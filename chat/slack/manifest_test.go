package slack

import (
	"os"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"
)

// The app manifest must request exactly what the adapter uses: these lists
// change together with the code.
var (
	usedScopes = []string{
		"app_mentions:read", // app_mention events
		"channels:history",  // message.channels, conversations.replies
		"chat:write",        // chat.postMessage, chat.update, chat.postEphemeral
		"commands",          // the slash command and the message shortcut
		"files:write",       // files.getUploadURLExternal, files.completeUploadExternal
		"files:read",        // url_private_download of attached files (the worker)
		"groups:history",    // message.groups, conversations.replies in private channels
		"im:history",        // message.im
		"mpim:history",      // message.mpim
		"users:read",        // users.info: display names
		"reactions:write",   // reactions.add, reactions.remove
		"assistant:write",   // agents.sessions.setStatus (assistant.go); assistant.threads.setStatus needs only chat:write
	}
	usedEvents = []string{"app_mention", "message.channels", "message.groups", "message.im", "message.mpim",
		"agent_session_stopped"} // the native stop button (assistant.go)
)

func TestManifestMatchesAdapter(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Features struct {
			AppHome struct {
				MessagesTab bool `yaml:"messages_tab_enabled"`
				ReadOnly    bool `yaml:"messages_tab_read_only_enabled"`
			} `yaml:"app_home"`
			Shortcuts []struct {
				Type       string `yaml:"type"`
				CallbackID string `yaml:"callback_id"`
			} `yaml:"shortcuts"`
			SlashCommands []struct {
				Command string `yaml:"command"`
			} `yaml:"slash_commands"`
			AgentView struct {
				Description string `yaml:"agent_description"`
			} `yaml:"agent_view"`
		} `yaml:"features"`
		OAuth struct {
			Scopes struct {
				Bot []string `yaml:"bot"`
			} `yaml:"scopes"`
		} `yaml:"oauth_config"`
		Settings struct {
			Events struct {
				Bot []string `yaml:"bot_events"`
			} `yaml:"event_subscriptions"`
			Interactivity struct {
				Enabled bool `yaml:"is_enabled"`
			} `yaml:"interactivity"`
			SocketMode bool `yaml:"socket_mode_enabled"`
		} `yaml:"settings"`
	}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("manifest is not valid YAML: %v", err)
	}
	scopes := slices.Sorted(slices.Values(m.OAuth.Scopes.Bot))
	if !slices.Equal(scopes, slices.Sorted(slices.Values(usedScopes))) {
		t.Errorf("manifest scopes %v, adapter uses %v", scopes, usedScopes)
	}
	events := slices.Sorted(slices.Values(m.Settings.Events.Bot))
	if !slices.Equal(events, slices.Sorted(slices.Values(usedEvents))) {
		t.Errorf("manifest events %v, adapter handles %v", events, usedEvents)
	}
	if len(m.Features.SlashCommands) != 1 || m.Features.SlashCommands[0].Command != DefaultSlashCommand {
		t.Errorf("slash commands = %+v, want only %s", m.Features.SlashCommands, DefaultSlashCommand)
	}
	if len(m.Features.Shortcuts) != 1 || m.Features.Shortcuts[0].CallbackID != ForkShortcut || m.Features.Shortcuts[0].Type != "message" {
		t.Errorf("shortcuts = %+v, want the %s message shortcut", m.Features.Shortcuts, ForkShortcut)
	}
	if !m.Settings.Interactivity.Enabled || !m.Settings.SocketMode {
		t.Error("interactivity and Socket Mode (the default mode) must be enabled")
	}
	if m.Features.AgentView.Description == "" {
		t.Error("the app must be declared an agent (features.agent_view): only agents get sessions with Slack's native stop button")
	}
	if !m.Features.AppHome.MessagesTab || m.Features.AppHome.ReadOnly {
		t.Error("the Messages tab must be open for DMs to reach the bot")
	}
}
