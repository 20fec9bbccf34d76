package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/config"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

// /title renames the session; /status and /sessions show the new title,
// and only the owner and approvers may rename.
func TestTitleRenamesTheSession(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals)
	th := e.thread("title")
	e.turn(th, 1, "first task", fakeopenai.FinalStep("done"))
	if r := e.command(th, "/title Fix the flaky test"); r != "Renamed this session to **Fix the flaky test**." {
		t.Fatalf("/title replied %q", r)
	}
	if info := e.info(th); info.Title != "Fix the flaky test" {
		t.Fatalf("title = %q", info.Title)
	}
	if r := e.command(th, "/sessions"); !strings.Contains(r, "**Fix the flaky test**") || !strings.Contains(r, "idle") {
		t.Fatalf("/sessions = %q", r)
	}
	before := len(e.p.textsIn(th))
	e.send(th, bobUser, "title-bob", "/title mine now")
	if got := e.p.textsIn(th); len(got) <= before || !strings.Contains(got[len(got)-1].Text, "may not rename this session") {
		t.Fatalf("bob's /title got %q", got[len(got)-1].Text)
	}
	if r := e.command(th, "/title"); !strings.Contains(r, "/title TEXT") {
		t.Fatalf("/title without text replied %q", r)
	}
}

// Tokens and cost show in the card's footer and /status; a session past
// its token budget stops its next turn before calling the model, saying
// why.
func TestUsageCostAndTokenBudget(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals, func(c *config.Config) {
		c.Session.TokenBudget = 1
		c.Model.PriceInput, c.Model.PriceOutput = 2.5, 10
	})
	th := e.thread("budget")
	// The answer waits until the turn's card is up: a quick turn without
	// tool calls posts no card at all, and the footer is on the card.
	carded := make(chan struct{})
	go func() {
		defer close(carded)
		for e.ctx.Err() == nil {
			posts, _ := e.p.snapshot()
			for _, p := range posts {
				if p.Thread == th && len(p.Cards) > 0 {
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	ts := e.turn(th, 1, "hello", fakeopenai.Step{Content: "hi", Hold: carded})
	if ts.Usage.Total() == 0 {
		t.Fatalf("the fake model reported no usage: %s", dump(ts))
	}
	if err := e.core.WaitThread(e.ctx, th); err != nil {
		t.Fatal(err)
	}
	posts, _ := e.p.snapshot()
	var footer string
	for _, p := range posts {
		// The turn's card, wherever it is among the thread's posts (the
		// answer may be posted after it).
		if p.Thread == th && len(p.Cards) > 0 {
			if c := cardText(p.Cards[len(p.Cards)-1]); strings.Contains(c, "✅ Done") {
				footer = c
			}
		}
	}
	if !strings.Contains(footer, "✅ Done") || !strings.Contains(footer, "tokens ($") {
		t.Fatalf("the card's footer has no tokens and cost: %q", footer)
	}
	calls := len(e.model.Requests())
	ts = e.turn(th, 2, "and again", fakeopenai.FinalStep("never sent"))
	if ts.Status != session.StatusFailed || !strings.Contains(ts.Error, "its budget is 1 (SANDBOT_SESSION_TOKEN_BUDGET)") {
		t.Fatalf("a turn past the budget: %s", dump(ts))
	}
	if n := len(e.model.Requests()); n != calls {
		t.Fatalf("the model was called %d more times past the budget", n-calls)
	}
	if err := e.core.HandleMessage(e.ctx, e.p, chat.Message{EventID: "status-b", Thread: th, User: alice, Text: "/status"}); err != nil {
		t.Fatal(err)
	}
	posts, _ = e.p.snapshot()
	if s := cardText(posts[len(posts)-1].Cards[0]); !strings.Contains(s, "Tokens") || !strings.Contains(s, "$0.") {
		t.Fatalf("/status = %q", s)
	}
}

// /model switches the session's model among those the deployment offers,
// from the next turn; model=NAME in a message does the same; anything else
// is refused by the workflow and by the model activity.
func TestModelPerSession(t *testing.T) {
	e := newThreadEnv(t, false, noApprovals, func(c *config.Config) { c.Model.Allowed = []string{"fake-model-big"} })
	th := e.thread("model")
	e.turn(th, 1, "hello", fakeopenai.FinalStep("hi"))
	reqs := e.model.Requests()
	if got := reqs[len(reqs)-1].Body.Model; got != "fake-model" {
		t.Fatalf("turn 1 used %q", got)
	}
	if r := e.command(th, "/model"); !strings.Contains(r, "**fake-model**") || !strings.Contains(r, "Offered: fake-model, fake-model-big") {
		t.Fatalf("/model replied %q", r)
	}
	if r := e.command(th, "/model evil-model"); !strings.Contains(r, `model "evil-model" is not offered here; choose one of fake-model, fake-model-big`) {
		t.Fatalf("/model evil-model replied %q", r)
	}
	if r := e.command(th, "/model fake-model-big"); !strings.Contains(r, "switches from **fake-model** to **fake-model-big** from the next turn") {
		t.Fatalf("/model fake-model-big replied %q", r)
	}
	e.turn(th, 2, "again", fakeopenai.FinalStep("hi"))
	reqs = e.model.Requests()
	if got := reqs[len(reqs)-1].Body.Model; got != "fake-model-big" {
		t.Fatalf("turn 2 used %q", got)
	}
	if info := e.info(th); info.Model != "fake-model-big" {
		t.Fatalf("info.Model = %q", info.Model)
	}
	// model=NAME in a first message.
	th2 := e.thread("model-mention")
	e.turn(th2, 1, "model=fake-model-big write a poem", fakeopenai.FinalStep("a poem"))
	reqs = e.model.Requests()
	last := reqs[len(reqs)-1]
	if last.Body.Model != "fake-model-big" || strings.Contains(dump(last.Body.Messages), "model=") {
		t.Fatalf("a model=NAME message sent model %q and messages %s", last.Body.Model, dump(last.Body.Messages))
	}
}

// Mentioned partway through a Slack thread, the bot puts what was said
// before into the session's first prompt, named by display name; later
// messages bring no context again.
func TestSlackThreadContextReachesTheFirstPrompt(t *testing.T) {
	e := newSlackEnv(t, slackOptions{stack: []stackOption{slackNoApprovals}})
	root := e.send(fakeslack.UserMessage{User: slackBob, Channel: e.channel, Text: "the nightly build fails on arm64"})
	th := e.thread(root.Message.TS)
	e.reply(th, slackDave, "only since the cache change, I think")
	e.s.model.Push(fakeopenai.FinalStep("Looking."))
	e.reply(th, slackAlice, e.f.Mention()+" can you fix it?")
	e.waitDone(th, 1)
	first := e.s.model.Requests()[0]
	body := dump(first.Body.Messages)
	for _, want := range []string{"Earlier in this chat thread", "the nightly build fails on arm64", "only since the cache change, I think", "can you fix it?"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the first prompt lacks %q: %s", want, body)
		}
	}
	if strings.Contains(body, slackBob+":") || strings.Contains(body, slackDave+":") {
		t.Fatalf("the context names people by ID: %s", body)
	}
	e.s.model.Push(fakeopenai.FinalStep("Still on it."))
	e.reply(th, slackAlice, e.f.Mention()+" any news?")
	e.waitDone(th, 2)
	reqs := e.s.model.Requests()
	if n := strings.Count(dump(reqs[len(reqs)-1].Body.Messages), "Earlier in this chat thread"); n != 1 {
		t.Fatalf("the context appears %d times in turn 2's prompt, want once", n)
	}
}

// In a Discord thread someone else started, the first mention brings the
// thread's earlier messages into the session's first prompt.
func TestDiscordThreadContextReachesTheFirstPrompt(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{stack: []stackOption{noApprovals}})
	threadID := "5300000000000000001"
	e.f.AddChannel(fakediscord.Channel{ID: threadID, Type: fakediscord.ChannelPublicThread, GuildID: e.guild, ParentID: e.channel, OwnerID: discordBob.User.ID, Name: "arm64 build"})
	e.say(chat.Thread{Thread: threadID}, discordBob, "the nightly build fails on arm64")
	e.say(chat.Thread{Thread: threadID}, discordAlice, "since the cache change")
	e.s.model.Push(fakeopenai.FinalStep("Looking."))
	e.say(chat.Thread{Thread: threadID}, discordAlice, "<@"+e.f.AppID()+"> can you fix it?")
	th := chat.Thread{Platform: "discord", Workspace: e.guild, Channel: e.channel, Thread: threadID}
	e.waitDone(th, 1)
	body := dump(e.s.model.Requests()[0].Body.Messages)
	for _, want := range []string{"Earlier in this chat thread", "bob: the nightly build fails on arm64", "alice: since the cache change", "can you fix it?"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the first prompt lacks %q: %s", want, body)
		}
	}
}

