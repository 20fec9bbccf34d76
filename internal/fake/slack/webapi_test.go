package fakeslack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

func newClient(t testing.TB, opts Options) (*Server, *slack.Client) {
	t.Helper()
	s := New(opts)
	t.Cleanup(s.Close)
	o := s.Options()
	return s, slack.New(o.BotToken, slack.OptionAPIURL(s.URL()), slack.OptionAppLevelToken(o.AppToken))
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func slackErr(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

func TestAuthAndTokens(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	r, err := api.AuthTestContext(ctx)
	if err != nil {
		t.Fatalf("auth.test: %v", err)
	}
	if r.UserID != "UBOT" || r.BotID != "BBOT" || r.TeamID != "T0001" {
		t.Fatalf("auth.test = %+v", r)
	}
	bad := slack.New("xoxb-wrong", slack.OptionAPIURL(s.URL()))
	if _, err := bad.AuthTestContext(ctx); slackErr(err) != "invalid_auth" {
		t.Fatalf("wrong token: err = %v, want invalid_auth", err)
	}
	if _, _, err := bad.PostMessageContext(ctx, "C1", slack.MsgOptionText("hi", false)); slackErr(err) != "invalid_auth" {
		t.Fatalf("post with wrong token: err = %v", err)
	}
	// The app-level token is for apps.connections.open only, and vice versa.
	if _, _, err := api.StartSocketModeContext(ctx); err != nil {
		t.Fatalf("apps.connections.open with xapp: %v", err)
	}
	noApp := slack.New(s.Options().BotToken, slack.OptionAPIURL(s.URL()), slack.OptionAppLevelToken(s.Options().BotToken))
	if _, _, err := noApp.StartSocketModeContext(ctx); slackErr(err) != "invalid_auth" {
		t.Fatalf("apps.connections.open with a bot token: err = %v", err)
	}
	if len(s.Snapshot().Messages) != 0 {
		t.Fatal("a rejected call stored a message")
	}
}

func TestPostUpdateRepliesPermalink(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	root := s.Say(UserMessage{Text: s.Mention() + " hello"}).Message
	blocks := []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", "*working*", false, false), nil, nil),
		slack.NewActionBlock("a1", slack.NewButtonBlockElement("approve", "v1", slack.NewTextBlockObject("plain_text", "Approve", false, false))),
	}
	ch, ts, err := api.PostMessageContext(ctx, "C0001", slack.MsgOptionText("working", false),
		slack.MsgOptionBlocks(blocks...), slack.MsgOptionTS(root.TS))
	if err != nil || ch != "C0001" || ts == "" {
		t.Fatalf("postMessage = %q %q %v", ch, ts, err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0001", ts, slack.MsgOptionText("done", false)); err != nil {
		t.Fatalf("update: %v", err)
	}
	snap := s.Snapshot()
	post := snap.CallsTo("chat.postMessage")[0]
	if post.Form.Get("thread_ts") != root.TS || len(post.Blocks.BlockSet) != 2 || post.Form.Has("token") {
		t.Fatalf("recorded post = %+v", post)
	}
	m, ok := snap.Message("C0001", ts)
	if !ok || m.Text != "done" || m.Updates != 1 || m.ThreadTS != root.TS || m.BotID != "BBOT" {
		t.Fatalf("stored message = %+v", m)
	}

	msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0001", Timestamp: root.TS})
	if err != nil || len(msgs) != 2 {
		t.Fatalf("replies = %d messages, %v", len(msgs), err)
	}
	if msgs[0].Text != root.Text || msgs[0].User != "U0001" || msgs[1].BotID != "BBOT" || msgs[1].ThreadTimestamp != root.TS {
		t.Fatalf("replies = %+v", msgs)
	}
	if _, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C0001", Timestamp: "1.2"}); slackErr(err) != "thread_not_found" {
		t.Fatalf("replies of unknown thread: %v", err)
	}
	link, err := api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: "C0001", Ts: ts})
	if err != nil || !strings.Contains(link, "/archives/C0001/p") || !strings.Contains(link, "thread_ts="+root.TS) {
		t.Fatalf("permalink = %q, %v", link, err)
	}
	if _, err := api.PostEphemeralContext(ctx, "C0001", "U0001", slack.MsgOptionText("only you", false)); err != nil {
		t.Fatalf("postEphemeral: %v", err)
	}
	if got := s.Snapshot().CallsTo("chat.postEphemeral")[0].Form.Get("user"); got != "U0001" {
		t.Fatalf("ephemeral user = %q", got)
	}
	// Updating a message the bot did not post, or one that does not exist.
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0001", root.TS, slack.MsgOptionText("x", false)); slackErr(err) != "cant_update_message" {
		t.Fatalf("update user message: %v", err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0001", "9.9", slack.MsgOptionText("x", false)); slackErr(err) != "message_not_found" {
		t.Fatalf("update unknown message: %v", err)
	}
}

