package slack

import (
	"context"
	"regexp"
	"strings"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

// incoming is a user message normalized from an app_mention or a message
// event, before deciding whether it goes to a session.
type incoming struct {
	team, channel, channelType string
	user, text                 string
	ts, threadTS               string
	mention                    bool // addressed to the bot explicitly
	files                      []slackgo.File
}

// eventKey identifies a user message: the same for its app_mention and its
// message event, and for every redelivery, so the workflow (which dedupes
// by chat.Message.EventID) and Adapter.seen see one message once.
func eventKey(channel, ts string) string { return "slack:" + channel + ":" + ts }

// messageSubtypesForSessions are message subtypes that are still a user
// writing in a thread (a reply also sent to the channel, a file with a
// comment). Every other subtype (edits, deletions, joins, bot messages…)
// is ignored.
var messageSubtypesForSessions = map[string]bool{"": true, "thread_broadcast": true, "file_share": true}

// onEventsAPI normalizes an Events API callback. It runs after the ack.
func (a *Adapter) onEventsAPI(ctx context.Context, ev slackevents.EventsAPIEvent) error {
	if ev.Type != slackevents.CallbackEvent {
		return nil
	}
	team := ev.TeamID
	if cb, ok := ev.Data.(*slackevents.EventsAPICallbackEvent); ok && cb.TeamID != "" {
		team = cb.TeamID
	}
	self := a.identity()
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		if e.BotID != "" || e.User == "" || e.User == self.UserID || e.Edited != nil {
			return nil // bots and edits never start turns
		}
		return a.onUserMessage(ctx, incoming{
			team: team, channel: e.Channel, user: e.User, text: e.Text,
			ts: e.TimeStamp, threadTS: e.ThreadTimeStamp, mention: true, files: e.Files,
		})
	case *slackevents.MessageEvent:
		if !messageSubtypesForSessions[e.SubType] || e.BotID != "" || e.User == "" || e.User == self.UserID {
			return nil
		}
		return a.onUserMessage(ctx, incoming{
			team: team, channel: e.Channel, channelType: e.ChannelType, user: e.User, text: e.Text,
			ts: e.TimeStamp, threadTS: e.ThreadTimeStamp,
			mention: strings.Contains(e.Text, "<@"+self.UserID+">"), files: messageFiles(e),
		})
	case *slackevents.AgentSessionStoppedEvent:
		return a.onAgentStop(ctx, team, e) // Slack's native stop button (assistant.go)
	}
	return nil
}

// onUserMessage decides whether a user message goes to a session and
// hands it to the core:
//
//   - a mention (anywhere) or a DM starts or continues the session of its
//     thread; a top-level message starts a thread rooted at itself;
//   - a reply without a mention in a channel thread continues the session
//     if the thread is one (see isSession) and RequireMention is off;
//   - anything else (chatter in channels) is ignored.
func (a *Adapter) onUserMessage(ctx context.Context, in incoming) error {
	if in.channel == "" || in.ts == "" {
		return nil // not a message Slack could send: no place, no identity
	}
	dm := in.channelType == "im"
	if !in.mention && !dm && (in.threadTS == "" || a.cfg.RequireMention) {
		return nil
	}
	root := in.threadTS
	if root == "" {
		root = in.ts
	}
	th := a.thread(in.team, in.channel, root)
	if !in.mention && !dm && !a.isSession(ctx, th) {
		return nil
	}
	key := eventKey(in.channel, in.ts)
	if !a.seen.Add(key, struct{}{}) {
		return nil // the other event of the same message, or a redelivery
	}
	if !a.allowedUser(in.user) || !a.allowedChannel(in.channel) {
		if !in.mention && !dm {
			return nil // do not answer every reply in a thread
		}
		why := "You are not on this bot's list of allowed users."
		if a.allowedUser(in.user) {
			why = "This bot is not enabled in this channel."
		}
		return a.ephemeral(ctx, in.channel, in.threadTS, in.user, why)
	}
	var past []chat.ContextLine
	if in.mention && in.threadTS != "" && in.threadTS != in.ts {
		switch {
		case !a.isSession(ctx, th):
			// Mentioned partway through a thread that is no session yet:
			// what was said before goes into the first prompt.
			past = a.threadContext(ctx, in.channel, in.threadTS, in.ts, false)
		case a.cfg.RequireMention:
			// Only mentions reach the session: what was said since the
			// bot's last message goes into this turn.
			past = a.threadContext(ctx, in.channel, in.threadTS, in.ts, true)
		}
	}
	a.threads.set(th, true)
	a.signals.noteUser(th, in.user)
	return a.core.HandleMessage(ctx, a, chat.Message{
		Context: past,
		EventID: key,
		Thread:  th,
		User:    a.user(ctx, in.user, ""),
		Text:    stripMention(in.text, a.identity().UserID),
		Ref:     in.ts,
		Admin:   a.isApprover(in.user),
		Files:   attachments(in.files),
	})
}

// messageFiles are a message event's files (slack-go keeps a plain
// message's fields, files among them, in Message).
func messageFiles(e *slackevents.MessageEvent) []slackgo.File {
	if e.Message == nil {
		return nil
	}
	return e.Message.Files
}

// attachments describes a message's files for the worker, which downloads
// them from url_private_download with the bot token (files:read).
func attachments(files []slackgo.File) []session.Attachment {
	var out []session.Attachment
	for _, f := range files {
		name := f.Name
		if name == "" {
			name = f.Title
		}
		out = append(out, session.Attachment{Platform: Platform, ID: f.ID, Name: name, Size: int64(f.Size), MimeType: f.Mimetype, URL: f.URLPrivateDownload})
	}
	return out
}

// slackToken is Slack's markup for links, mentions and channels in
// message text: <https://x|label>, <@U123>, <#C123|general>, <!here>.
var slackToken = regexp.MustCompile(`<([^<>|]*)(?:\|([^<>]*))?>`)

// stripMention turns Slack message text into what the model should read:
// mentions of the bot removed, other markup made plain (links as their
// URL, users as @U…, channels as #name), entities decoded, trimmed.
func stripMention(text, botUserID string) string {
	text = strings.ReplaceAll(text, "<@"+botUserID+">", "")
	text = slackToken.ReplaceAllStringFunc(text, func(tok string) string {
		m := slackToken.FindStringSubmatch(tok)
		target, label := m[1], m[2]
		switch {
		case strings.HasPrefix(target, "@"):
			return target
		case strings.HasPrefix(target, "#"):
			if label != "" {
				return "#" + label
			}
			return target
		case strings.HasPrefix(target, "!"):
			if label != "" {
				return label
			}
			return "@" + strings.TrimPrefix(target, "!")
		case label != "" && !strings.Contains(target, label):
			return label + " (" + target + ")"
		}
		return target
	})
	text = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(text)
	return strings.TrimSpace(text)
}