// Where only mentions reach the bot (SANDBOT_SLACK_REQUIRE_MENTION), what
// the thread said between turns goes into the next turn.
func TestSlackRequireMentionBringsTheMessagesBetweenTurns(t *testing.T) {
	e := newSlackEnv(t, slackOptions{stack: []stackOption{slackNoApprovals}, adapter: func(c *slack.Config) { c.RequireMention = true }})
	e.s.model.Push(fakeopenai.FinalStep("First look done."))
	th, _ := e.mention(slackAlice, "look at the build")
	e.waitDone(th, 1)
	e.reply(th, slackBob, "I tried a clean cache, same failure")
	e.reply(th, slackDave, "it started on Tuesday")
	e.s.model.Push(fakeopenai.FinalStep("Thanks."))
	e.reply(th, slackAlice, e.f.Mention()+" go on")
	e.waitDone(th, 2)
	reqs := e.s.model.Requests()
	body := dump(reqs[len(reqs)-1].Body.Messages)
	for _, want := range []string{"Said in this chat thread since the last turn", "I tried a clean cache, same failure", "it started on Tuesday", "go on"} {
		if !strings.Contains(body, want) {
			t.Fatalf("turn 2's prompt lacks %q: %s", want, body)
		}
	}
	if strings.Count(body, "look at the build") != 1 || strings.Count(body, "First look done.") != 1 {
		t.Fatalf("turn 1 came back as context: %s", body)
	}
}
