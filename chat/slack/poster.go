package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/internal/metrics"
)

// maxRateLimitRetries bounds how often one call is retried after a 429.
const maxRateLimitRetries = 5

// summaryChars is the head of an uploaded answer shown in its message.
const summaryChars = 2500

// call runs a Web API call, retrying after Slack's Retry-After when it
// answers 429. chat.update and chat.delete calls also spend their method's
// workspace budget, and a 429 pauses that budget for everyone.
func (a *Adapter) call(ctx context.Context, method string, fn func(ctx context.Context) error) error {
	budget := a.budgetFor(method)
	for attempt := 0; ; attempt++ {
		if budget != nil {
			start := time.Now()
			err := budget.acquire(ctx)
			metrics.ChatWaited(Platform, metrics.WaitPace, time.Since(start))
			if err != nil {
				return fmt.Errorf("slack: %s: %w", method, err)
			}
		}
		err := fn(ctx)
		metrics.ChatCall(Platform, method, err != nil)
		var rl *slackgo.RateLimitedError
		if !errors.As(err, &rl) {
			if err != nil {
				return fmt.Errorf("slack: %s: %w", method, err)
			}
			return nil
		}
		if attempt == maxRateLimitRetries {
			return fmt.Errorf("slack: %s: still rate limited after %d retries: %w", method, attempt, err)
		}
		wait := max(rl.RetryAfter, time.Second)
		metrics.ChatRateLimited(Platform, wait)
		if budget != nil {
			budget.pause(wait)
		}
		a.log.Warn("slack: rate limited; retrying after Retry-After", "method", method, "retry_after", wait, "attempt", attempt+1)
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("slack: %s: %w", method, err)
		}
	}
}

// post sends one message into th and returns its ts.
func (a *Adapter) post(ctx context.Context, th chat.Thread, text string, blocks []slackgo.Block) (string, error) {
	opts := []slackgo.MsgOption{slackgo.MsgOptionText(text, false), slackgo.MsgOptionDisableLinkUnfurl(), slackgo.MsgOptionDisableMediaUnfurl()}
	if len(blocks) > 0 {
		opts = append(opts, slackgo.MsgOptionBlocks(blocks...))
	}
	if th.Thread != "" {
		opts = append(opts, slackgo.MsgOptionTS(th.Thread))
	}
	var ts string
	err := a.call(ctx, "chat.postMessage", func(ctx context.Context) error {
		var err error
		_, ts, err = a.api.PostMessageContext(ctx, th.Channel, opts...)
		return err
	})
	if err == nil {
		a.pacer.posted(th.Channel + "/" + ts)
	}
	if err == nil && th.Thread != "" {
		a.threads.set(th, true) // the bot has replied here: a session thread
		a.signals.posted(th)    // and Slack cleared the thread's status
	}
	return ts, err
}

// Post implements chat.Poster: the card as Block Kit, in the thread.
func (a *Adapter) Post(ctx context.Context, th chat.Thread, c chat.Card) (string, error) {
	blocks, fb := ToBlocks(c)
	return a.post(ctx, th, fb, blocks)
}

// Edit implements chat.Poster with chat.update. It keeps edits of one
// message EditInterval apart and all edits within the workspace budget,
// waiting as needed, and retries after a 429's Retry-After.
func (a *Adapter) Edit(ctx context.Context, th chat.Thread, ref string, c chat.Card) error {
	start := time.Now()
	end, err := a.pacer.begin(ctx, th.Channel+"/"+ref)
	metrics.ChatWaited(Platform, metrics.WaitPace, time.Since(start))
	if err != nil {
		return fmt.Errorf("slack: chat.update: %w", err)
	}
	defer end()
	blocks, fb := ToBlocks(c)
	return a.call(ctx, "chat.update", func(ctx context.Context) error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, th.Channel, ref,
			slackgo.MsgOptionText(fb, false), slackgo.MsgOptionBlocks(blocks...))
		return err
	})
}

// budgetFor is the workspace budget method's calls spend, if any: Slack
// limits each Tier 3 method per workspace on its own.
func (a *Adapter) budgetFor(method string) *updateBudget {
	switch method {
	case "chat.update":
		return a.budget
	case "chat.delete":
		return a.deletes
	}
	return nil
}

