package integration

import (
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/discord"
	"github.com/sandbot/sandbot/chat/slack"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// A running turn's card has a Stop button that does what /stop does: the
// turn stops, the card says who stopped it, the clicker is answered
// privately, and nothing else is posted in the thread.
func TestSlackStopButton(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch should-not-exist")))
	th, sent := e.mention(slackAlice, "make a file")
	ref := e.statusRef(th, 1)
	e.approvalButtons(ref)
	var stop *string
	var button = shownButtons(e.message(ref))
	for i, b := range button {
		if slack.ActionIDOf(b.ActionID) == chat.ActionStop {
			stop = &button[i].Value
			e.click(ref, slackBob, button[i], nil)
		}
	}
	if stop == nil {
		t.Fatalf("the running card has no Stop button: %+v", button)
	}
	end := e.waitTurn(th, "the stopped turn", done)
	if !end.Stopped {
		t.Fatalf("after Stop: %s", dump(end))
	}
	e.waitMessage(ref, "the stopped card", func(m fakeslack.Message) bool {
		return hasLine(messageText(m), "⏹️ Stopped by") && len(controlsShown(m)) == 0
	})
	e.wait("the private answer", func(s fakeslack.Snapshot) bool {
		for _, c := range ephemerals(s, slackBob) {
			if strings.Contains(c.Form.Get("text"), "Stopped turn 1.") {
				return true
			}
		}
		return false
	})
	for _, m := range e.f.Snapshot().BotMessages(th.Channel, th.Thread) {
		if m.TS != ref && strings.Contains(messageText(m), "Stopped") {
			t.Fatalf("a public message repeats the stop: %q", messageText(m))
		}
	}
	if _, ok := workspaceFile(t, e.s, th, "should-not-exist"); ok {
		t.Fatal("the command of the stopped turn ran")
	}
	e.waitMessage(sent.Message.TS, "the stopped reaction", func(m fakeslack.Message) bool {
		return len(m.Reactions) == 1 && m.Reactions[0] == "black_square_for_stop"
	})
}

func TestDiscordStopButton(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch should-not-exist")))
	th := e.mention(discordAlice, "make a file")
	ref := e.statusRef(th, 1)
	e.approvalCard(ref)
	m, _ := e.f.Message(ref)
	var stop string
	for _, id := range m.CustomIDs() {
		if a, _, _ := discord.ParseCustomID(id); a == chat.ActionStop {
			stop = id
		}
	}
	if stop == "" {
		t.Fatalf("the running card has no Stop button: %q", m.CustomIDs())
	}
	e.click(ref, discordBob, stop)
	end := e.waitTurn(th, "the stopped turn", done)
	if !end.Stopped {
		t.Fatalf("after Stop: %s", dump(end))
	}
	e.waitCard(ref, "the stopped card", func(m fakediscord.Message) bool {
		return strings.HasPrefix(m.Content, "⏹️ Stopped by ") && len(controlIDs(m.CustomIDs())) == 0
	})
	for _, m := range e.botMessages(th.Thread) {
		if m.ID != ref && strings.Contains(m.Content+m.EmbedText(), "Stopped") {
			t.Fatalf("a public message repeats the stop: %q", m.Content)
		}
	}
}

// The user's message carries the turn's state: 👀 while it runs, then ✅,
// or ⏹️ for a stopped turn.
func TestSlackReactionsShowTheTurn(t *testing.T) {
	e := newSlackEnv(t, slackOptions{stack: []stackOption{slackNoApprovals}})
	e.s.model.Push(fakeopenai.FinalStep("Hello."))
	th, sent := e.mention(slackAlice, "say hello")
	e.waitDone(th, 1)
	e.waitMessage(sent.Message.TS, "the done reaction", func(m fakeslack.Message) bool {
		return len(m.Reactions) == 1 && m.Reactions[0] == "white_check_mark"
	})
	if calls := e.f.Snapshot().CallsTo("reactions.add"); len(calls) != 2 || calls[0].Form.Get("name") != "eyes" {
		t.Fatalf("reactions.add calls: %d (first %q), want eyes then the end", len(calls), calls[0].Form.Get("name"))
	}
}

// On Discord, /title renames the session's thread, and the message a turn
// answers carries its state as reactions.
func TestDiscordTitleAndReactions(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{stack: []stackOption{noApprovals}})
	e.s.model.Push(fakeopenai.FinalStep("Hello."))
	th := e.mention(discordAlice, "say hello")
	e.waitDone(th, 1)
	id := e.slash(th, discordAlice, "title", fakediscord.CommandOption{Name: "text", Value: "Greeting work"})
	if m := e.discordAnswer(id); !strings.Contains(m.Content, "Renamed this session to **Greeting work**") {
		t.Fatalf("/title answered %q", m.Content)
	}
	if ch, ok := e.f.Channel(th.Thread); !ok || ch.Name != "Greeting work" {
		t.Fatalf("thread name = %q", ch.Name)
	}
	if info := e.s.info(th); info.Title != "Greeting work" {
		t.Fatalf("title = %q", info.Title)
	}
	e.wait("the done reaction", func() bool {
		for _, ev := range e.f.ReactionEvents() {
			if ev.Emoji == "✅" && !ev.Removed {
				return true
			}
		}
		return false
	})
}

// On Discord, where every bot message is sent with mentions off, the one
// approval notice pings exactly the people who may approve.
func TestDiscordApprovalNoticePingsApprovers(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch x")))
	th := e.mention(discordAlice, "make a file")
	e.approvalCard(e.statusRef(th, 1))
	var notice fakediscord.Message
	e.wait("the approval notice", func() bool {
		for _, m := range e.botMessages(th.Thread) {
			if isApprovalNotice(m.Content) {
				notice = m
				return true
			}
		}
		return false
	})
	if len(notice.Pinged) == 0 || notice.Pinged[0] != discordAlice.User.ID {
		t.Fatalf("the notice %q pinged %v, want the owner", notice.Content, notice.Pinged)
	}
	for _, m := range e.botMessages(th.Thread) {
		if m.ID != notice.ID && len(m.Pinged) > 0 {
			t.Fatalf("another bot message pinged %v: %q", m.Pinged, m.Content)
		}
	}
	e.slash(th, discordAlice, "stop")
	e.waitTurn(th, "the stopped turn", done)
}
