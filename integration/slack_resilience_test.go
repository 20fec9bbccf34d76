package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

// Slack's limits on a posted message (platform-limits.md).
const (
	slackMessageChars = 4000
	slackSectionChars = 3000
	slackMaxBlocks    = 50
)

// sectionTexts are the texts of a message's section blocks.
func sectionTexts(t *testing.T, raw string) []string {
	t.Helper()
	var blocks []struct {
		Type string `json:"type"`
		Text *struct {
			Text string `json:"text"`
		} `json:"text"`
	}
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
		t.Fatalf("blocks: %v", err)
	}
	var out []string
	for _, b := range blocks {
		if b.Type == "section" && b.Text != nil {
			out = append(out, b.Text.Text)
		}
	}
	return out
}

// TestSlackLongAnswerSplitAndUploaded: an answer beyond the upload
// threshold is posted as a summary message with the full Markdown uploaded
// to the thread as a file (files upload v2); a medium answer is split into
// several messages, each within Slack's text, section and block limits and
// with balanced code fences, together carrying every line once.
func TestSlackLongAnswerSplitAndUploaded(t *testing.T) {
	const threshold = 10000
	e := newSlackEnv(t, slackOptions{adapter: func(c *slack.Config) { c.FileUploadThreshold = threshold }})

	var long strings.Builder
	long.WriteString("## Report\n\n")
	for i := 0; long.Len() < threshold*3/2; i++ {
		fmt.Fprintf(&long, "Paragraph %03d: the **build** of package `pkg%03d` passed; see [its log](https://ci.example.com/%d).\n\n", i, i, i)
	}
	e.s.model.Push(fakeopenai.FinalStep(long.String()))
	th, _ := e.mention(slackAlice, "write a long report")
	end := e.waitDone(th, 1)

	snap := e.wait("the answer file shared in the thread", func(s fakeslack.Snapshot) bool { return len(s.Files) == 1 })
	var file fakeslack.File
	for _, f := range snap.Files {
		file = f
	}
	if !file.Uploaded || !file.Shared || file.Channel != e.channel || file.ThreadTS != th.Thread || file.Name != "answer.md" {
		t.Fatalf("uploaded file: %+v", file)
	}
	if string(file.Content) != long.String() {
		t.Fatalf("the uploaded file holds %d bytes, want the whole %d-byte answer as the model wrote it", len(file.Content), long.Len())
	}
	for _, m := range []string{"files.getUploadURLExternal", "upload", "files.completeUploadExternal"} {
		if n := len(snap.CallsTo(m)); n != 1 {
			t.Fatalf("%s calls = %d, want 1", m, n)
		}
	}
	summary := e.message(end.FinalRef)
	note := fmt.Sprintf("The full answer (%d characters) is attached as answer.md.", long.Len())
	if summary.ThreadTS != th.Thread || !strings.HasPrefix(summary.Text, "*Report*\n\nParagraph 000: the *build* of package `pkg000` passed; see <https://ci.example.com/0|its log>.") ||
		!strings.Contains(summary.Text, note) || fakeslack.TextLen(summary.Text) > slackMessageChars {
		t.Fatalf("summary message (%d chars): %q", fakeslack.TextLen(summary.Text), summary.Text)
	}
	if !strings.Contains(blocksText(summary.RawBlocks), note) {
		t.Fatalf("the summary's blocks do not say where the full answer is:\n%s", blocksText(summary.RawBlocks))
	}
	shares := 0
	for _, m := range e.botMessages(th) {
		if slices.Contains(m.Files, file.ID) {
			shares++
		}
	}
	if shares != 1 {
		t.Fatalf("the file is shared in %d messages of the thread, want 1", shares)
	}

	// A medium answer: below the threshold, above one message; a code
	// block of 120 lines has to be cut.
	var medium strings.Builder
	medium.WriteString("Here is the **plan**.\n\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&medium, "Step %02d: change `file%02d.go` and run the tests again before moving on.\n", i, i)
	}
	medium.WriteString("\n```go\n")
	for i := 0; i < 120; i++ {
		fmt.Fprintf(&medium, "code line %03d: x := compute(%d) // keep *this* as is\n", i, i)
	}
	medium.WriteString("```\n\n")
	for i := 20; i < 40; i++ {
		fmt.Fprintf(&medium, "Step %02d: check `file%02d.go` once more and note what changed.\n", i, i)
	}
	if medium.Len() >= threshold || medium.Len() < 2*slackMessageChars {
		t.Fatalf("the medium answer is %d bytes; the test wants it to need three messages without an upload", medium.Len())
	}
	e.s.model.Push(fakeopenai.FinalStep(medium.String()))
	e.reply(th, slackAlice, "and the plan?")
	end = e.waitDone(th, 2)
	e.idle()
	snap = e.f.Snapshot()
	if len(snap.Files) != 1 {
		t.Fatalf("the medium answer was uploaded (%d files); it is below the %d-character threshold", len(snap.Files), threshold)
	}
	var parts []fakeslack.Message
	for _, m := range e.botMessages(th) {
		if m.TS >= end.FinalRef && m.TS != end.StatusRef {
			parts = append(parts, m)
		}
	}
	if len(parts) < 3 || parts[0].TS != end.FinalRef {
		t.Fatalf("the medium answer was posted as %d messages from %s, want at least 3 from the recorded answer", len(parts), end.FinalRef)
	}
	var all strings.Builder
	for i, p := range parts {
		if n := fakeslack.TextLen(p.Text); n > slackMessageChars || strings.Count(p.Text, "```")%2 != 0 {
			t.Fatalf("part %d: %d characters, %d fences:\n%s", i+1, n, strings.Count(p.Text, "```"), p.Text)
		}
		secs := sectionTexts(t, p.RawBlocks)
		if len(secs) == 0 || len(p.Blocks().BlockSet) > slackMaxBlocks || strings.Join(secs, "") == "" {
			t.Fatalf("part %d has %d sections in %d blocks", i+1, len(secs), len(p.Blocks().BlockSet))
		}
		for j, s := range secs {
			if fakeslack.TextLen(s) > slackSectionChars || strings.Count(s, "```")%2 != 0 {
				t.Fatalf("part %d section %d: %d characters, %d fences", i+1, j+1, fakeslack.TextLen(s), strings.Count(s, "```"))
			}
		}
		all.WriteString(p.Text + "\n")
	}
	text := all.String()
	for i := 0; i < 120; i++ {
		line := fmt.Sprintf("code line %03d: x := compute(%d) // keep *this* as is", i, i)
		if n := strings.Count(text, line); n != 1 {
			t.Fatalf("code line %d appears %d times in the parts, want once, unchanged inside the code block", i, n)
		}
	}
	for i := 0; i < 40; i++ {
		if n := strings.Count(text, fmt.Sprintf("Step %02d: ", i)); n != 1 {
			t.Fatalf("step %d appears %d times in the parts, want once", i, n)
		}
	}
	if !strings.HasPrefix(parts[0].Text, "Here is the *plan*.") {
		t.Fatalf("first part: %q", parts[0].Text[:min(80, len(parts[0].Text))])
	}
	e.checkClean()
}