var (
	_ chat.Deleter    = (*Adapter)(nil)
	_ chat.CardFinder = (*Adapter)(nil)
)

// findCardsPages bounds the pages of replies FindCards reads (200 each,
// from the turn's start on).
const findCardsPages = 5

// FindCards implements chat.CardFinder: this bot's messages in th after
// the message after whose first block carries key (ToBlocks puts it in
// the block_id), read with conversations.replies from after on.
func (a *Adapter) FindCards(ctx context.Context, th chat.Thread, key, after string) ([]string, error) {
	var refs []string
	err := a.ownReplies(ctx, th, after, "", func(m slackgo.Message) bool {
		if cardKey(m.Blocks) == key {
			refs = append(refs, m.Timestamp)
		}
		return true
	})
	return refs, err
}

// ownReplies calls visit with this bot's replies in th (not its first
// message) newer than oldest and older than latest ("": no bound), oldest
// first, read with conversations.replies up to findCardsPages pages, until
// visit returns false.
func (a *Adapter) ownReplies(ctx context.Context, th chat.Thread, oldest, latest string, visit func(slackgo.Message) bool) error {
	if th.Thread == "" {
		return nil
	}
	self := a.identity()
	p := &slackgo.GetConversationRepliesParameters{ChannelID: th.Channel, Timestamp: th.Thread, Limit: 200, Oldest: oldest, Latest: latest}
	for range findCardsPages {
		var msgs []slackgo.Message
		var more bool
		var next string
		err := a.call(ctx, "conversations.replies", func(ctx context.Context) error {
			var err error
			msgs, more, next, err = a.api.GetConversationRepliesContext(ctx, p)
			return err
		})
		if err != nil {
			return fmt.Errorf("slack: conversations.replies: %w", err)
		}
		for _, m := range msgs {
			mine := (self.BotID != "" && m.BotID == self.BotID) || (self.UserID != "" && m.User == self.UserID)
			if mine && m.Timestamp != th.Thread && !visit(m) {
				return nil
			}
		}
		if !more || next == "" {
			return nil
		}
		p.Cursor = next
	}
	return nil
}

// Delete implements chat.Deleter with chat.delete: the core deletes a
// status card it posted when another replica's card was recorded for the
// turn first. chat.delete is Tier 3 (about 50 a minute per workspace), a
// budget of its own (DeleteBudgetPerMinute) that the watcher's rare
// deletes never come near; it is spent like chat.update's, and a 429
// pauses it. A message that is gone already (message_not_found: an earlier
// delete whose answer was lost) counts as deleted.
func (a *Adapter) Delete(ctx context.Context, th chat.Thread, ref string) error {
	err := a.call(ctx, "chat.delete", func(ctx context.Context) error {
		_, _, err := a.api.DeleteMessageContext(ctx, th.Channel, ref)
		return err
	})
	var se slackgo.SlackErrorResponse
	if errors.As(err, &se) && se.Err == "message_not_found" {
		a.log.Debug("slack: the message to delete is gone already", "thread_id", th.ID(), "ts", ref)
		err = nil
	}
	if err == nil {
		a.pacer.tookOver(th.Channel + "/" + ref) // nothing more to pace
	}
	return err
}

var _ chat.TakeoverPacer = (*Adapter)(nil)

// TookOver implements chat.TakeoverPacer: the next edit of ref waits as
// for a message this adapter never saw.
// Slack paces per message, so a thread taken up with no message named
// (ref "") changes nothing.
func (a *Adapter) TookOver(th chat.Thread, ref string) {
	if ref != "" {
		a.pacer.tookOver(th.Channel + "/" + ref)
	}
}

// PostText implements chat.Poster: Markdown converted to mrkdwn and split
// into messages within Slack's limits; beyond FileUploadThreshold
// characters, a summary message with the full answer attached as a file.
// It returns the first message's ts; on a failure part-way it returns
// the ts of what was posted (if any) with the error.
func (a *Adapter) PostText(ctx context.Context, th chat.Thread, markdown string) (string, error) {
	if TextLen(markdown) > a.cfg.FileUploadThreshold {
		return a.postLong(ctx, th, markdown)
	}
	return a.postParts(ctx, th, Mrkdwn(markdown))
}

