package slack

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/lru"
	"github.com/sandbot/sandbot/internal/metrics"
)

// negativeTTL is how long "this thread is not a session" is believed. A
// thread becomes a session only through a mention, which another replica
// may have handled, so the answer must not be kept long.
const negativeTTL = 30 * time.Second

// threadCache remembers which threads are sessions, so replies in a
// session thread reach it without a mention and without a lookup per
// message. Answers are kept in a bounded cache (least recently used out);
// negative ones expire after negativeTTL.
type threadCache struct {
	known *lru.Cache[string, threadEntry]

	mu sync.Mutex
	// lookups are in flight, by key; closed when done.
	lookups map[string]chan struct{}
}

type threadEntry struct {
	session bool
	at      time.Time
}

func newThreadCache() *threadCache {
	return &threadCache{known: lru.New[string, threadEntry](50000), lookups: map[string]chan struct{}{}}
}

func threadKey(th chat.Thread) string {
	return th.Workspace + "/" + th.Channel + "/" + th.Thread
}

// claim makes the caller the one to look th up (mine), or returns a channel
// closed when the current lookup ends.
func (c *threadCache) claim(th chat.Thread) (wait <-chan struct{}, mine bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := threadKey(th)
	if ch, ok := c.lookups[key]; ok {
		return ch, false
	}
	c.lookups[key] = make(chan struct{})
	return nil, true
}

// unclaim ends the caller's lookup of th.
func (c *threadCache) unclaim(th chat.Thread) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := threadKey(th)
	if ch, ok := c.lookups[key]; ok {
		close(ch)
		delete(c.lookups, key)
	}
}

// get returns the cached answer for th, if any and still valid.
func (c *threadCache) get(th chat.Thread) (session, ok bool) {
	key := threadKey(th)
	e, ok := c.known.Get(key)
	if !ok {
		return false, false
	}
	if !e.session && time.Since(e.at) > negativeTTL {
		c.known.Remove(key)
		return false, false
	}
	return e.session, true
}

// set records whether th is a session.
func (c *threadCache) set(th chat.Thread, session bool) {
	c.known.Put(threadKey(th), threadEntry{session: session, at: time.Now()})
}

// isSession decides whether a reply (without a mention) in thread th
// belongs to a session, cheaply:
//
//  1. a thread this process saw start (a mention) or posted into is known;
//  2. otherwise, if the core implements SessionFinder, the session store
//     answers (authoritative, works across replicas and restarts);
//  3. otherwise the thread is read once with conversations.replies: it is
//     a session if its root mentions the bot or the bot has replied in it.
//
// Answers are cached (see threadCache), so a busy thread costs one lookup.
// A failed lookup counts as "not a session" and is not cached.
func (a *Adapter) isSession(ctx context.Context, th chat.Thread) bool {
	for {
		if s, ok := a.threads.get(th); ok {
			return s
		}
		// Concurrent replies in one unknown thread share one lookup.
		wait, mine := a.threads.claim(th)
		if mine {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return false
		}
	}
	defer a.threads.unclaim(th)
	var session bool
	var err error
	if f, ok := a.core.(SessionFinder); ok {
		session, err = f.HasSession(ctx, th)
	} else {
		session, err = a.threadHasBot(ctx, th)
	}
	if err != nil {
		a.log.Warn("slack: cannot tell whether a thread is a session", "thread_id", th.ID(), "err", err)
		return false
	}
	a.threads.set(th, session)
	return session
}

// threadHasBot reads the first page of a thread: true if the root mentions
// the bot or any message in it is the bot's.
func (a *Adapter) threadHasBot(ctx context.Context, th chat.Thread) (bool, error) {
	self := a.identity()
	msgs, _, _, err := a.api.GetConversationRepliesContext(ctx, &slackgo.GetConversationRepliesParameters{
		ChannelID: th.Channel, Timestamp: th.Thread, Limit: 200,
	})
	metrics.ChatCall(Platform, "conversations.replies", err != nil)
	if err != nil {
		return false, err
	}
	mention := "<@" + self.UserID + ">"
	for i, m := range msgs {
		if (self.BotID != "" && m.BotID == self.BotID) || (self.UserID != "" && m.User == self.UserID) {
			return true, nil
		}
		if i == 0 && m.Timestamp == th.Thread && strings.Contains(m.Text, mention) {
			return true, nil
		}
	}
	return false, nil
}

// threadContext is what a thread said before the message at ts, oldest
// first, each message named by its author's display name (bots by their
// name). A failure leaves the context empty: the message still goes on.
func (a *Adapter) threadContext(ctx context.Context, channel, root, ts string, sinceBot bool) []chat.ContextLine {
	msgs, _, _, err := a.api.GetConversationRepliesContext(ctx, &slackgo.GetConversationRepliesParameters{
		ChannelID: channel, Timestamp: root, Limit: 200,
	})
	metrics.ChatCall(Platform, "conversations.replies", err != nil)
	if err != nil {
		a.log.Warn("slack: thread context unavailable", "channel", channel, "thread_ts", root, "err", err)
		return nil
	}
	before, _ := strconv.ParseFloat(ts, 64)
	self := a.identity()
	mention := "<@" + self.UserID + ">"
	var out []chat.ContextLine
	for _, m := range msgs {
		at, err := strconv.ParseFloat(m.Timestamp, 64)
		if err != nil || at >= before {
			continue
		}
		if sinceBot && ((self.BotID != "" && m.BotID == self.BotID) || strings.Contains(m.Text, mention)) {
			out = out[:0] // the bot's own message, or an earlier turn's mention: start after it
			continue
		}
		if strings.TrimSpace(m.Text) == "" {
			continue
		}
		who := m.Username
		if m.User != "" && m.BotID == "" {
			who = a.user(ctx, m.User, m.Username).Name
		}
		if who == "" {
			who = "a bot"
		}
		out = append(out, chat.ContextLine{User: who, Text: m.Text})
	}
	if len(out) > chat.MaxContextLines {
		out = out[len(out)-chat.MaxContextLines:]
	}
	return out
}
