package slack_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// posterEnv runs an adapter and returns a session thread to post into.
func posterEnv(t *testing.T, opts slacktest.Options) (*slacktest.Env, chat.Thread) {
	t.Helper()
	env := slacktest.New(t, opts)
	env.Run(newRecCore())
	root := env.Fake.Say(fakeslack.UserMessage{Text: env.Fake.Mention() + " go"}).Message
	return env, chat.Thread{Platform: slack.Platform, Workspace: "T0001", Channel: "C0001", Thread: root.TS}
}

func longAnswer(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "## Step %d\nSome **bold** text with a [link](https://example.com/%d) & more.\n\n", i, i)
		if i%7 == 0 {
			b.WriteString("```go\n" + strings.Repeat("fmt.Println(\"x < y\")\n", 40) + "```\n")
		}
	}
	return b.String()
}

func TestPostTextSplitsWithinLimits(t *testing.T) {
	ctx := testCtx(t)
	env, th := posterEnv(t, slacktest.Options{})
	answer := longAnswer(11000)
	ref, err := env.Adapter.PostText(ctx, th, answer)
	if err != nil {
		t.Fatal(err)
	}
	snap := env.Fake.Snapshot()
	posts := snap.AllCallsTo("chat.postMessage")
	if len(posts) < 3 {
		t.Fatalf("an %d-character answer went out in %d messages", len(answer), len(posts))
	}
	for i, c := range posts {
		if !c.OK() { // the fake enforces msg_too_long and invalid_blocks
			t.Fatalf("part %d rejected by Slack: %s", i, c.Response)
		}
		if strings.Count(c.Text(), "```")%2 != 0 {
			t.Fatalf("part %d has unbalanced code fences", i)
		}
		if c.Form.Get("thread_ts") != th.Thread {
			t.Fatalf("part %d not in the thread", i)
		}
	}
	if ref != snap.BotMessages("C0001", th.Thread)[0].TS {
		t.Fatalf("ref %q is not the first part", ref)
	}
	if !strings.Contains(posts[0].Text(), "*Step 0*") || !strings.Contains(posts[0].Text(), "<https://example.com/0|link>") ||
		!strings.Contains(posts[0].Text(), "&amp; more") {
		t.Fatalf("Markdown not converted: %.300s", posts[0].Text())
	}
	if len(snap.Files) != 0 {
		t.Fatal("an answer below the threshold was uploaded")
	}
}

func TestPostTextUploadsLongAnswers(t *testing.T) {
	ctx := testCtx(t)
	env, th := posterEnv(t, slacktest.Options{Config: func(c *slack.Config) { c.FileUploadThreshold = 5000 }})
	answer := longAnswer(20000)
	ref, err := env.Adapter.PostText(ctx, th, answer)
	if err != nil {
		t.Fatal(err)
	}
	snap := env.Fake.Snapshot()
	if n := len(snap.CallsTo("chat.postMessage")); n != 1 {
		t.Fatalf("want one summary message, got %d", n)
	}
	summary, _ := snap.Message("C0001", ref)
	if !strings.Contains(summary.Text, "*Step 0*") || !strings.Contains(summary.Text, "attached as answer.md") {
		t.Fatalf("summary = %.300q", summary.Text)
	}
	if len(snap.Files) != 1 {
		t.Fatalf("files = %d", len(snap.Files))
	}
	for _, f := range snap.Files {
		if string(f.Content) != answer || f.Name != "answer.md" || f.ThreadTS != th.Thread || f.Channel != "C0001" {
			t.Fatalf("file = %s in %s/%s, %d bytes", f.Name, f.Channel, f.ThreadTS, len(f.Content))
		}
	}

	// If the upload fails, the answer is posted split instead.
	env.Fake.InjectFault("files.getUploadURLExternal", 1, fakeslack.Fault{Error: "not_allowed_token_type"})
	if _, err := env.Adapter.PostText(ctx, th, answer); err != nil {
		t.Fatal(err)
	}
	snap = env.Fake.Snapshot()
	if n := len(snap.CallsTo("chat.postMessage")); n < 6 {
		t.Fatalf("after a failed upload only %d messages were posted", n)
	}
}

