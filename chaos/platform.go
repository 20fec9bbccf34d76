package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// chatFake is a chat platform's fake as the suite's users and checks see
// it: the same workload and the same checks run on Slack and on Discord,
// each reading only that fake's own records.
type chatFake interface {
	// post writes text into th as the session's user (a mention of the
	// bot in the channel when th has no thread yet), delivered once. It
	// returns the thread, the message's ref (the turn's bot messages come
	// after it) and a func that delivers the message again, as the
	// platform may (Slack's retries; a gateway replay on Discord).
	post(ctx context.Context, th chat.Thread, text string) (chat.Thread, string, func(context.Context), error)
	// wait returns once cond holds, re-evaluated at every change of the
	// fake, or ctx's error.
	wait(ctx context.Context, cond func() bool) error
	// botMessages are the bot's messages in thread posted after the
	// message since ("" for all), oldest first.
	botMessages(thread, since string) []botMessage
	// mark is a position in the fake's record before a click; reply is
	// the first private reply to the clicking user in thread after it
	// (for the click with ID clickID), if any.
	mark() int
	reply(cw clickWait) (string, bool)
	// click clicks b on m as the session's user and returns the click's
	// ID; acked reports whether a bot acknowledged it.
	click(ctx context.Context, m botMessage, b button) (string, error)
	acked(id string) bool
	// records are the fake's records the checks read.
	records() chatRecords
}

// botMessage is a bot message as its reader sees it.
type botMessage struct {
	Ref    string // Slack ts, Discord message ID
	Thread string // the session's thread (Slack root ts, Discord thread ID)
	Text   string
	// Buttons are the message's buttons: the chat action (chat.Action*)
	// and value each carries, and what the platform needs to click it.
	Buttons []button
	Updates int
	Updated time.Time
	// Posted and Deleted are when it was posted and, for a message the
	// bot deleted, taken out (chatRecords.Deleted).
	Posted, Deleted time.Time
}

type button struct {
	Action, Value, raw string
}

// chatRecords are what a chat fake recorded, for the checks: every bot
// message in the run's channel and its threads, the ones the bots deleted,
// the platform's rate-limit violations, and the events it sent again
// because no bot acknowledged them.
type chatRecords struct {
	Bot, Deleted []botMessage
	Violations   []string
	Resent       int
	// Platform names the platform in the report.
	Platform string
}

// slackFake is the Slack fake (Socket Mode) as a chatFake.
type slackFake struct{ f *fakeslack.Server }

func (p slackFake) post(ctx context.Context, th chat.Thread, text string) (chat.Thread, string, func(context.Context), error) {
	msg := fakeslack.UserMessage{User: approver, Channel: channel, Text: text}
	if th.Thread == "" {
		msg.Text = p.f.Mention() + " " + text
	} else {
		msg.ThreadTS = th.Thread
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	sent, err := p.f.SendMessage(sctx, msg)
	cancel()
	if err != nil {
		return th, "", nil, fmt.Errorf("slack: send the user's message: %w", err)
	}
	if th.Thread == "" {
		th = chat.Thread{Platform: slack.Platform, Workspace: p.f.Options().TeamID, Channel: channel, Thread: sent.Message.TS}
	}
	again := func(ctx context.Context) {
		for _, env := range sent.Envelopes {
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			_, _ = p.f.Redeliver(rctx, env)
			cancel()
		}
	}
	return th, sent.Message.TS, again, nil
}

func (p slackFake) wait(ctx context.Context, cond func() bool) error {
	_, err := p.f.WaitFor(ctx, func(fakeslack.Snapshot) bool { return cond() })
	return err
}

func (p slackFake) botMessages(thread, since string) []botMessage {
	var out []botMessage
	for _, m := range botMessagesSince(p.f.Snapshot(), thread, since) {
		out = append(out, slackMessage(m))
	}
	return out
}

func slackMessage(m fakeslack.Message) botMessage {
	root := m.ThreadTS
	if root == "" {
		root = m.TS
	}
	bm := botMessage{Ref: m.TS, Thread: root, Text: messageText(m), Updates: m.Updates, Updated: m.Updated, Posted: m.Posted, Deleted: m.Deleted}
	for _, b := range m.Buttons() {
		bm.Buttons = append(bm.Buttons, button{Action: slack.ActionIDOf(b.ActionID), Value: b.Value, raw: b.ActionID})
	}
	return bm
}

func (p slackFake) mark() int { return lastSeq(p.f.Snapshot()) }

func (p slackFake) reply(cw clickWait) (string, bool) {
	for _, c := range p.f.Snapshot().CallsTo("chat.postEphemeral") {
		if c.Seq <= cw.seq || c.Error != "" || c.Form.Get("user") != approver || c.Form.Get("thread_ts") != cw.thread {
			continue
		}
		return c.Form.Get("text"), true
	}
	return "", false
}

func (p slackFake) click(ctx context.Context, m botMessage, b button) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	id, err := p.f.ClickButton(cctx, fakeslack.Click{User: approver, Channel: channel, MessageTS: m.Ref, ActionID: b.raw})
	if err != nil {
		return "", fmt.Errorf("slack: click %s: %w", b.raw, err)
	}
	return id, nil
}

func (p slackFake) acked(id string) bool { return p.f.Snapshot().Acked(id) }

func (p slackFake) records() chatRecords {
	sn := p.f.Snapshot()
	r := chatRecords{Platform: "Slack"}
	botID := p.f.Options().BotID
	for _, m := range sn.Messages[channel] {
		if m.BotID == botID {
			r.Bot = append(r.Bot, slackMessage(m))
		}
	}
	for _, m := range sn.Deleted[channel] {
		if m.BotID == botID {
			r.Deleted = append(r.Deleted, slackMessage(m))
		}
	}
	for _, v := range sn.Violations {
		// Which message, and when (UTC, as the processes log): the bots'
		// logs of that moment tell which replica wrote it.
		what := ""
		for _, m := range sn.Messages[v.Channel] {
			if m.TS == v.TS {
				what = fmt.Sprintf(" (thread %s: %.80q)", m.ThreadTS, m.Text)
			}
		}
		r.Violations = append(r.Violations, fmt.Sprintf("%s %s at %s%s: %s", v.Kind, v.TS, v.At.UTC().Format("15:04:05.000"), what, v.Detail))
	}
	for _, e := range sn.Sent {
		if e.Unacked {
			r.Resent++
		}
	}
	return r
}

// lastSeen is what the user of a thread saw last: its newest bot messages,
// as they read them, with the buttons they could click. A lost turn's
// report carries it, so a stall can be told from the fakes alone (a card
// that never offered the approval, or one that did).
func lastSeen(p chatFake, thread string) string {
	if thread == "" {
		return "no thread"
	}
	msgs := p.botMessages(thread, "")
	if len(msgs) == 0 {
		return "no bot message in thread " + thread
	}
	var b strings.Builder
	fmt.Fprintf(&b, "thread %s, its last bot messages:", thread)
	for _, m := range msgs[max(0, len(msgs)-2):] {
		text := m.Text
		if len(text) > 700 {
			text = "…" + text[len(text)-700:]
		}
		fmt.Fprintf(&b, " [%s, %d updates, last %s: %q buttons:", m.Ref, m.Updates, m.Updated.Format("15:04:05.000"), text)
		for _, btn := range m.Buttons {
			fmt.Fprintf(&b, " %s=%.60s", btn.raw, btn.Value)
		}
		b.WriteString("]")
	}
	return b.String()
}