// TestSlackRateLimitedUpdateIsRetried: Slack answers a chat.update with 429
// and Retry-After; the adapter retries the same edit after the delay, and
// the status message ends showing the finished turn. No edit is lost.
func TestSlackRateLimitedUpdateIsRetried(t *testing.T) {
	const retryAfter = 2 // seconds
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell(gated+"echo ok > limited.txt")),
		fakeopenai.FinalStep("Finished despite the 429."),
	)
	th, _ := e.mention(slackAlice, "run through a rate limit")
	ref := e.statusRef(th, 1)
	buttons := e.approvalButtons(ref)
	e.click(ref, slackAlice, buttons[chat.ActionApprove], nil)
	e.waitMessage(ref, "the approved command running", func(m fakeslack.Message) bool {
		return hasLine(messageText(m), "⏳", "limited.txt") && len(approvalShown(m)) == 0
	})

	// The next chat.update (the one that shows the command's end) is
	// refused once.
	e.f.RateLimit("chat.update", retryAfter, 1)
	e.release(t)
	end := e.waitDone(th, 1)
	final := e.waitMessage(ref, "the final status", func(m fakeslack.Message) bool { return hasLine(messageText(m), "✅ Done") })
	text := messageText(final)
	if !hasLine(text, "✅", "limited.txt", "exit 0") || !strings.Contains(text, "approved by "+slackMention(slackAlice)) {
		t.Fatalf("final status message:\n%s", text)
	}
	if ans := e.message(end.FinalRef); ans.Text != "Finished despite the 429." {
		t.Fatalf("answer = %q", ans.Text)
	}

	snap := e.f.Snapshot()
	var calls []fakeslack.Call
	for _, c := range snap.AllCallsTo("chat.update") {
		if c.Form.Get("ts") == ref {
			calls = append(calls, c)
		}
	}
	limited := slices.IndexFunc(calls, func(c fakeslack.Call) bool { return c.Status == 429 })
	if limited < 0 || limited == len(calls)-1 {
		t.Fatalf("no rate-limited chat.update followed by another: %s", dump(calls))
	}
	retry := calls[limited+1]
	if !retry.OK() || retry.RawBlocks != calls[limited].RawBlocks {
		t.Fatalf("the call after the 429 should be the same edit, accepted:\n429: %s\nnext: %s (%d %q)", blocksText(calls[limited].RawBlocks), blocksText(retry.RawBlocks), retry.Status, retry.Error)
	}
	if gap := retry.At.Sub(calls[limited].At); gap < retryAfter*time.Second {
		t.Fatalf("the edit was retried %v after the 429; Retry-After asked for %ds", gap, retryAfter)
	}
	if n := len(slices.DeleteFunc(slices.Clone(calls), func(c fakeslack.Call) bool { return c.Status != 429 })); n != 1 {
		t.Fatalf("%d chat.update calls were rate limited; one fault was injected", n)
	}
	e.idle()
	e.checkClean("http 429")
}

