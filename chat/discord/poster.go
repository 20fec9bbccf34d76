package discord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/safetext"
)

// maxUpload caps an answer uploaded as a file (Discord's limit for bots
// without boosts is 10 MiB; answers are far smaller in practice).
const maxUpload = 8 << 20

// target is the channel a thread's messages go to: the thread, or for a
// location without one (a channel-level reply) the channel.
func target(th chat.Thread) string {
	if th.Thread != "" {
		return th.Thread
	}
	return th.Channel
}

// Post sends a card as a new message in th and returns its message ID.
func (a *Adapter) Post(ctx context.Context, th chat.Thread, c chat.Card) (string, error) {
	m, err := ToMessage(c)
	if err != nil {
		return "", fmt.Errorf("discord: post: %w", err)
	}
	msg, err := a.s.ChannelMessageSendComplex(target(th), m.Send(), discordgo.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("discord: post in %s: %w", target(th), err)
	}
	return msg.ID, nil
}

// Edit replaces message ref in th with c, buttons included. The first edit
// after a takeover (TookOver) waits out the channel's window first.
func (a *Adapter) Edit(ctx context.Context, th chat.Thread, ref string, c chat.Card) error {
	m, err := ToMessage(c)
	if err != nil {
		return fmt.Errorf("discord: edit: %w", err)
	}
	if err := a.waitTakeover(ctx, target(th)); err != nil {
		return fmt.Errorf("discord: edit %s in %s: %w", ref, target(th), err)
	}
	if _, err := a.s.ChannelMessageEditComplex(m.Edit(target(th), ref), discordgo.WithContext(ctx)); err != nil {
		return fmt.Errorf("discord: edit %s in %s: %w", ref, target(th), err)
	}
	return nil
}

var _ chat.CardFinder = (*Adapter)(nil)

// findCardsPages bounds the pages FindCards reads (100 messages each, from
// the turn's first message on).
const findCardsPages = 5