func TestEditRetriesAfter429(t *testing.T) {
	ctx := testCtx(t)
	env, th := posterEnv(t, slacktest.Options{})
	ref, err := env.Adapter.Post(ctx, th, chat.Card{Title: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	env.Fake.RateLimit("chat.update", 1, 1)
	if err := env.Adapter.Edit(ctx, th, ref, chat.Card{Title: "v2"}); err != nil {
		t.Fatalf("edit after a 429: %v", err)
	}
	snap := env.Fake.Snapshot()
	calls := snap.AllCallsTo("chat.update")
	if len(calls) != 2 || calls[0].Status != 429 || !calls[1].OK() {
		t.Fatalf("chat.update calls = %+v", calls)
	}
	if gap := calls[1].At.Sub(calls[0].At); gap < time.Second {
		t.Fatalf("retried %v after a 429 with Retry-After: 1", gap)
	}
	if m, _ := snap.Message("C0001", ref); !strings.Contains(m.Text, "v2") {
		t.Fatalf("message after retry = %q", m.Text)
	}

	// Slack keeps refusing: the error surfaces (wrapped) after the retries.
	env.Fake.InjectFault("chat.update", 1, fakeslack.Fault{Error: "message_not_found"})
	if err := env.Adapter.Edit(ctx, th, ref, chat.Card{Title: "v3"}); err == nil || !strings.Contains(err.Error(), "message_not_found") {
		t.Fatalf("edit error = %v", err)
	}
}

func TestEditsStayWithinBudget(t *testing.T) {
	ctx := testCtx(t)
	// The per-minute window itself is covered by TestUpdateBudgetWindow;
	// here a large budget keeps the test short while the per-message
	// interval is checked by the fake on every edit.
	env, th := posterEnv(t, slacktest.Options{
		Fake:   fakeslack.Options{MinUpdateInterval: 100 * time.Millisecond, UpdatesPerMinute: 600},
		Config: func(c *slack.Config) { c.EditInterval = 100 * time.Millisecond },
	})
	var refs []string
	for i := range 3 {
		ref, err := env.Adapter.Post(ctx, th, chat.Card{Title: fmt.Sprintf("status %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	// Three watchers edit their messages as fast as they can, concurrently.
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for _, ref := range refs {
		wg.Go(func() {
			for i := range 6 {
				errs <- env.Adapter.Edit(ctx, th, ref, chat.Card{Title: fmt.Sprintf("edit %d", i)})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	snap := env.Fake.Snapshot()
	if n := len(snap.CallsTo("chat.update")); n != 18 {
		t.Fatalf("%d edits applied, want 18", n)
	}
	if len(snap.Violations) != 0 {
		t.Fatalf("budget violations: %+v", snap.Violations)
	}
}

func TestMentionAndThreadLinkRender(t *testing.T) {
	ctx := testCtx(t)
	env, th := posterEnv(t, slacktest.Options{})
	a := env.Adapter
	card := chat.Card{Title: "Approved by " + a.Mention(chat.User{ID: "U0042", Name: "alice"}), Blocks: []chat.Block{
		{Kind: chat.BlockText, Text: "see " + a.ThreadLink(th) + "; not a mention: <@U0043> <!channel>"},
	}}
	ref, err := a.Post(ctx, th, card)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := env.Fake.Snapshot().Message("C0001", ref)
	raw := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(m.RawBlocks)
	if !strings.Contains(raw, "Approved by <@U0042>") || !strings.Contains(raw, "<https://fake.slack.com/archives/C0001/p"+strings.ReplaceAll(th.Thread, ".", "")+"|thread>") ||
		!strings.Contains(raw, "&lt;@U0043&gt; &lt;!channel&gt;") {
		t.Fatalf("blocks = %s", raw)
	}
	if got := a.Mention(chat.User{ID: "not-an-id", Name: "bob"}); got != "@bob" {
		t.Fatalf("Mention of a non-Slack ID = %q", got)
	}
}

func TestRunFailsOnBadToken(t *testing.T) {
	env := slacktest.New(t, slacktest.Options{Config: func(c *slack.Config) { c.BotToken = "xoxb-revoked" }})
	err := env.Adapter.Run(testCtx(t), newRecCore())
	if err == nil || !strings.Contains(err.Error(), "invalid_auth") || !strings.Contains(err.Error(), "SANDBOT_SLACK_BOT_TOKEN") {
		t.Fatalf("Run with a bad token: %v", err)
	}
	if strings.Contains(err.Error(), "xoxb-revoked") {
		t.Fatal("the token leaked into the error")
	}
	env2 := slacktest.New(t, slacktest.Options{Config: func(c *slack.Config) { c.AppToken = "xapp-revoked" }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = env2.Adapter.Run(ctx, newRecCore())
	if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "SANDBOT_SLACK_APP_TOKEN") {
		t.Fatalf("Run with a bad app token: %v", err)
	}
}