// TestSlackSocketReconnects: the Socket Mode connection drops without a
// close frame while a turn waits for approval, and later Slack asks for a
// reconnect (refresh_requested). The adapter reconnects on its own each
// time: the click after the drop and the message after the refresh are
// delivered over the new connections and handled.
func TestSlackSocketReconnects(t *testing.T) {
	e := newSlackEnv(t, slackOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo one > one.txt")),
		fakeopenai.FinalStep("turn one"),
	)
	th, _ := e.mention(slackAlice, "first")
	ref := e.statusRef(th, 1)
	buttons := e.approvalButtons(ref)

	reconnected := func(what string, before int) int {
		t.Helper()
		s := e.wait(what, func(s fakeslack.Snapshot) bool { return s.Connections > before && s.Open == 1 })
		return s.Connections
	}
	conns := e.f.Snapshot().Connections
	e.f.DropConnections()
	conns = reconnected("a new connection after the drop", conns)
	click := e.click(ref, slackAlice, buttons[chat.ActionApprove], nil)
	end := e.waitDone(th, 1)
	if ans := e.message(end.FinalRef); ans.Text != "turn one" {
		t.Fatalf("turn 1 answer = %q", ans.Text)
	}
	if got, ok := workspaceFile(t, e.s, th, "one.txt"); !ok || got != "one\n" {
		t.Fatalf("one.txt = %q, %v", got, ok)
	}

	e.f.Disconnect("refresh_requested")
	conns = reconnected("a new connection after the refresh request", conns)
	e.s.model.Push(fakeopenai.FinalStep("turn two"))
	second := e.reply(th, slackAlice, "second")
	end = e.waitDone(th, 2)
	if ans := e.message(end.FinalRef); ans.Text != "turn two" {
		t.Fatalf("turn 2 answer = %q", ans.Text)
	}
	e.idle()
	snap := e.f.Snapshot()
	connOf := func(id string) int {
		for _, env := range snap.Sent {
			if env.ID == id {
				return env.Conn
			}
		}
		return 0
	}
	if c := connOf(click); c < 2 {
		t.Fatalf("the click went out on connection %d, want one opened after the drop", c)
	}
	if c := connOf(second.Envelopes[0]); c != conns {
		t.Fatalf("the second message went out on connection %d, want the newest (%d)", c, conns)
	}
	if n := len(e.s.model.Requests()); n != 3 {
		t.Fatalf("model requests = %d, want 3 (two for turn 1, one for turn 2)", n)
	}
	if got := e.botTS(th); len(got) != 4 && len(got) != 3 {
		t.Fatalf("bot messages in the thread = %v", got)
	}
	e.checkClean()
}

