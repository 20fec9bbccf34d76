package discord

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
)

// The adapter shows a message's state as the bot's reaction on it (👀
// while the message's turn runs, then ✅, ❌ or ⏹️) when the core asks.
var _ chat.Reactor = (*Adapter)(nil)

// React adds the bot's reaction emoji to message messageRef in th. emoji
// is a unicode emoji ("👀") or a custom one as name:id (or <:name:id>, as
// messages write it). Reacting again with the same emoji is a no-op. The
// request is paced like every REST call (discordgo's per-route buckets,
// which keep reactions to 5 a second per channel, and 429s waited out). A
// message Discord does not know (deleted, or never there) is an error
// wrapping the *discordgo.RESTError with code 10008.
func (a *Adapter) React(ctx context.Context, th chat.Thread, messageRef, emoji string) error {
	ch, e, err := reactionRoute(th, messageRef, emoji)
	if err != nil {
		return fmt.Errorf("discord: react: %w", err)
	}
	if err := a.s.MessageReactionAdd(ch, messageRef, e, discordgo.WithContext(ctx)); err != nil {
		return fmt.Errorf("discord: react %s on %s in %s: %w", emoji, messageRef, ch, err)
	}
	return nil
}

// Unreact takes the bot's reaction emoji off message messageRef in th; it
// is a no-op when the bot has not reacted so. Pacing and errors are
// React's.
func (a *Adapter) Unreact(ctx context.Context, th chat.Thread, messageRef, emoji string) error {
	ch, e, err := reactionRoute(th, messageRef, emoji)
	if err != nil {
		return fmt.Errorf("discord: unreact: %w", err)
	}
	if err := a.s.MessageReactionRemove(ch, messageRef, e, "@me", discordgo.WithContext(ctx)); err != nil {
		return fmt.Errorf("discord: unreact %s on %s in %s: %w", emoji, messageRef, ch, err)
	}
	return nil
}

// reactionRoute is the channel that holds message ref in th and emoji as
// the reaction route's path segment (URL-escaped: discordgo puts it into
// the path as given).
func reactionRoute(th chat.Thread, ref, emoji string) (channel, segment string, err error) {
	ch := target(th)
	if th.Thread != "" && ref == th.Thread && th.Channel != "" {
		// A thread opened from a message has that message's ID, and the
		// message itself lives in the parent channel: the mention that
		// started a session.
		ch = th.Channel
	}
	e := strings.TrimSpace(emoji)
	if strings.HasPrefix(e, "<") && strings.HasSuffix(e, ">") {
		// <:name:id> or <a:name:id>, the message form of a custom emoji
		e = strings.TrimPrefix(strings.Trim(e, "<>"), "a:")
		e = strings.TrimPrefix(e, ":")
	}
	switch {
	case ch == "":
		return "", "", errors.New("the thread names no channel")
	case ref == "":
		return "", "", errors.New("no message given")
	case e == "":
		return "", "", errors.New("no emoji given")
	}
	return ch, url.PathEscape(e), nil
}
