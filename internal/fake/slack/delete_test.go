package fakeslack

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

// chat.delete as Slack answers it, driven by slack-go: the bot's own reply
// leaves the thread (Messages) and is kept, as deleted, in Deleted with
// when it was posted and deleted; a second delete, an unknown ts and
// another user's message are refused with Slack's codes; a thread parent
// with replies stays as a tombstone.
func TestChatDelete(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	root := s.Say(UserMessage{Channel: "C1", Text: "build it"}).Message.TS
	_, card, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("card", false), slack.MsgOptionTS(root))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("the other card", false), slack.MsgOptionTS(root))
	if err != nil {
		t.Fatal(err)
	}
	ch, ts, err := api.DeleteMessageContext(ctx, "C1", card)
	if err != nil || ch != "C1" || ts != card {
		t.Fatalf("chat.delete = %q, %q, %v; want C1, %s", ch, ts, err, card)
	}
	sn := s.Snapshot()
	var left []string
	for _, m := range sn.Messages["C1"] {
		left = append(left, m.Text)
	}
	if strings.Join(left, "|") != "build it|the other card" {
		t.Errorf("messages after the delete: %q", left)
	}
	gone := sn.Deleted["C1"]
	if len(gone) != 1 || gone[0].TS != card || gone[0].Text != "card" || gone[0].Deleted.IsZero() || gone[0].Deleted.Before(gone[0].Posted) {
		t.Fatalf("deleted: %+v, want the card with its post and delete times", gone)
	}
	for _, tc := range []struct{ ts, want string }{{card, "message_not_found"}, {"1.000001", "message_not_found"}, {root, "cant_delete_message"}} {
		if _, _, err := api.DeleteMessageContext(ctx, "C1", tc.ts); slackErr(err) != tc.want {
			t.Errorf("chat.delete %s: %v, want %s", tc.ts, err, tc.want)
		}
	}
	if err := api.AddReactionContext(ctx, "eyes", slack.NewRefToMessage("C1", card)); slackErr(err) != "message_not_found" {
		t.Errorf("reaction on a deleted message: %v, want message_not_found", err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", card, slack.MsgOptionText("again", false)); slackErr(err) != "message_not_found" {
		t.Errorf("chat.update of a deleted message: %v, want message_not_found", err)
	}
	if len(s.Snapshot().CallsTo("chat.delete")) != 1 {
		t.Errorf("chat.delete calls answered ok: %d, want 1", len(s.Snapshot().CallsTo("chat.delete")))
	}

	// A parent with replies becomes Slack's tombstone.
	_, parent, err := api.PostMessageContext(ctx, "C2", slack.MsgOptionText("parent", false))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C2", slack.MsgOptionText("reply", false), slack.MsgOptionTS(parent)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.DeleteMessageContext(ctx, "C2", parent); err != nil {
		t.Fatal(err)
	}
	if ms := s.Snapshot().Messages["C2"]; len(ms) != 2 || ms[0].SubType != "tombstone" || ms[1].Text != "reply" {
		t.Errorf("thread after its parent's delete: %+v", ms)
	}
}

// chat.delete takes its parameters as a JSON body too, and answers a
// missing channel with channel_not_found.
func TestChatDeleteJSONBody(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("card", false))
	if err != nil {
		t.Fatal(err)
	}
	call := func(ct, body string) string {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"chat.delete", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer "+s.Options().BotToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := call("application/x-www-form-urlencoded", url.Values{"ts": {ts}}.Encode()); !strings.Contains(got, `"error":"channel_not_found"`) {
		t.Errorf("no channel: %s", got)
	}
	got := call("application/json; charset=utf-8", `{"channel":"C1","ts":"`+ts+`"}`)
	if want := `{"channel":"C1","ok":true,"ts":"` + ts + `"}`; got != want {
		t.Errorf("JSON chat.delete answered %s, want %s", got, want)
	}
}

// chat.delete is Tier 3: calls beyond the per-minute budget are recorded
// as violations, or answered 429 with RateLimitOverBudget.
func TestChatDeleteBudget(t *testing.T) {
	for _, over := range []bool{false, true} {
		s, api := newClient(t, Options{DeletesPerMinute: 2, RateLimitOverBudget: over})
		ctx := testCtx(t)
		var tss []string
		for range 3 {
			_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("card", false))
			if err != nil {
				t.Fatal(err)
			}
			tss = append(tss, ts)
		}
		api = slack.New(s.Options().BotToken, slack.OptionAPIURL(s.URL()))
		var errs []error
		for _, ts := range tss {
			_, _, err := api.DeleteMessageContext(ctx, "C1", ts)
			errs = append(errs, err)
			var rl *slack.RateLimitedError
			if over && err != nil && !errors.As(err, &rl) {
				t.Errorf("over budget: %v, want 429", err)
			}
		}
		sn := s.Snapshot()
		if over {
			if errs[2] == nil || len(sn.Violations) != 0 {
				t.Errorf("RateLimitOverBudget: third delete %v, violations %+v; want a 429 and none", errs[2], sn.Violations)
			}
			continue
		}
		if errs[2] != nil || len(sn.Violations) != 1 || !strings.Contains(sn.Violations[0].Detail, "chat.delete") {
			t.Errorf("third delete %v, violations %+v; want it done and one violation", errs[2], sn.Violations)
		}
	}
}
