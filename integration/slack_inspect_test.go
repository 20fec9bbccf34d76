package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// Reading what the fake Slack shows: message texts and buttons as Block
// Kit renders them, the versions of a message (its post and edits), the
// bot's calls, and the end-of-test checks that no Slack limit was broken.

// waitBotText waits for a message of the bot in th, other than those in
// skip, whose text contains every part, and returns it.
func (e *slackEnv) waitBotText(th chat.Thread, what string, skip []string, parts ...string) fakeslack.Message {
	e.t.Helper()
	var got fakeslack.Message
	e.wait(what, func(s fakeslack.Snapshot) bool {
		for _, m := range s.BotMessages(th.Channel, th.Thread) {
			if m.BotID != e.f.Options().BotID || slices.Contains(skip, m.TS) {
				continue
			}
			text, ok := messageText(m), true
			for _, p := range parts {
				ok = ok && strings.Contains(text, p)
			}
			if ok {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// threadURL is the link Slack shows for a thread's root message.
func (e *slackEnv) threadURL(th chat.Thread) string {
	return "https://" + e.f.Options().TeamDomain + ".slack.com/archives/" + th.Channel + "/p" + strings.ReplaceAll(th.Thread, ".", "")
}

// shownButtons lists a message's buttons in order, read from its blocks here
// rather than with fakeslack's Message.Buttons (see click).
func shownButtons(m fakeslack.Message) []fakeslack.Button {
	var blocks []struct {
		Type     string           `json:"type"`
		BlockID  string           `json:"block_id"`
		Elements []map[string]any `json:"elements"`
	}
	if m.RawBlocks == "" || json.Unmarshal([]byte(m.RawBlocks), &blocks) != nil {
		return nil
	}
	str := func(o map[string]any, k string) string { s, _ := o[k].(string); return s }
	var out []fakeslack.Button
	for _, b := range blocks {
		if b.Type != "actions" {
			continue
		}
		for _, el := range b.Elements {
			if str(el, "type") != "button" {
				continue
			}
			label, _ := el["text"].(map[string]any)
			out = append(out, fakeslack.Button{BlockID: b.BlockID, ActionID: str(el, "action_id"), Value: str(el, "value"), Text: str(label, "text"), Style: str(el, "style")})
		}
	}
	return out
}

// ephemerals are the chat.postEphemeral calls the bot made to user.
func ephemerals(s fakeslack.Snapshot, user string) []fakeslack.Call {
	var out []fakeslack.Call
	for _, c := range s.CallsTo("chat.postEphemeral") {
		if c.Form.Get("user") == user {
			out = append(out, c)
		}
	}
	return out
}

// updatesOf are the accepted chat.update calls of message ts, in order.
func updatesOf(s fakeslack.Snapshot, ts string) []fakeslack.Call {
	var out []fakeslack.Call
	for _, c := range s.CallsTo("chat.update") {
		if c.Form.Get("ts") == ts {
			out = append(out, c)
		}
	}
	return out
}

// postedTS is the ts of the message a chat.postMessage call created.
func postedTS(c fakeslack.Call) string {
	var r struct {
		TS string `json:"ts"`
	}
	_ = json.Unmarshal(c.Response, &r)
	return r.TS
}

// shown is one version of a message as Slack received it.
type shown struct {
	at   time.Time
	text string // every text of its blocks, in order
	raw  string
}

// versions are every version of message ts: the chat.postMessage that made
// it, then its accepted chat.update calls.
func versions(s fakeslack.Snapshot, ts string) []shown {
	var out []shown
	for _, c := range s.CallsTo("chat.postMessage") {
		if postedTS(c) == ts {
			out = append(out, shown{at: c.At, text: blocksText(c.RawBlocks), raw: c.RawBlocks})
		}
	}
	for _, c := range updatesOf(s, ts) {
		out = append(out, shown{at: c.At, text: blocksText(c.RawBlocks), raw: c.RawBlocks})
	}
	return out
}

// blocksText is every text of a Block Kit JSON array, one per line, in
// order: section texts and fields, context elements, button labels.
func blocksText(raw string) string {
	var blocks []map[string]any
	if json.Unmarshal([]byte(raw), &blocks) != nil {
		return ""
	}
	var out []string
	var walk func(o map[string]any)
	walk = func(o map[string]any) {
		switch t := o["text"].(type) {
		case string:
			out = append(out, t)
		case map[string]any:
			walk(t)
		}
		for _, k := range []string{"fields", "elements"} {
			if list, ok := o[k].([]any); ok {
				for _, x := range list {
					if m, ok := x.(map[string]any); ok {
						walk(m)
					}
				}
			}
		}
	}
	for _, b := range blocks {
		walk(b)
	}
	return strings.Join(out, "\n")
}

// messageText is what a message shows: its blocks' text, or its text.
func messageText(m fakeslack.Message) string {
	if m.RawBlocks != "" {
		return blocksText(m.RawBlocks)
	}
	return m.Text
}

// hasLine reports whether text has a line containing every part.
func hasLine(text string, parts ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// slackMention is how mrkdwn mentions a user.
func slackMention(user string) string { return "<@" + user + ">" }

// checkClean fails the test if the fake recorded a chat.update budget
// violation, or if Slack refused a Web API call the bot made in the test's
// channel other than the faults the test injected (see checkCalls).
func (e *slackEnv) checkClean(allowed ...string) {
	e.t.Helper()
	e.checkViolations(nil)
	e.checkCalls(allowed...)
}

// checkViolations fails the test for every chat.update budget violation the
// fake recorded, except those reported already (known).
func (e *slackEnv) checkViolations(known func(fakeslack.Violation) bool) {
	e.t.Helper()
	for _, v := range e.f.Snapshot().Violations {
		if known == nil || !known(v) {
			e.t.Errorf("chat.update budget violation (%s) on %s/%s: %s", v.Kind, v.Channel, v.TS, v.Detail)
		}
	}
}

// checkCalls fails the test if Slack refused any Web API call the bot made
// in the test's channel, other than faults the test injected: allowed lists
// their Slack error codes, or "http 429" for a refusal without one.
func (e *slackEnv) checkCalls(allowed ...string) {
	e.t.Helper()
	for _, c := range e.f.Snapshot().Calls {
		if c.OK() || (c.Form.Get("channel") != e.channel && c.Form.Get("channel_id") != e.channel) {
			continue
		}
		code := c.Error
		if code == "" {
			code = fmt.Sprintf("http %d", c.Status)
		}
		if !slices.Contains(allowed, code) {
			e.t.Errorf("Slack refused %s: HTTP %d %q: %s", c.Method, c.Status, c.Error, c.Response)
		}
	}
}

// approvalShown are the approval buttons among a message's buttons (a
// running turn's card also has Stop).
func approvalShown(m fakeslack.Message) []fakeslack.Button {
	var out []fakeslack.Button
	for _, b := range shownButtons(m) {
		if id := slack.ActionIDOf(b.ActionID); id == chat.ActionApprove || id == chat.ActionApproveAlways || id == chat.ActionReject {
			out = append(out, b)
		}
	}
	return out
}