// FindCards implements chat.CardFinder: this bot's messages in th newer
// than the message after whose embed carries key (CardKeyURL), oldest
// first, read with GET /channels/{id}/messages?after= page by page. A
// message of another app, or a user's, is never one of them, whatever its
// embed says.
func (a *Adapter) FindCards(ctx context.Context, th chat.Thread, key, after string) ([]string, error) {
	want := CardKeyURL(key)
	var refs []string
	err := a.ownMessages(ctx, th, after, func(m *discordgo.Message) bool {
		if len(m.Embeds) > 0 && m.Embeds[0].URL == want {
			refs = append(refs, m.ID)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("discord: find cards: %w", err)
	}
	return refs, nil
}

// ownMessages calls visit with this bot's messages in th newer than after
// ("": from the thread's start), oldest first, read with GET
// /channels/{id}/messages?after= up to findCardsPages pages, until visit
// returns false.
func (a *Adapter) ownMessages(ctx context.Context, th chat.Thread, after string, visit func(*discordgo.Message) bool) error {
	self := a.bot()
	if self == "" {
		return errors.New("the bot's own user is not known yet (no READY)")
	}
	cursor := cmp.Or(after, "0") // "0": from the thread's start
	for range findCardsPages {
		msgs, err := a.s.ChannelMessages(target(th), 100, "", cursor, "", discordgo.WithContext(ctx))
		if err != nil {
			return fmt.Errorf("messages of %s: %w", target(th), err)
		}
		// Newest first, as Discord sorts every page.
		for _, m := range slices.Backward(msgs) {
			if m.Author != nil && m.Author.ID == self && !visit(m) {
				return nil
			}
		}
		if len(msgs) < 100 {
			return nil
		}
		cursor = msgs[0].ID
	}
	return nil
}

var _ chat.TakeoverPacer = (*Adapter)(nil)

// TookOver implements chat.TakeoverPacer: the next edit in th's channel
// waits Config.TakeoverWait. Discord keeps one edit bucket per channel (5
// edits per 5 s) for every process on the bot's token, and discordgo paces
// by the headers of this process's own requests only: a replica that took
// a session's watch over, its bucket fresh, edited the card while the old
// holder's edits still filled the window (the chaos suite's load mode: 6
// edits within 5 s, answered 429). The card's view also starts with its
// burst spent (chat.newView), which paces the edits after this one. The
// core calls it with no ref when this replica starts holding a session's
// watch lease (chat.Budget.HandoffWindow): whichever message it edits
// first in the thread, the previous holder's edits may fill the window.
// The wait stays set until an edit spends it.
func (a *Adapter) TookOver(th chat.Thread, _ string) {
	a.tookOverMu.Lock()
	defer a.tookOverMu.Unlock()
	if a.tookOver == nil {
		a.tookOver = map[string]time.Time{}
	}
	a.tookOver[target(th)] = time.Now().Add(a.cfg.TakeoverWait)
}

// waitTakeover waits until channel's takeover wait has passed, then
// forgets it.
func (a *Adapter) waitTakeover(ctx context.Context, channel string) error {
	a.tookOverMu.Lock()
	until, ok := a.tookOver[channel]
	delete(a.tookOver, channel)
	a.tookOverMu.Unlock()
	if !ok {
		return nil
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting out another replica's edit window: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

var _ chat.Deleter = (*Adapter)(nil)

// Delete implements chat.Deleter: it deletes message ref in th (DELETE
// /channels/{channel}/messages/{message}), paced like every REST call by
// discordgo's per-route buckets, 429s waited out. The core deletes a status
// card it posted when another replica's card was recorded for the turn
// first. A message Discord no longer knows (10008, Unknown Message: an
// earlier delete whose answer was lost) counts as deleted.
func (a *Adapter) Delete(ctx context.Context, th chat.Thread, ref string) error {
	err := a.s.ChannelMessageDelete(target(th), ref, discordgo.WithContext(ctx))
	if _, code := restCode(err); code == discordgo.ErrCodeUnknownMessage {
		return nil
	}
	if err != nil {
		return fmt.Errorf("discord: delete %s in %s: %w", ref, target(th), err)
	}
	return nil
}

// PostText sends a Markdown answer: as one message, split into up to
// Config.MaxAnswerParts messages (code blocks closed and reopened across
// parts), or, when longer, as its opening part with the whole answer
// attached as answer.md. It returns the first message's ID.
func (a *Adapter) PostText(ctx context.Context, th chat.Thread, markdown string) (string, error) {
	markdown = safetext.Text(markdown)
	parts := SplitMarkdown(markdown, MaxContent)
	if len(parts) == 0 {
		return "", errors.New("discord: post text: the text is blank")
	}
	ch := target(th)
	if len(parts) <= a.cfg.MaxAnswerParts {
		first := ""
		for i, p := range parts {
			msg, err := a.s.ChannelMessageSendComplex(ch, &discordgo.MessageSend{Content: p, AllowedMentions: noMentions()}, discordgo.WithContext(ctx))
			if err != nil {
				return first, fmt.Errorf("discord: post part %d of %d in %s: %w", i+1, len(parts), ch, err)
			}
			if first == "" {
				first = msg.ID
			}
		}
		return first, nil
	}
	preview, full := answerFile(markdown)
	msg, err := a.s.ChannelMessageSendComplex(ch, &discordgo.MessageSend{
		Content:         preview,
		Files:           []*discordgo.File{{Name: "answer.md", ContentType: "text/markdown; charset=utf-8", Reader: strings.NewReader(full)}},
		AllowedMentions: noMentions(),
	}, discordgo.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("discord: post answer file in %s: %w", ch, err)
	}
	return msg.ID, nil
}

// answerFile is the message of an answer too long for MaxAnswerParts
// messages (markdown made safe): a preview with a note, and the file
// answer.md.
func answerFile(markdown string) (preview, full string) {
	full = markdown
	note := fmt.Sprintf("\n\n-# The full answer (%d characters) is attached as answer.md.", textLen(markdown))
	if len(full) > maxUpload {
		full = full[:maxUpload]
		note = fmt.Sprintf("\n\n-# The answer is %d bytes; answer.md holds the first %d.", len(markdown), maxUpload)
	}
	return SplitMarkdown(markdown, MaxContent-textLen(note))[0] + note, full
}

// answerHead is the content of the first message PostText posts for
// markdown ("" for a blank one, which it refuses).
func (a *Adapter) answerHead(markdown string) string {
	markdown = safetext.Text(markdown)
	parts := SplitMarkdown(markdown, MaxContent)
	switch {
	case len(parts) == 0:
		return ""
	case len(parts) <= a.cfg.MaxAnswerParts:
		return parts[0]
	}
	preview, _ := answerFile(markdown)
	return preview
}

var _ chat.AnswerFinder = (*Adapter)(nil)

// FindAnswer implements chat.AnswerFinder: this bot's message in th newer
// than after and older than before whose content is the first one
// PostText posts for markdown, read with GET
// /channels/{id}/messages?after= page by page.
func (a *Adapter) FindAnswer(ctx context.Context, th chat.Thread, markdown, after, before string) (string, error) {
	want, ref := a.answerHead(markdown), ""
	if want == "" {
		return "", nil
	}
	err := a.ownMessages(ctx, th, after, func(m *discordgo.Message) bool {
		if before != "" && !idBefore(m.ID, before) {
			return false
		}
		// Discord keeps content as sent but for whitespace at its ends.
		if strings.TrimSpace(m.Content) == strings.TrimSpace(want) {
			ref = m.ID
		}
		return ref == ""
	})
	if err != nil {
		return "", fmt.Errorf("discord: find answer: %w", err)
	}
	return ref, nil
}

// idBefore reports whether snowflake a is older than b: the longer number
// is the larger, and equal lengths compare as text.
func idBefore(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// Attach implements chat.Attacher: a message in th carrying the file,
// with a line naming it. The core attaches a command too long for an
// approval card before it shows the card.
func (a *Adapter) Attach(ctx context.Context, th chat.Thread, f chat.Attachment) error {
	if len(f.Content) > maxUpload {
		return fmt.Errorf("discord: attach %s: %d bytes, more than %d", f.Name, len(f.Content), maxUpload)
	}
	title := f.Title
	if title == "" {
		title = f.Name
	}
	ch := target(th)
	_, err := a.s.ChannelMessageSendComplex(ch, &discordgo.MessageSend{
		Content:         clampPlain("📎 "+oneLine(safetext.Line(title))+": `"+f.Name+"`", MaxContent),
		Files:           []*discordgo.File{{Name: f.Name, ContentType: "text/plain; charset=utf-8", Reader: strings.NewReader(f.Content)}},
		AllowedMentions: noMentions(),
	}, discordgo.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("discord: attach %s in %s: %w", f.Name, ch, err)
	}
	return nil
}

// StartThread opens a public thread (without a starter message) in from's
// channel, for /fork. DMs cannot hold threads.
func (a *Adapter) StartThread(ctx context.Context, from chat.Thread, title string) (chat.Thread, error) {
	if from.Workspace == "" {
		return chat.Thread{}, &chat.UserError{Msg: "Forks need a server channel; direct messages cannot hold threads.",
			Err: errors.New("discord: start thread: DM")}
	}
	name := clampPlain(oneLine(title), 100)
	if name == "" {
		name = "sandbot fork"
	}
	ch, err := a.s.ThreadStartComplex(from.Channel, &discordgo.ThreadStart{
		Name: name, Type: discordgo.ChannelTypeGuildPublicThread, AutoArchiveDuration: a.cfg.ThreadAutoArchive,
	}, discordgo.WithContext(ctx))
	if err != nil {
		return chat.Thread{}, fmt.Errorf("discord: start thread in %s: %w", from.Channel, err)
	}
	a.remember(ch)
	return chat.Thread{Platform: Platform, Workspace: from.Workspace, Channel: from.Channel, Thread: ch.ID}, nil
}

// Mention renders a user as a Discord mention. Rendered cards carry no
// pings: every message is sent with mentions disabled.
func (a *Adapter) Mention(u chat.User) string {
	if u.ID == "" {
		return "someone"
	}
	return "<@" + u.ID + ">"
}

// ThreadLink renders a thread as a channel link.
func (a *Adapter) ThreadLink(th chat.Thread) string {
	if t := target(th); t != "" {
		return "<#" + t + ">"
	}
	return ""
}

// ThreadURL implements chat.ThreadURLer: the thread's web link
// (https://discord.com/channels/<guild>/<thread>), which a pull request
// links back to.
func (a *Adapter) ThreadURL(th chat.Thread) string {
	t := target(th)
	if t == "" || th.Workspace == "" {
		return ""
	}
	return "https://discord.com/channels/" + th.Workspace + "/" + t
}

// RenameThread implements chat.ThreadRenamer: /title renames the session's
// thread too (the bot created it, so it may; in a DM there is nothing to
// rename).
func (a *Adapter) RenameThread(ctx context.Context, th chat.Thread, name string) error {
	if th.Thread == "" || th.Workspace == "" {
		return nil
	}
	name = clampPlain(oneLine(name), 100)
	if name == "" {
		return nil
	}
	if _, err := a.s.ChannelEdit(th.Thread, &discordgo.ChannelEdit{Name: name}, discordgo.WithContext(ctx)); err != nil {
		return fmt.Errorf("discord: rename thread %s: %w", th.Thread, err)
	}
	return nil
}

// Notify implements chat.Notifier: the approval notice pings exactly the
// people who may approve (every other message is sent with mentions off).
func (a *Adapter) Notify(ctx context.Context, th chat.Thread, text string, users []chat.User) (string, error) {
	var ids []string
	for _, u := range users {
		if u.ID != "" && len(ids) < 100 {
			ids = append(ids, u.ID)
		}
	}
	msg, err := a.s.ChannelMessageSendComplex(target(th), &discordgo.MessageSend{
		Content:         clampPlain(safetext.Text(text), MaxContent),
		AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}, Users: ids},
	}, discordgo.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("discord: notify in %s: %w", target(th), err)
	}
	return msg.ID, nil
}

// FormatTime implements chat.TimeFormatter: Discord's timestamp markup,
// shown in each reader's time zone (short date and time).
func (a *Adapter) FormatTime(t time.Time) string {
	return "<t:" + strconv.FormatInt(t.Unix(), 10) + ":f>"
}
