package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

// The Slack scenario tests drive the whole product through Slack's wire
// protocol: a user acts in the fake Slack, the real slack-go client in the
// adapter receives it over Socket Mode, the core relays it to the session
// workflow on the embedded Temporal server, the real worker runs the agent
// loop against the fake model and the local sandbox, and the bot's Web API
// calls land back in the fake. They do not run in parallel: a bot that
// starts resumes every Slack session with an active turn on the shared
// server, so each test ends its turns.

// gated is a command that runs until the test creates "release" next to
// "started" in the workspace, so a test can see the turn while the command
// runs, without depending on timing.
const gated = "touch started; until [ -f release ]; do sleep 0.05; done; "

// release lets the gated command of the running turn finish.
func (e *slackEnv) release(t *testing.T) {
	t.Helper()
	started := findWorkspaceFile(t, e.s, "started")
	if err := os.WriteFile(filepath.Join(filepath.Dir(started), "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSlackMentionRunsTurnWithApproval: a mention opens a thread that is
// the session; one status message in the thread is edited in place
// (chat.update) as the turn advances; the Approve button approves and the
// message says who did; the final answer is its own message, in mrkdwn; the
// approved command really ran.
func TestSlackMentionRunsTurnWithApproval(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	const answer = "Wrote **hello.txt** with `echo`; see [the docs](https://example.com/docs).\n\n- first\n- second"
	const wantMrkdwn = "Wrote *hello.txt* with `echo`; see <https://example.com/docs|the docs>.\n\n• first\n• second"
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("ls -la")),
		fakeopenai.ToolCallStep("c2", "shell", shell(gated+"echo hi > hello.txt")),
		fakeopenai.FinalStep(answer),
	)
	th, sent := e.mention(slackAlice, "write hello.txt")
	if len(sent.Envelopes) != 2 {
		t.Fatalf("a channel mention is delivered as app_mention and message; sent %d envelopes", len(sent.Envelopes))
	}

	ref := e.statusRef(th, 1)
	if st := e.message(ref); st.ThreadTS != th.Thread || st.BotID == "" {
		t.Fatalf("status message %+v should be the bot's reply in the thread under the mention %s", st, th.Thread)
	}
	if info := e.s.info(th); info.Owner.ID != slackAlice || info.Location != th || info.Title != "write hello.txt" {
		t.Fatalf("session info: %s", dump(info))
	}
	buttons := e.approvalButtons(ref)
	card := messageText(e.message(ref))
	if !hasLine(card, "Waiting for approval") || !hasLine(card, "✅", "`ls -la`", "exit 0") || !strings.Contains(card, "hello.txt") {
		t.Fatalf("the status message should show the completed read-only call and the pending one:\n%s", card)
	}
	if got := []string{buttons[chat.ActionApprove].Text, buttons[chat.ActionApproveAlways].Text, buttons[chat.ActionReject].Text}; !slices.Equal(got, []string{"Approve", "Approve always", "Reject"}) {
		t.Fatalf("button labels = %q", got)
	}
	if _, ok := workspaceFile(t, e.s, th, "started"); ok {
		t.Fatal("the command ran before it was approved")
	}

	e.click(ref, slackAlice, buttons[chat.ActionApprove], nil)
	e.waitMessage(ref, "the running command and who approved it", func(m fakeslack.Message) bool {
		text := messageText(m)
		return hasLine(text, "⏳", "hello.txt") && strings.Contains(text, "approved by "+slackMention(slackAlice)) && len(approvalShown(m)) == 0
	})
	e.release(t)

	end := e.waitDone(th, 1)
	if end.Status != session.StatusComplete || len(end.ToolCalls) != 2 || end.ToolCalls[1].Status != session.CallCompleted {
		t.Fatalf("end state: %s", dump(end))
	}
	if d := end.ToolCalls[1].Decision; d == nil || d.User.ID != slackAlice || d.Decision != session.DecisionApprove {
		t.Fatalf("decision: %s", dump(end.ToolCalls[1]))
	}
	if got, ok := workspaceFile(t, e.s, th, "hello.txt"); !ok || got != "hi\n" {
		t.Fatalf("hello.txt = %q, %v", got, ok)
	}
	final := e.waitMessage(ref, "final status", func(m fakeslack.Message) bool { return hasLine(messageText(m), "✅ Done") })
	if text := messageText(final); !hasLine(text, "✅", "hello.txt", "exit 0") || !strings.Contains(text, "approved by "+slackMention(slackAlice)) {
		t.Fatalf("final status message:\n%s", text)
	}

	// The answer is its own message in the thread, converted to mrkdwn.
	ans := e.message(end.FinalRef)
	if ans.ThreadTS != th.Thread || ans.BotID == "" || ans.Text != wantMrkdwn || blocksText(ans.RawBlocks) != wantMrkdwn {
		t.Fatalf("answer message %+v\nwant text %q in the thread", ans, wantMrkdwn)
	}

	// One status message, edited in place, and one answer: nothing else.
	if got := e.botTS(th); !slices.Equal(got, []string{ref, end.FinalRef}) {
		t.Fatalf("bot messages in the thread = %v, want the status message %s and the answer %s", got, ref, end.FinalRef)
	}
	snap := e.f.Snapshot()
	for _, c := range snap.AllCallsTo("chat.update") {
		if c.Form.Get("ts") != ref || c.Form.Get("channel") != e.channel {
			t.Fatalf("chat.update of %s/%s; the only message the bot edits is the status message %s", c.Form.Get("channel"), c.Form.Get("ts"), ref)
		}
	}
	// The versions Slack received advance: waiting for approval, then the
	// approved command running, then done.
	vs := versions(snap, ref)
	waiting := slices.IndexFunc(vs, func(v shown) bool { return hasLine(v.text, "Waiting for approval") })
	running := slices.IndexFunc(vs, func(v shown) bool { return hasLine(v.text, "⏳", "hello.txt") })
	if len(vs) < 3 || waiting < 0 || running <= waiting || !hasLine(vs[len(vs)-1].text, "✅ Done") {
		t.Fatalf("status message versions do not show the turn advancing (waiting %d, running %d of %d):\n%s", waiting, running, len(vs), dump(vs))
	}
	e.idle()
	e.checkClean()
}

// TestSlackRejectWithReason: Reject opens a modal (views.open); its
// submission rejects the command with the reason, the model's next request
// carries the reason, and the status message says who rejected and why.
func TestSlackRejectWithReason(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("rm -rf src; touch rejected-ran")),
		fakeopenai.FinalStep("I left src alone."),
	)
	th, _ := e.mention(slackAlice, "clean up")
	ref := e.statusRef(th, 1)
	buttons := e.approvalButtons(ref)

	e.click(ref, slackAlice, buttons[chat.ActionReject], nil)
	e.wait("the reject modal", func(s fakeslack.Snapshot) bool { return len(s.CallsTo("views.open")) == 1 })
	e.idle()
	views := e.f.Views()
	if len(views) != 1 || views[0].User != "" && views[0].User != slackAlice {
		t.Fatalf("views opened: %+v", views)
	}
	view := views[0]
	// Opening the modal decided nothing.
	if ts := e.state(th); ts.Pending == nil || ts.Pending.CallID != "c1" || ts.ToolCalls[0].Decision != nil {
		t.Fatalf("opening the modal changed the approval: %s", dump(ts))
	}
	if m := e.message(ref); len(approvalShown(m)) != 3 {
		t.Fatalf("the buttons went away before the modal was submitted: %+v", shownButtons(m))
	}

	const reason = "src is precious, keep it"
	input := reasonInput(t, view.Raw)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := e.f.SubmitView(ctx, view.ID, slackAlice, map[string]string{input: reason}); err != nil {
		t.Fatal(err)
	}
	e.waitMessage(ref, "the rejection on the status message", func(m fakeslack.Message) bool {
		text := messageText(m)
		return hasLine(text, "🚫", "rm -rf src; touch rejected-ran") &&
			hasLine(text, "rejected by "+slackMention(slackAlice)+": "+reason) && len(approvalShown(m)) == 0
	})
	end := e.waitDone(th, 1)
	c := end.ToolCalls[0]
	if c.Status != session.CallRejected || c.Decision == nil || c.Decision.Reason != reason || c.Decision.User.ID != slackAlice {
		t.Fatalf("rejected call: %s", dump(c))
	}
	reqs := e.s.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2", len(reqs))
	}
	told := ""
	for _, m := range reqs[1].Body.Messages {
		if m.Role == "tool" && m.ToolCallID == "c1" {
			told = m.Content
		}
	}
	if !strings.Contains(told, reason) || !strings.Contains(told, "reject") {
		t.Fatalf("the model's tool result for c1 should say it was rejected and why; got %q", told)
	}
	if ans := e.message(end.FinalRef); ans.Text != "I left src alone." || ans.ThreadTS != th.Thread {
		t.Fatalf("answer: %+v", ans)
	}
	if _, ok := workspaceFile(t, e.s, th, "rejected-ran"); ok {
		t.Fatal("the rejected command ran")
	}
	e.idle()
	e.checkClean()
}