func (a *Adapter) postParts(ctx context.Context, th chat.Thread, mrk string) (string, error) {
	parts := a.answerParts(mrk)
	var first string
	for i, p := range parts {
		ts, err := a.post(ctx, th, p.Text, sectionBlocks(p.Sections))
		if err != nil {
			return first, fmt.Errorf("slack: post part %d of %d: %w", i+1, len(parts), err)
		}
		if first == "" {
			first = ts
		}
	}
	return first, nil
}

// answerParts are the messages postParts posts for mrk.
func (a *Adapter) answerParts(mrk string) []Part {
	parts := SplitMessages(mrk, a.limits)
	if len(parts) == 0 {
		parts = []Part{{Text: "_(empty answer)_", Sections: []string{"_(empty answer)_"}}}
	}
	return parts
}

// answerHead is the text of the first message PostText posts for
// markdown.
func (a *Adapter) answerHead(markdown string) string {
	if TextLen(markdown) > a.cfg.FileUploadThreshold {
		_, _, summary := longSummary(markdown)
		return summary
	}
	return a.answerParts(Mrkdwn(markdown))[0].Text
}

var _ chat.AnswerFinder = (*Adapter)(nil)

// FindAnswer implements chat.AnswerFinder: this bot's message in th
// between after and before whose text is the first one PostText posts
// for markdown, read with conversations.replies (oldest and latest bound
// it, both exclusive).
func (a *Adapter) FindAnswer(ctx context.Context, th chat.Thread, markdown, after, before string) (string, error) {
	want, ref := a.answerHead(markdown), ""
	err := a.ownReplies(ctx, th, after, before, func(m slackgo.Message) bool {
		if strings.TrimSpace(m.Text) == strings.TrimSpace(want) {
			ref = m.Timestamp
		}
		return ref == ""
	})
	return ref, err
}

func sectionBlocks(sections []string) []slackgo.Block {
	out := make([]slackgo.Block, len(sections))
	for i, s := range sections {
		out[i] = section(s)
	}
	return out
}

// longSummary is the first message of a long answer: its head, the note
// on the attached file, and the text of both.
func longSummary(markdown string) (head, note, summary string) {
	if parts := chunk(Mrkdwn(markdown), summaryChars); len(parts) > 0 {
		head = parts[0]
	}
	note = fmt.Sprintf("_The full answer (%d characters) is attached as answer.md._", TextLen(markdown))
	return head, note, strings.TrimSpace(head + "\n\n" + note)
}

// postLong posts the head of a long answer, then uploads the whole answer
// (the original Markdown) into the thread as answer.md. If the upload
// fails, the answer is posted split instead, so nothing is lost.
func (a *Adapter) postLong(ctx context.Context, th chat.Thread, markdown string) (string, error) {
	mrk := Mrkdwn(markdown)
	head, note, summary := longSummary(markdown)
	ts, err := a.post(ctx, th, summary, []slackgo.Block{section(head), slackgo.NewContextBlock("", mrkdwn(note))})
	if err != nil {
		return "", err
	}
	err = a.call(ctx, "files.upload", func(ctx context.Context) error {
		_, err := a.api.UploadFileContext(ctx, slackgo.UploadFileParameters{
			Content: markdown, FileSize: len(markdown), Filename: "answer.md", Title: "Full answer",
			Channel: th.Channel, ThreadTimestamp: th.Thread, SnippetType: "markdown",
		})
		return err
	})
	if err != nil {
		a.log.Warn("slack: uploading the full answer failed; posting it split instead", "thread_id", th.ID(), "err", err)
		if _, perr := a.postParts(ctx, th, mrk); perr != nil {
			return ts, errors.Join(err, perr)
		}
	}
	return ts, nil
}

