package slack

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/lru"
	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/internal/metrics"
)

// Display names come from users.info and are cached: a busy thread costs
// one lookup per user an hour. A failed lookup (no users:read scope, a rate
// limit, Slack down) is remembered for a minute, so it is not repeated for
// every message, and the user is named by what the event carried.
const (
	nameTTL       = time.Hour
	nameFailedTTL = time.Minute
	// nameTimeout bounds one users.info call: the message it names waits.
	nameTimeout = 3 * time.Second
	// maxNameRunes is Slack's own limit for display and real names.
	maxNameRunes  = 80
	nameCacheSize = 10000
)

// nameCache holds resolved display names by user ID, at most
// nameCacheSize of them (least recently used out), each valid for nameTTL.
type nameCache struct {
	known *lru.Cache[string, nameEntry]
	now   func() time.Time

	mu sync.Mutex
	// lookups are in flight, by user ID; closed when done.
	lookups map[string]chan struct{}
}

type nameEntry struct {
	name    string // "" when the lookup failed or the user has no name
	expires time.Time
}

func newNameCache() *nameCache {
	return &nameCache{known: lru.New[string, nameEntry](nameCacheSize), now: time.Now, lookups: map[string]chan struct{}{}}
}

// get returns id's cached name, if any and still valid.
func (c *nameCache) get(id string) (string, bool) {
	e, ok := c.known.Get(id)
	if !ok {
		return "", false
	}
	if !c.now().Before(e.expires) {
		c.known.Remove(id)
		return "", false
	}
	return e.name, true
}

func (c *nameCache) put(id, name string, ttl time.Duration) {
	c.known.Put(id, nameEntry{name: name, expires: c.now().Add(ttl)})
}

// claim makes the caller the one to look id up (mine), or returns a
// channel closed when the current lookup ends.
func (c *nameCache) claim(id string) (wait <-chan struct{}, mine bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.lookups[id]; ok {
		return ch, false
	}
	c.lookups[id] = make(chan struct{})
	return nil, true
}

func (c *nameCache) unclaim(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.lookups[id]; ok {
		close(ch)
		delete(c.lookups, id)
	}
}

// user is the chat.User of Slack user id for the core, named by their
// display name (see displayName). fallback is the name the event carried
// (a payload's username), used when Slack cannot say; with neither, Name
// stays empty and the core names the user by ID.
func (a *Adapter) user(ctx context.Context, id, fallback string) chat.User {
	name := a.displayName(ctx, id)
	if name == "" {
		name = cleanName(fallback)
	}
	return chat.User{ID: id, Name: name}
}

// displayName is how Slack shows user id: profile.display_name, else the
// real name, else the handle, from users.info through the cache. It is ""
// when Slack cannot say; that never fails the event being handled.
// Concurrent events of one user share one lookup.
func (a *Adapter) displayName(ctx context.Context, id string) string {
	if id == "" {
		return ""
	}
	for {
		if name, ok := a.names.get(id); ok {
			return name
		}
		wait, mine := a.names.claim(id)
		if mine {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return ""
		}
	}
	defer a.names.unclaim(id)
	cctx, cancel := context.WithTimeout(ctx, nameTimeout)
	defer cancel()
	// Not through a.call: a rate-limited lookup is not worth a retry that
	// holds up the message; the ID does until the entry expires.
	u, err := a.api.GetUserInfoContext(cctx, id)
	metrics.ChatCall(Platform, "users.info", err != nil)
	if err != nil {
		if ctx.Err() != nil {
			return "" // shutting down: remember nothing
		}
		hint := ""
		var se slackgo.SlackErrorResponse
		if errors.As(err, &se) && se.Err == "missing_scope" {
			hint = " (the Slack app needs the users:read scope; see deploy/slack-app-manifest.yaml)"
		}
		a.log.Warn("slack: users.info failed; naming the user by ID"+hint, "user", id, "err", err)
		a.names.put(id, "", nameFailedTTL)
		return ""
	}
	name := profileName(u)
	a.names.put(id, name, nameTTL)
	return name
}

// profileName is the name Slack shows for u: display name, real name,
// handle, the first that is not empty once cleaned.
func profileName(u *slackgo.User) string {
	for _, n := range []string{u.Profile.DisplayName, u.Profile.RealName, u.RealName, u.Name} {
		if n = cleanName(n); n != "" {
			return n
		}
	}
	return ""
}

// cleanName makes a name someone chose safe to put into cards, answers and
// the model's transcript: one line, without invisible or control
// characters, at most maxNameRunes long.
func cleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		if safetext.Hidden(r) {
			if unicode.IsSpace(r) || r < 0x20 {
				return ' '
			}
			return -1
		}
		return r
	}, s)
	return cutRunes(oneLine(s), maxNameRunes)
}