func TestLimits(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	sec := func(n int) slack.Block {
		return slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", strings.Repeat("a", n), false, false), nil, nil)
	}
	btn := func(id, value string) *slack.ButtonBlockElement {
		return slack.NewButtonBlockElement(id, value, slack.NewTextBlockObject("plain_text", "B", false, false))
	}
	many := make([]slack.Block, 51)
	for i := range many {
		many[i] = sec(10)
	}
	cases := []struct {
		name string
		opts []slack.MsgOption
		want string
	}{
		{"text at limit", []slack.MsgOption{slack.MsgOptionText(strings.Repeat("x", 4000), false)}, ""},
		{"text too long", []slack.MsgOption{slack.MsgOptionText(strings.Repeat("x", 4001), false)}, "msg_too_long"},
		{"emoji count twice", []slack.MsgOption{slack.MsgOptionText(strings.Repeat("😀", 2001), false)}, "msg_too_long"},
		{"no text", nil, "no_text"},
		{"section at limit", []slack.MsgOption{slack.MsgOptionBlocks(sec(3000))}, ""},
		{"section too long", []slack.MsgOption{slack.MsgOptionBlocks(sec(3001))}, "invalid_blocks"},
		{"50 blocks", []slack.MsgOption{slack.MsgOptionBlocks(many[:50]...)}, ""},
		{"51 blocks", []slack.MsgOption{slack.MsgOptionBlocks(many...)}, "invalid_blocks"},
		{"button value too long", []slack.MsgOption{slack.MsgOptionBlocks(slack.NewActionBlock("a", btn("approve", strings.Repeat("v", 2001))))}, "invalid_blocks"},
		{"duplicate action_id", []slack.MsgOption{slack.MsgOptionBlocks(slack.NewActionBlock("a", btn("approve", "1"), btn("approve", "2")))}, "invalid_blocks"},
		{"same action_id in two blocks", []slack.MsgOption{slack.MsgOptionBlocks(slack.NewActionBlock("a", btn("approve", "1")), slack.NewActionBlock("b", btn("approve", "2")))}, ""},
		{"duplicate block_id", []slack.MsgOption{slack.MsgOptionBlocks(slack.NewActionBlock("a", btn("x", "1")), slack.NewActionBlock("a", btn("y", "2")))}, "invalid_blocks"},
		{"empty section", []slack.MsgOption{slack.MsgOptionBlocks(sec(0))}, "invalid_blocks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := api.PostMessageContext(ctx, "C0001", tc.opts...)
			if got := slackErr(err); got != tc.want {
				t.Fatalf("err = %q, want %q", got, tc.want)
			}
		})
	}
	// invalid_blocks carries the reasons, as Slack's response does.
	var found bool
	for _, c := range s.Snapshot().AllCallsTo("chat.postMessage") {
		if c.Error == "invalid_blocks" && strings.Contains(string(c.Response), "at most 3000 characters") {
			found = true
		}
	}
	if !found {
		t.Fatal("no invalid_blocks response explains the section limit")
	}
}

func TestRateLimitFault(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	_, ts, err := api.PostMessageContext(ctx, "C0001", slack.MsgOptionText("v1", false))
	if err != nil {
		t.Fatal(err)
	}
	s.RateLimit("chat.update", 7, 2)
	for i := range 2 {
		_, _, _, err := api.UpdateMessageContext(ctx, "C0001", ts, slack.MsgOptionText("v2", false))
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
			t.Fatalf("update %d: err = %v, want RateLimitedError after 7s", i, err)
		}
	}
	if m, _ := s.Snapshot().Message("C0001", ts); m.Text != "v1" {
		t.Fatalf("a rate-limited update changed the message: %q", m.Text)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0001", ts, slack.MsgOptionText("v3", false)); err != nil {
		t.Fatalf("third update: %v", err)
	}
	s.InjectFault("chat.postMessage", 1, Fault{Error: "channel_not_found"})
	if _, _, err := api.PostMessageContext(ctx, "C0001", slack.MsgOptionText("x", false)); slackErr(err) != "channel_not_found" {
		t.Fatalf("injected error: %v", err)
	}
	s.InjectFault("chat.postMessage", 1, Fault{Status: 500})
	var sce slack.StatusCodeError
	if _, _, err := api.PostMessageContext(ctx, "C0001", slack.MsgOptionText("x", false)); !errors.As(err, &sce) || sce.Code != 500 {
		t.Fatalf("injected 500: %v", err)
	}
}