// TestSlackRestartMidTurn: the bot (adapter and core) stops while a turn
// waits for approval. A new bot resumes watching the turn and edits the
// same status message, keeping the per-message edit interval although it
// cannot know when the old bot last touched the message; the Approve button
// the old bot posted still works; no second status message or answer is
// posted. The edit interval is 1 s here, longer than a restart takes, so a
// new bot that edits at once is caught every time.
func TestSlackRestartMidTurn(t *testing.T) {
	const interval = time.Second
	e := newSlackEnv(t, slackOptions{fake: fakeslack.Options{MinUpdateInterval: interval}})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo survived > restart.txt")),
		fakeopenai.FinalStep("Done across a restart."),
	)
	th, _ := e.mention(slackAlice, "survive a restart")
	ref := e.statusRef(th, 1)
	old := e.approvalButtons(ref)[chat.ActionApprove]

	before := versions(e.f.Snapshot(), ref)
	restarted := time.Now()
	e.restart()
	// Resume watches the turn again and renders it onto the old message.
	snap := e.wait("the new bot edits the old status message", func(s fakeslack.Snapshot) bool {
		vs := versions(s, ref)
		return len(vs) > len(before) && strings.Contains(vs[len(before)].raw, old.Value)
	})
	if gap := versions(snap, ref)[len(before)].at.Sub(before[len(before)-1].at); gap < interval {
		t.Errorf("the new bot edited the status message %v after the old bot last posted or edited it; the edit interval is %v", gap, interval)
	}
	// The old button's data, as the old bot posted it.
	e.click(ref, slackAlice, old, &old.Value)
	e.waitMessage(ref, "the decision on the same message", func(m fakeslack.Message) bool {
		return strings.Contains(messageText(m), "approved by "+slackMention(slackAlice)) && len(approvalShown(m)) == 0
	})
	end := e.waitDone(th, 1)
	e.waitMessage(ref, "the final status", func(m fakeslack.Message) bool { return hasLine(messageText(m), "✅ Done") })
	if end.StatusRef != ref {
		t.Fatalf("status ref %s, want the original %s", end.StatusRef, ref)
	}
	if got, ok := workspaceFile(t, e.s, th, "restart.txt"); !ok || got != "survived\n" {
		t.Fatalf("restart.txt = %q, %v", got, ok)
	}
	e.idle()
	e.waitWatcher(th)
	// A too-early first edit after the restart is reported above; the
	// fake sees it as a per-message violation too when the old bot's last
	// version was an edit.
	afterRestart := func(v fakeslack.Violation) bool {
		return v.Kind == "per_message" && v.TS == ref && v.At.After(restarted)
	}
	if got := e.botTS(th); !slices.Equal(got, []string{ref, end.FinalRef}) {
		t.Fatalf("bot messages in the thread = %v, want only the status message %s and one answer %s", got, ref, end.FinalRef)
	}
	if ans := e.message(end.FinalRef); ans.Text != "Done across a restart." {
		t.Fatalf("answer = %q", ans.Text)
	}
	notices := 0
	for _, c := range e.f.Snapshot().CallsTo("chat.postMessage") {
		if isApprovalNotice(c.Text()) {
			// Posted once, by whichever bot showed the buttons first
			// (the old one may die before it could).
			notices++
			continue
		}
		if c.At.After(restarted) && postedTS(c) != end.FinalRef {
			t.Fatalf("the new bot posted another message: %s", c.Text())
		}
	}
	if notices != 1 {
		t.Fatalf("the approvers were told %d times, want once", notices)
	}
	if ts := e.state(th); ts.Status != session.StatusComplete || ts.ToolCalls[0].Decision == nil || ts.ToolCalls[0].Decision.User.ID != slackAlice {
		t.Fatalf("end state: %s", dump(ts))
	}
	e.checkViolations(afterRestart)
	e.checkCalls()
}