// Attach implements chat.Attacher: the file goes into the thread with
// files upload v2 (the same path as long answers). The core attaches a
// command too long for an approval card before it shows the card.
func (a *Adapter) Attach(ctx context.Context, th chat.Thread, f chat.Attachment) error {
	return a.call(ctx, "files.upload", func(ctx context.Context) error {
		_, err := a.api.UploadFileContext(ctx, slackgo.UploadFileParameters{
			Content: f.Content, FileSize: len(f.Content), Filename: f.Name, Title: orDefault(f.Title, f.Name),
			Channel: th.Channel, ThreadTimestamp: th.Thread, SnippetType: "text",
		})
		return err
	})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// StartThread implements chat.ThreadStarter: a new top-level message in
// from's channel whose thread is the new session's (used by /fork).
func (a *Adapter) StartThread(ctx context.Context, from chat.Thread, title string) (chat.Thread, error) {
	text := "🍴 *" + inline(cutRunes(oneLine(title), maxTitle), true) + "*"
	ts, err := a.post(ctx, chat.Thread{Platform: Platform, Workspace: from.Workspace, Channel: from.Channel}, text, []slackgo.Block{section(text)})
	if err != nil {
		return chat.Thread{}, err
	}
	th := a.thread(from.Workspace, from.Channel, ts)
	a.threads.set(th, true)
	return th, nil
}

// ephemeral shows Markdown text to one user in a channel (and thread).
func (a *Adapter) ephemeral(ctx context.Context, channel, threadTS, user, markdown string) error {
	opts := []slackgo.MsgOption{slackgo.MsgOptionText(truncateMrkdwn(Mrkdwn(markdown), 3900), false)}
	if threadTS != "" {
		opts = append(opts, slackgo.MsgOptionTS(threadTS))
	}
	return a.call(ctx, "chat.postEphemeral", func(ctx context.Context) error {
		_, err := a.api.PostEphemeralContext(ctx, channel, user, opts...)
		return err
	})
}

// respond answers a slash command or shortcut through its response_url:
// ephemeral replies are seen by the user only.
func (a *Adapter) respond(ctx context.Context, responseURL string, r chat.Reply) error {
	msg := &slackgo.WebhookMessage{ResponseType: slackgo.ResponseTypeEphemeral}
	if !r.Ephemeral {
		msg.ResponseType = slackgo.ResponseTypeInChannel
	}
	if r.Card != nil {
		blocks, fb := ToBlocks(*r.Card)
		msg.Text, msg.Blocks = fb, &slackgo.Blocks{BlockSet: blocks}
	} else {
		msg.Text = truncateMrkdwn(Mrkdwn(r.Text), 3900)
	}
	if strings.TrimSpace(msg.Text) == "" {
		return nil
	}
	return a.call(ctx, "response_url", func(ctx context.Context) error {
		return slackgo.PostWebhookContext(ctx, responseURL, msg)
	})
}

// slackEmoji names the reactions the core uses (chat.Reaction*) as Slack
// does; Slack's API takes names, not characters.
var slackEmoji = map[string]string{
	chat.ReactionWorking: "eyes",
	chat.ReactionDone:    "white_check_mark",
	chat.ReactionFailed:  "x",
	chat.ReactionStopped: "black_square_for_stop",
}

// React implements chat.Reactor with reactions.add on the user's message
// (ref is its ts). Reacting twice is not an error.
func (a *Adapter) React(ctx context.Context, th chat.Thread, ref, emoji string) error {
	name, ok := slackEmoji[emoji]
	if !ok {
		return fmt.Errorf("slack: no Slack name for reaction %q", emoji)
	}
	err := a.call(ctx, "reactions.add", func(ctx context.Context) error {
		return a.api.AddReactionContext(ctx, name, slackgo.ItemRef{Channel: th.Channel, Timestamp: ref})
	})
	if err != nil && strings.Contains(err.Error(), "already_reacted") {
		return nil
	}
	return err
}

// Unreact implements chat.Reactor with reactions.remove; a reaction that
// is not there is not an error.
func (a *Adapter) Unreact(ctx context.Context, th chat.Thread, ref, emoji string) error {
	name, ok := slackEmoji[emoji]
	if !ok {
		return fmt.Errorf("slack: no Slack name for reaction %q", emoji)
	}
	err := a.call(ctx, "reactions.remove", func(ctx context.Context) error {
		return a.api.RemoveReactionContext(ctx, name, slackgo.ItemRef{Channel: th.Channel, Timestamp: ref})
	})
	if err != nil && strings.Contains(err.Error(), "no_reaction") {
		return nil
	}
	return err
}