// reasonInput is the action_id of the modal's text input, read from the
// view the bot opened (what Slack would render).
func reasonInput(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v struct {
		Blocks []struct {
			Type    string `json:"type"`
			Element struct {
				Type     string `json:"type"`
				ActionID string `json:"action_id"`
			} `json:"element"`
		} `json:"blocks"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("modal: %v", err)
	}
	for _, b := range v.Blocks {
		if b.Type == "input" && b.Element.Type == "plain_text_input" {
			return b.Element.ActionID
		}
	}
	t.Fatalf("the reject modal has no text input: %s", raw)
	return ""
}

// TestSlackUnauthorizedClick: a user the bot does not serve, and a user
// who may use the bot but not approve, are each told so in an ephemeral
// message (chat.postEphemeral) and change nothing; a configured approver
// then decides the approval.
func TestSlackUnauthorizedClick(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo deployed > deploy.txt")),
		fakeopenai.FinalStep("Deployed."),
	)
	th, _ := e.mention(slackAlice, "deploy")
	ref := e.statusRef(th, 1)
	buttons := e.approvalButtons(ref)
	before := e.message(ref)

	// carol is not on the allowed list: refused at the edge.
	e.click(ref, slackCarol, buttons[chat.ActionApprove], nil)
	snap := e.wait("an ephemeral answer for carol", func(s fakeslack.Snapshot) bool { return len(ephemerals(s, slackCarol)) == 1 })
	if c := ephemerals(snap, slackCarol)[0]; c.Text() != "You are not on this bot's list of allowed users." ||
		c.Form.Get("channel") != e.channel || c.Form.Get("thread_ts") != th.Thread {
		t.Fatalf("carol's answer: %v", c.Form)
	}
	// bob may use the bot but is neither owner nor approver: the
	// workflow refuses, and only bob hears about it.
	e.click(ref, slackBob, buttons[chat.ActionApprove], nil)
	snap = e.wait("an ephemeral answer for bob", func(s fakeslack.Snapshot) bool { return len(ephemerals(s, slackBob)) == 1 })
	if c := ephemerals(snap, slackBob)[0]; !strings.Contains(c.Text(), "may not approve") || c.Form.Get("thread_ts") != th.Thread {
		t.Fatalf("bob's answer: %v", c.Form)
	}
	e.idle()

	ts := e.state(th)
	if ts.Status != session.StatusAwaitingApproval || ts.Pending == nil || ts.Pending.CallID != "c1" || ts.ToolCalls[0].Decision != nil {
		t.Fatalf("a refused click changed the approval: %s", dump(ts))
	}
	if now := e.message(ref); now.RawBlocks != before.RawBlocks || now.Updates != before.Updates || len(approvalShown(now)) != 3 {
		t.Fatalf("the status message changed after refused clicks:\n%s", messageText(now))
	}
	if got := e.botTS(th); !slices.Equal(got, []string{ref}) {
		t.Fatalf("bot messages in the thread = %v, want only the status message", got)
	}
	if _, ok := workspaceFile(t, e.s, th, "deploy.txt"); ok {
		t.Fatal("the command ran after refused clicks")
	}

	// dave is a configured approver: his click counts.
	e.click(ref, slackDave, buttons[chat.ActionApprove], nil)
	e.waitMessage(ref, "approved by dave", func(m fakeslack.Message) bool {
		return strings.Contains(messageText(m), "approved by "+slackMention(slackDave)) && len(approvalShown(m)) == 0
	})
	end := e.waitDone(th, 1)
	if ans := e.message(end.FinalRef); ans.Text != "Deployed." {
		t.Fatalf("answer = %q", ans.Text)
	}
	if got, ok := workspaceFile(t, e.s, th, "deploy.txt"); !ok || got != "deployed\n" {
		t.Fatalf("deploy.txt = %q, %v", got, ok)
	}
	if n := len(ephemerals(e.f.Snapshot(), slackDave)); n != 0 {
		t.Fatalf("dave got %d ephemeral answers; an accepted click needs none", n)
	}
	e.idle()
	e.checkClean()
}

// TestSlackRetriedEventRunsOneTurn: one user message arrives as an
// app_mention and a message event, and Slack retries both (same event_id);
// an edit of the message and another bot's message in the thread follow;
// after a bot restart (which forgets what the adapter saw) Slack retries
// again. Exactly one turn runs and one answer is posted.
func TestSlackRetriedEventRunsOneTurn(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(fakeopenai.FinalStep("Only once."), fakeopenai.FinalStep("A SECOND TURN RAN"))
	th, sent := e.mention(slackAlice, "answer once")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	redeliver := func() {
		t.Helper()
		for _, id := range sent.Envelopes {
			if _, err := e.f.Redeliver(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	redeliver()
	end := e.waitDone(th, 1)
	e.idle()

	// Edits and bots never start turns.
	edit, err := e.f.EditPayload(e.channel, th.Thread, e.f.Mention()+" answer once, edited")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.f.SendEvent(ctx, edit); err != nil {
		t.Fatal(err)
	}
	e.send(fakeslack.UserMessage{BotID: "B0OTHER", SubType: "bot_message", Channel: e.channel, ThreadTS: th.Thread,
		Text: e.f.Mention() + " please run something"})
	e.idle()

	want := []string{end.FinalRef}
	if end.StatusRef != "" {
		want = []string{end.StatusRef, end.FinalRef}
	}
	check := func(when string) {
		t.Helper()
		if n := len(e.s.model.Requests()); n != 1 || e.s.model.Pending() != 1 {
			t.Fatalf("%s: the model was asked %d times (%d steps left); one message must run one turn", when, n, e.s.model.Pending())
		}
		if ts := e.state(th); ts.Turn != 1 || ts.Queued != 0 || ts.Status != session.StatusComplete {
			t.Fatalf("%s: state %s", when, dump(ts))
		}
		if got := e.botTS(th); !slices.Equal(got, want) {
			t.Fatalf("%s: bot messages in the thread = %v, want %v", when, got, want)
		}
	}
	check("after retries, an edit and a bot message")
	if ans := e.message(end.FinalRef); ans.Text != "Only once." {
		t.Fatalf("answer = %q", ans.Text)
	}

	// A new bot has an empty memory of events: the workflow itself must
	// recognise the retried event.
	e.restart()
	redeliver()
	e.idle()
	e.waitWatcher(th)
	check("after a restart and another retry")
	e.checkClean()
}
