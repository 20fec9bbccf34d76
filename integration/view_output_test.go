package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/discord"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/config"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/redact"
	"github.com/sandbot/sandbot/session"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The View output scenarios run a turn of two calls: the first prints 200
// numbered lines and the worker's model key, glued from two halves so that
// only the output scrubbing can catch it, then echoes the key the model
// wrote whole (scrubbed from the call's arguments); the second is short. The card
// shows the last 5 lines of an output; the button shows all of it.
const viewKey = "sk-live-VIEW-0123456789abcdefXYZ"

func viewOutputStack(c *config.Config) {
	c.Session.ApprovalMode = "never"
	c.Model.APIKey = viewKey
}

func pushViewTurn(model *fakeopenai.Server, prefix string) {
	a, b := viewKey[:len(viewKey)/2], viewKey[len(viewKey)/2:]
	model.Push(
		fakeopenai.ToolCallStep(prefix+"1", "shell", shell(fmt.Sprintf("seq -f '%s line %%g' 200; printf 'key=%%s%%s\\n' '%s' '%s'", prefix, a, b), "echo "+viewKey)),
		fakeopenai.ToolCallStep(prefix+"2", "shell", shell("echo short "+prefix)),
		fakeopenai.FinalStep("Done."),
	)
}

// viewOutputShown checks what a View output answer shows: the whole first
// output (its first line too, which the card never shows), the key
// scrubbed.
func viewOutputShown(t *testing.T, what, text, prefix string) {
	t.Helper()
	for _, want := range []string{prefix + " line 1\n", prefix + " line 200", "key=[redacted: SANDBOT_MODEL_API_KEY]", "seq -f", "echo [redacted: SANDBOT_MODEL_API_KEY]"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
	// The command holds the key's two halves apart (that is how it got
	// past the scrubbing of commands); the key itself, in any encoding the
	// redactor knows, must not be shown.
	if redact.New(redact.Secret{Name: "k", Value: viewKey}).Redact(text) != text {
		t.Errorf("%s shows the model key:\n%s", what, text)
	}
}

// viewButton is a message's View output button.
func viewButton(t *testing.T, m fakeslack.Message) fakeslack.Button {
	t.Helper()
	for _, b := range shownButtons(m) {
		if slack.ActionIDOf(b.ActionID) == chat.ActionViewOutput {
			return b
		}
	}
	t.Fatalf("the finished card has no View output button: %+v", shownButtons(m))
	return fakeslack.Button{}
}

// waitView waits until modal id was updated at least n times and returns
// its text.
func (e *slackEnv) waitView(id string, n int) (fakeslack.View, string) {
	e.t.Helper()
	var v fakeslack.View
	e.wait("modal "+id+" filled in", func(fakeslack.Snapshot) bool {
		v, _ = e.f.View(id)
		return v.Updates >= n
	})
	return v, viewText(v)
}

func viewText(v fakeslack.View) string {
	var raw struct {
		Blocks json.RawMessage `json:"blocks"`
	}
	_ = json.Unmarshal(v.Raw, &raw)
	return blocksText(string(raw.Blocks))
}

// TestSlackViewOutput clicks View output on a finished card: a modal opens
// at once (views.open with the click's trigger), lists the turn's two
// calls, and the first, clicked, is pushed as a view with its arguments
// and whole output, the key scrubbed. Nothing is posted in the thread.
func TestSlackViewOutput(t *testing.T) {
	e := newSlackEnv(t, slackOptions{stack: []stackOption{viewOutputStack}})
	pushViewTurn(e.s.model, "A")
	th, _ := e.mention(slackAlice, "count")
	e.waitDone(th, 1)
	ref := e.statusRef(th, 1)
	card := e.waitMessage(ref, "the done card", func(m fakeslack.Message) bool { return hasLine(messageText(m), "✅ Done") })
	if text := messageText(card); strings.Contains(text, "A line 1\n") || strings.Contains(text, viewKey) {
		t.Fatalf("the card itself shows the whole output or the key:\n%s", text)
	}
	posted := len(e.botMessages(th))
	e.click(ref, slackBob, viewButton(t, card), nil)

	var root fakeslack.View
	e.wait("the output modal", func(fakeslack.Snapshot) bool {
		for _, v := range e.f.Views() {
			if v.CallbackID == "sandbot_output" && v.Previous == "" {
				root = v
				return true
			}
		}
		return false
	})
	root, text := e.waitView(root.ID, 1)
	if !strings.Contains(text, "Turn 1 ran 2 tool calls") || len(root.ViewButtons()) != 2 {
		t.Fatalf("picker modal: %q, buttons %+v", text, root.ViewButtons())
	}
	first := root.ViewButtons()[0]
	if !strings.HasPrefix(first.Text, "1. seq -f") {
		t.Fatalf("first picker button %+v", first)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := e.f.ClickInView(ctx, root.ID, slackBob, first.ActionID, nil); err != nil {
		t.Fatal(err)
	}
	var pushed fakeslack.View
	e.wait("the pushed output view", func(fakeslack.Snapshot) bool {
		for _, v := range e.f.Views() {
			if v.Previous == root.ID {
				pushed = v
				return true
			}
		}
		return false
	})
	_, text = e.waitView(pushed.ID, 1)
	if !strings.Contains(text, "Turn 1 · call 1 of 2") {
		t.Errorf("output view heading: %q", text)
	}
	viewOutputShown(t, "the output view", text, "A")
	if n := len(e.botMessages(th)); n != posted {
		t.Errorf("viewing the output posted %d messages in the thread", n-posted)
	}
	for _, c := range e.f.Snapshot().Calls {
		if strings.HasPrefix(c.Method, "views.") && !c.OK() {
			t.Errorf("Slack refused %s: %q %s", c.Method, c.Error, c.Response)
		}
	}
}

// TestSlackViewOutputForgedValue is the attack: a click on the card in
// thread B whose value names thread A's session (a forged or copied
// payload) is refused in the modal, and A's output is never shown.
func TestSlackViewOutputForgedValue(t *testing.T) {
	e := newSlackEnv(t, slackOptions{stack: []stackOption{viewOutputStack}})
	pushViewTurn(e.s.model, "A")
	a, _ := e.mention(slackAlice, "count for A")
	e.waitDone(a, 1)
	aCard := e.waitMessage(e.statusRef(a, 1), "A's card", func(m fakeslack.Message) bool { return hasLine(messageText(m), "✅ Done") })
	aValue := viewButton(t, aCard).Value

	pushViewTurn(e.s.model, "B")
	b, _ := e.mention(slackBob, "count for B")
	e.waitDone(b, 1)
	bRef := e.statusRef(b, 1)
	bCard := e.waitMessage(bRef, "B's card", func(m fakeslack.Message) bool { return hasLine(messageText(m), "✅ Done") })
	e.click(bRef, slackBob, viewButton(t, bCard), &aValue)

	var v fakeslack.View
	e.wait("the output modal", func(fakeslack.Snapshot) bool {
		for _, x := range e.f.Views() {
			if x.CallbackID == "sandbot_output" {
				v = x
				return true
			}
		}
		return false
	})
	_, text := e.waitView(v.ID, 1)
	if !strings.Contains(text, "belongs to another thread's session") || strings.Contains(text, "A line") {
		t.Fatalf("forged click shows %q", text)
	}
}

// discordViewButton is a card's View output custom_id.
func discordViewButton(t *testing.T, m fakediscord.Message, action string) []string {
	t.Helper()
	var out []string
	for _, id := range m.CustomIDs() {
		if a, _, _ := discord.ParseCustomID(id); a == action {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		t.Fatalf("message %s has no %s button: %q", m.ID, action, m.CustomIDs())
	}
	return out
}

// TestDiscordViewOutput clicks View output on a finished card: an
// ephemeral picker of the turn's calls; picking the first gives an
// ephemeral reply with its command and the whole output as a file
// (multipart), the key scrubbed.
func TestDiscordViewOutput(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{stack: []stackOption{viewOutputStack}})
	pushViewTurn(e.s.model, "A")
	th := e.mention(discordAlice, "count")
	e.waitDone(th, 1)
	ref := e.statusRef(th, 1)
	card := e.waitCard(ref, "the done card", func(m fakediscord.Message) bool { return strings.HasPrefix(m.Content, "✅ Done") })
	id := e.click(ref, discordBob, discordViewButton(t, card, chat.ActionViewOutput)[0])
	picker := e.discordAnswer(id)
	if !picker.Ephemeral() || !strings.Contains(picker.Content, "Turn 1 ran 2 tool calls") {
		t.Fatalf("picker: ephemeral %v, %q", picker.Ephemeral(), picker.Content)
	}
	calls := discordViewButton(t, picker, chat.ActionViewCall)
	if len(calls) != 2 {
		t.Fatalf("picker buttons %q", calls)
	}
	id = e.click(picker.ID, discordBob, calls[0])
	out := e.discordAnswer(id)
	if !out.Ephemeral() || len(out.Attachments) != 1 {
		t.Fatalf("output reply: ephemeral %v, %d attachments, %q", out.Ephemeral(), len(out.Attachments), out.Content)
	}
	if !strings.Contains(out.Content, "Turn 1 · call 1 of 2") || !strings.Contains(out.Content, "seq -f") ||
		!strings.Contains(out.Content, "echo [redacted: SANDBOT_MODEL_API_KEY]") {
		t.Errorf("output reply content %q", out.Content)
	}
	if redact.New(redact.Secret{Name: "k", Value: viewKey}).Redact(out.Content) != out.Content {
		t.Errorf("the reply shows the model key: %q", out.Content)
	}
	f := out.Attachments[0]
	if !strings.HasPrefix(f.Filename, "output-turn1-1-") {
		t.Errorf("attachment named %q", f.Filename)
	}
	viewOutputShown(t, "the attached output", string(f.Data), "A")
	if in := e.interaction(id); in.ResponseFlags&fakediscord.FlagEphemeral == 0 {
		t.Errorf("the deferral was public (flags %d)", in.ResponseFlags)
	}
}

// TestDiscordViewOutputForgedValue is the attack on Discord: a click in
// thread B whose custom_id names thread A's session is refused privately,
// and nothing of A's output is sent.
func TestDiscordViewOutputForgedValue(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{stack: []stackOption{viewOutputStack}})
	pushViewTurn(e.s.model, "A")
	a := e.mention(discordAlice, "count for A")
	e.waitDone(a, 1)
	aCard := e.waitCard(e.statusRef(a, 1), "A's card", func(m fakediscord.Message) bool { return strings.HasPrefix(m.Content, "✅ Done") })
	forged := discordViewButton(t, aCard, chat.ActionViewOutput)[0]

	pushViewTurn(e.s.model, "B")
	b := e.mention(discordBob, "count for B")
	e.waitDone(b, 1)
	bRef := e.statusRef(b, 1)
	e.waitCard(bRef, "B's card", func(m fakediscord.Message) bool { return strings.HasPrefix(m.Content, "✅ Done") })
	id, err := e.f.ForgeClick(bRef, discordBob, forged)
	if err != nil {
		t.Fatal(err)
	}
	m := e.discordAnswer(id)
	if !m.Ephemeral() || !strings.Contains(m.Content, "belongs to another thread's session") || len(m.Attachments) != 0 || strings.Contains(m.Content, "A line") {
		t.Fatalf("forged click answered: ephemeral %v, %d files, %q", m.Ephemeral(), len(m.Attachments), m.Content)
	}
}

// controlsShown are a Slack card's buttons that act on the turn (Stop and
// the approvals): every button but View output, which a finished card
// keeps.
func controlsShown(m fakeslack.Message) []fakeslack.Button {
	var out []fakeslack.Button
	for _, b := range shownButtons(m) {
		if slack.ActionIDOf(b.ActionID) != chat.ActionViewOutput {
			out = append(out, b)
		}
	}
	return out
}

// controlIDs are the custom_ids of a Discord card's buttons that act on
// the turn: every button but View output.
func controlIDs(ids []string) []string {
	var out []string
	for _, id := range ids {
		if a, _, _ := discord.ParseCustomID(id); a != chat.ActionViewOutput {
			out = append(out, id)
		}
	}
	return out
}

// oldBuildSession stands for a session run by a worker build that predates
// the tool_output query: it answers history only.
func oldBuildSession(ctx workflow.Context, h []session.HistoryEntry) error {
	if err := workflow.SetQueryHandler(ctx, session.QueryHistory, func(session.HistoryRequest) ([]session.HistoryEntry, error) {
		return h, nil
	}); err != nil {
		return err
	}
	workflow.GetSignalChannel(ctx, "end").Receive(ctx, nil)
	return nil
}

// A session whose run has no tool_output query (an older build, mid
// rolling deploy) still answers View output: the real frontend refuses
// the query as unknown, and the bot computes the answer from history;
// the running build answers the query itself, with the same result.
func TestViewOutputFromAnOlderBuild(t *testing.T) {
	s := newStack(t, viewOutputStack)
	queue := s.cfg.Temporal.TaskQueue + "-old-build"
	w := worker.New(s.c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(oldBuildSession, workflow.RegisterOptions{Name: "OldBuildSession"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	h := []session.HistoryEntry{
		{Turn: 1, Msg: session.Message{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{{ID: "c1", Name: "shell", Arguments: shell("ls")}}}},
		{Turn: 1, Msg: session.Message{Role: session.RoleTool, ToolCallID: "c1", Content: "$ ls\nREADME.md\nexit code: 0\n"}},
	}
	id := "session/slack/T1/C1/old-build"
	run, err := s.c.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "OldBuildSession", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.c.TerminateWorkflow(context.Background(), id, run.GetRunID(), "test over") })
	sessions := chat.MeterSessions(chat.NewTemporalSessions(s.c, chat.TemporalOptions{TaskQueue: s.cfg.Temporal.TaskQueue}))
	reader := sessions.(interface {
		ToolOutput(context.Context, string, session.ToolOutputRequest) (session.ToolOutputResponse, error)
	})
	got, err := reader.ToolOutput(s.ctx, id, session.ToolOutputRequest{Turn: 1, CallID: "c1"})
	if err != nil {
		t.Fatalf("older build: %v", err)
	}
	if len(got.Calls) != 1 || got.Calls[0].Output != "$ ls\nREADME.md\nexit code: 0\n" {
		t.Fatalf("older build answered %+v", got)
	}
	if _, err := s.c.QueryWorkflow(s.ctx, id, "", session.QueryToolOutput, session.ToolOutputRequest{}); err == nil {
		t.Fatal("the old build answered tool_output itself; the fallback was not exercised")
	}

	// The current build answers the query itself.
	th := s.thread("view-output-current")
	s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("echo current")), fakeopenai.FinalStep("ok"))
	s.say(th, "ev-1", "run it")
	s.waitState(th, "the turn", func(ts session.TurnState) bool { return ts.Turn == 1 && done(ts) })
	v, err := s.c.QueryWorkflow(s.ctx, th.ID(), "", session.QueryToolOutput, session.ToolOutputRequest{Turn: 1, CallID: "c1"})
	if err != nil {
		t.Fatalf("tool_output on the current build: %v", err)
	}
	var cur session.ToolOutputResponse
	if err := v.Get(&cur); err != nil || len(cur.Calls) != 1 || !strings.Contains(cur.Calls[0].Output, "$ echo current\ncurrent\n") {
		t.Fatalf("current build answered %+v (%v)", cur, err)
	}
}