func TestUpdateBudget(t *testing.T) {
	s, api := newClient(t, Options{UpdatesPerMinute: 3, MinUpdateInterval: time.Hour, UpdateBurst: 1})
	ctx := testCtx(t)
	_, ts, err := api.PostMessageContext(ctx, "C0001", slack.MsgOptionText("v", false))
	if err != nil {
		t.Fatal(err)
	}
	_, ts2, _ := api.PostMessageContext(ctx, "C0001", slack.MsgOptionText("w", false))
	if _, _, _, err := api.UpdateMessageContext(ctx, "C0001", ts, slack.MsgOptionText("1", false)); err != nil {
		t.Fatal(err)
	}
	if v := s.Snapshot().Violations; len(v) != 0 {
		t.Fatalf("first update violated: %+v", v)
	}
	_, _, _, _ = api.UpdateMessageContext(ctx, "C0001", ts, slack.MsgOptionText("2", false))
	v := s.Snapshot().Violations
	if len(v) != 1 || v[0].Kind != "per_message" || v[0].TS != ts {
		t.Fatalf("violations after a quick second edit = %+v", v)
	}
	_, _, _, _ = api.UpdateMessageContext(ctx, "C0001", ts2, slack.MsgOptionText("3", false))
	_, _, _, _ = api.UpdateMessageContext(ctx, "C0001", ts2+"0", slack.MsgOptionText("4", false)) // unknown message: not counted
	if n := len(s.Snapshot().Violations); n != 1 {
		t.Fatalf("3 updates within budget 3 added violations: %d", n)
	}
	_, _, _, _ = api.UpdateMessageContext(ctx, "C0001", ts2, slack.MsgOptionText("5", false))
	kinds := map[string]int{}
	for _, v := range s.Snapshot().Violations {
		kinds[v.Kind]++
	}
	if kinds["per_minute"] != 1 || kinds["per_message"] != 2 {
		t.Fatalf("violations = %v", kinds)
	}

	// With RateLimitOverBudget Slack's answer is a 429.
	s2, api2 := newClient(t, Options{UpdatesPerMinute: 1, RateLimitOverBudget: true})
	_, ts3, _ := api2.PostMessageContext(ctx, "C0001", slack.MsgOptionText("v", false))
	if _, _, _, err := api2.UpdateMessageContext(ctx, "C0001", ts3, slack.MsgOptionText("1", false)); err != nil {
		t.Fatal(err)
	}
	var rl *slack.RateLimitedError
	if _, _, _, err := api2.UpdateMessageContext(ctx, "C0001", ts3, slack.MsgOptionText("2", false)); !errors.As(err, &rl) || rl.RetryAfter <= 0 {
		t.Fatalf("over budget: %v, want 429", err)
	}
	if len(s2.Snapshot().Violations) != 0 {
		t.Fatal("a refused update counted as a violation")
	}
}

// TestUpdateBurst: a message may take UpdateBurst updates back to back;
// the next one before a MinUpdateInterval has passed is a violation, and
// each message has a bucket of its own.
func TestUpdateBurst(t *testing.T) {
	s, api := newClient(t, Options{MinUpdateInterval: time.Hour, UpdateBurst: 3})
	ctx := testCtx(t)
	_, ts, _ := api.PostMessageContext(ctx, "C0001", slack.MsgOptionText("v", false))
	_, other, _ := api.PostMessageContext(ctx, "C0001", slack.MsgOptionText("w", false))
	update := func(ts, text string) {
		t.Helper()
		if _, _, _, err := api.UpdateMessageContext(ctx, "C0001", ts, slack.MsgOptionText(text, false)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		update(ts, fmt.Sprint(i))
	}
	if v := s.Snapshot().Violations; len(v) != 0 {
		t.Fatalf("3 updates within a burst of 3: violations %+v", v)
	}
	update(other, "x") // another message's bucket is full
	update(ts, "4")
	v := s.Snapshot().Violations
	if len(v) != 1 || v[0].Kind != "per_message" || v[0].TS != ts || !strings.Contains(v[0].Detail, "3 back to back") {
		t.Fatalf("violations after a fourth quick update = %+v", v)
	}
	d := New(Options{})
	t.Cleanup(d.Close)
	if got := d.Options().UpdateBurst; got != DefaultUpdateBurst {
		t.Errorf("default UpdateBurst = %d, want %d", got, DefaultUpdateBurst)
	}
}

// TestUsersInfo: users.info describes the members the options list, checks
// the token like every method, and knows nobody else; payloads carry a
// known member's handle as the username.
func TestUsersInfo(t *testing.T) {
	s, api := newClient(t, Options{Users: []User{
		{ID: "U0ALICE", Name: "alice", RealName: "Alice Liddell", DisplayName: "Alice"},
		{ID: "U0BOB", RealName: "Robert Paulsen"},
	}})
	ctx := testCtx(t)
	u, err := api.GetUserInfoContext(ctx, "U0ALICE")
	if err != nil {
		t.Fatal(err)
	}
	if u.ID != "U0ALICE" || u.TeamID != "T0001" || u.Name != "alice" || u.RealName != "Alice Liddell" ||
		u.Profile.DisplayName != "Alice" || u.Profile.RealName != "Alice Liddell" {
		t.Fatalf("users.info U0ALICE = %+v", u)
	}
	if u, err := api.GetUserInfoContext(ctx, "U0BOB"); err != nil || u.Name != "u0bob" || u.Profile.DisplayName != "" || u.Profile.RealName != "Robert Paulsen" {
		t.Fatalf("users.info U0BOB = %+v, %v", u, err)
	}
	if _, err := api.GetUserInfoContext(ctx, "U0NOBODY"); slackErr(err) != "user_not_found" {
		t.Fatalf("unknown user: err = %v, want user_not_found", err)
	}
	bad := slack.New("xoxb-wrong", slack.OptionAPIURL(s.URL()))
	if _, err := bad.GetUserInfoContext(ctx, "U0ALICE"); slackErr(err) != "invalid_auth" {
		t.Fatalf("wrong token: err = %v, want invalid_auth", err)
	}
	if calls := s.Snapshot().AllCallsTo("users.info"); len(calls) != 4 || calls[0].Form.Get("user") != "U0ALICE" {
		t.Fatalf("users.info calls recorded: %+v", calls)
	}
	s.SetUser(User{ID: "U0BOB", RealName: "Robert Paulsen", DisplayName: "Bob"})
	if u, err := api.GetUserInfoContext(ctx, "U0BOB"); err != nil || u.Profile.DisplayName != "Bob" {
		t.Fatalf("users.info U0BOB after SetUser = %+v, %v", u, err)
	}
	if got := s.slashPayload(SlashCommand{User: "U0ALICE"})["user_name"]; got != "alice" {
		t.Errorf("slash command user_name = %q, want the handle alice", got)
	}
	if got := s.slashPayload(SlashCommand{User: "U0CAROL"})["user_name"]; got != "u0carol" {
		t.Errorf("slash command user_name of an unlisted user = %q", got)
	}
}

func TestFilesUploadV2(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	content := strings.Repeat("long answer line\n", 1000)
	f, err := api.UploadFileContext(ctx, slack.UploadFileParameters{
		Content: content, FileSize: len(content), Filename: "answer.md", Title: "Full answer",
		Channel: "C0001", ThreadTimestamp: "1700000000.000100", InitialComment: "see attached",
	})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	snap := s.Snapshot()
	file, ok := snap.Files[f.ID]
	if !ok || string(file.Content) != content || file.Name != "answer.md" || file.Title != "Full answer" ||
		file.Channel != "C0001" || file.ThreadTS != "1700000000.000100" || !file.Shared {
		t.Fatalf("file = %+v (ok %v)", file, ok)
	}
	var methods []string
	for _, c := range snap.Calls {
		methods = append(methods, c.Method)
	}
	if got := strings.Join(methods, ","); got != "files.getUploadURLExternal,upload,files.completeUploadExternal" {
		t.Fatalf("calls = %s", got)
	}
	if th := snap.Thread("C0001", "1700000000.000100"); len(th) != 1 || th[0].Files[0] != f.ID {
		t.Fatalf("thread after upload = %+v", th)
	}
	// Completing a file that was never uploaded fails as on Slack.
	u, err := api.GetUploadURLExternalContext(ctx, slack.GetUploadURLExternalParameters{FileName: "x.txt", FileSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CompleteUploadExternalContext(ctx, slack.CompleteUploadExternalParameters{Files: []slack.FileSummary{{ID: u.FileID}}, Channel: "C0001"}); slackErr(err) != "file_not_found" {
		t.Fatalf("complete without upload: %v", err)
	}
}

func TestResponseURL(t *testing.T) {
	s, _ := newClient(t, Options{})
	ctx := testCtx(t)
	p := s.slashPayload(SlashCommand{Command: "/sandbot", Text: "help"})
	if err := slack.PostWebhookContext(ctx, p["response_url"], &slack.WebhookMessage{Text: "usage", ResponseType: "ephemeral"}); err != nil {
		t.Fatalf("post to response_url: %v", err)
	}
	snap, err := s.WaitFor(ctx, func(s Snapshot) bool { return len(s.Hooks) == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if snap.Hooks[0].Text() != "usage" || !strings.Contains(string(snap.Hooks[0].Body), `"response_type":"ephemeral"`) {
		t.Fatalf("hook = %s", snap.Hooks[0].Body)
	}
}
