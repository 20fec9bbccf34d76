// Package fakediscord is an in-process fake of Discord's REST API (v9) and
// gateway that speaks the real wire protocol, so that tests, benchmarks and
// local demos can drive the real github.com/bwmarrin/discordgo client.
//
// Point a discordgo.Session at it by setting Session.Client to Client() (a
// per-session transport that rewrites discord.com to the fake); nothing
// process-global is changed, so tests using different fakes run in parallel.
// The gateway URL the fake advertises is its own websocket endpoint.
//
// The fake keeps channels, threads, messages (with the bot's reactions),
// interactions and application commands in memory, enforces the limits that
// shape a bot (content length, component and embed limits, the 3 s
// interaction acknowledgement deadline, interaction token lifetime), can
// inject 429 rate-limit responses, and records every request, every message
// edit and every reaction change with its receive time. Test code simulates
// users (UserMessage, SlashCommand, ClickButton, SubmitModal)
// and the gateway's misbehaviour (DropConnections, SendReconnect,
// InvalidateSession, ReplayOnResumeFrom), and waits for conditions with Wait,
// never with sleeps.
package fakediscord

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Well-known IDs of the default world the fake starts with.
const (
	DefaultAppID     = "1000000000000000001" // also the bot user's ID
	DefaultGuildID   = "4000000000000000001"
	DefaultChannelID = "5000000000000000001"                                             // #general in DefaultGuildID
	DefaultToken     = "MTAwMDAwMDAwMDAwMDAwMDAwMQ.ZmFrZQ.fake-signature-for-tests-only" // shaped like a real bot token
)

// Discord's limits that the fake enforces.
const (
	MaxContent          = 2000
	MaxCustomID         = 100
	MaxButtonLabel      = 80
	MaxRows             = 5
	MaxRowComponents    = 5
	MaxEmbeds           = 10
	MaxEmbedTitle       = 256
	MaxEmbedDescription = 4096
	MaxEmbedFields      = 25
	MaxEmbedFieldName   = 256
	MaxEmbedFieldValue  = 1024
	MaxEmbedFooter      = 2048
	MaxEmbedTotal       = 6000
	MaxModalTitle       = 45
	MaxTextInputLabel   = 45
	MaxUploadBytes      = 10 << 20
)

// Options configure a fake. Zero values mean the documented defaults.
type Options struct {
	// Token is the bot token without the "Bot " prefix (default DefaultToken).
	Token string
	// AppID is the application ID, which is also the bot user's ID
	// (default DefaultAppID).
	AppID string
	// BotName is the bot's username (default "sandbot").
	BotName string
	// HeartbeatInterval is sent in HELLO (default 41.25 s, as Discord does).
	HeartbeatInterval time.Duration
	// AckDeadline is how long after INTERACTION_CREATE the initial response
	// is accepted (default 3 s). Later callbacks get 404 Unknown interaction.
	AckDeadline time.Duration
	// TokenLifetime is how long an interaction token works for webhook
	// edits and follow-ups (default 15 min). Later calls get 401 Invalid
	// Webhook Token (code 50027).
	TokenLifetime time.Duration
	// DenyPrivilegedIntents makes IDENTIFY with the privileged
	// MESSAGE_CONTENT (or GUILD_MEMBERS, GUILD_PRESENCES) intent fail with
	// close code 4014, as when the intent is not enabled for the app.
	DenyPrivilegedIntents bool
	// Budgets, when set, makes the fake keep Discord's own rate limits
	// (budget.go): requests over them are answered 429 and recorded as
	// Violations.
	Budgets *Budgets
	// KeepRequests bounds Requests to the latest n (0: every request). A
	// load test's hundreds of threads would otherwise keep every body.
	KeepRequests int
}

func (o *Options) setDefaults() {
	if o.Token == "" {
		o.Token = DefaultToken
	}
	if o.AppID == "" {
		o.AppID = DefaultAppID
	}
	if o.BotName == "" {
		o.BotName = "sandbot"
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 41250 * time.Millisecond
	}
	if o.AckDeadline <= 0 {
		o.AckDeadline = 3 * time.Second
	}
	if o.TokenLifetime <= 0 {
		o.TokenLifetime = 15 * time.Minute
	}
	if o.Budgets != nil {
		b := *o.Budgets
		b.setDefaults()
		o.Budgets = &b
	}
}

// Server is a running fake. All methods are safe for concurrent use.
type Server struct {
	opts Options
	srv  *httptest.Server

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every state change
	nextID    uint64
	guilds    map[string]*Guild
	channels  map[string]*Channel
	messages  map[string]*Message
	downloads int      // user attachments served (files.go)
	order     []string // message IDs in creation order
	inters    map[string]*Interaction
	byToken   map[string]*Interaction
	commands  map[string][]json.RawMessage // scope ("global" or guild ID) → registered commands
	requests  []Record
	edits     []Edit
	reactions []ReactionEvent
	limits    []*rateRule
	// budgetWin are the windows of Options.Budgets, by bucket; violations
	// the requests answered 429 for being over one.
	budgetWin  map[string]*window
	violations []Violation
	// byChannel are message IDs per channel in creation order, so reading
	// one thread does not walk every message of a busy fake.
	byChannel map[string][]string

	gw *gateway
}

// New starts a fake on a loopback port with one guild (DefaultGuildID) and
// one text channel (DefaultChannelID). Close it when done.
func New(opts Options) *Server {
	opts.setDefaults()
	s := &Server{
		opts:      opts,
		changed:   make(chan struct{}),
		nextID:    1300000000000000000,
		guilds:    map[string]*Guild{},
		channels:  map[string]*Channel{},
		messages:  map[string]*Message{},
		inters:    map[string]*Interaction{},
		byToken:   map[string]*Interaction{},
		commands:  map[string][]json.RawMessage{},
		budgetWin: map[string]*window{},
		byChannel: map[string][]string{},
	}
	s.gw = newGateway(s)
	s.guilds[DefaultGuildID] = &Guild{ID: DefaultGuildID, Name: "Fake Guild"}
	s.channels[DefaultChannelID] = &Channel{ID: DefaultChannelID, Type: ChannelText, GuildID: DefaultGuildID, Name: "general"}
	s.srv = httptest.NewServer(s.routes())
	return s
}

// Start is New for tests: the fake is closed when the test ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s := New(opts)
	tb.Cleanup(s.Close)
	return s
}

// Close drops gateway connections and stops the HTTP server.
func (s *Server) Close() {
	s.gw.closeAll()
	s.srv.Close()
}

// URL is the fake's base URL, for example "http://127.0.0.1:40123".
func (s *Server) URL() string { return s.srv.URL }

// Token is the bot token the fake accepts (without "Bot ").
func (s *Server) Token() string { return s.opts.Token }

// AppID is the application (and bot user) ID.
func (s *Server) AppID() string { return s.opts.AppID }

// BotUser is the bot's user object.
func (s *Server) BotUser() User {
	return User{ID: s.opts.AppID, Username: s.opts.BotName, Bot: true}
}

// newID returns a fresh snowflake-like ID. Callers hold s.mu.
func (s *Server) newID() string {
	s.nextID++
	return strconv.FormatUint(s.nextID, 10)
}

// bump wakes waiters. Callers hold s.mu.
func (s *Server) bump() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Wait blocks until cond returns true or ctx ends. cond is evaluated after
// every state change of the fake (requests, edits, gateway events), so it
// may call any Server method. It returns ctx's error on timeout, naming
// what was awaited.
func (s *Server) Wait(ctx context.Context, what string, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fake discord: waiting for %s: %w", what, ctx.Err())
		}
	}
}

// AddGuild adds (or replaces) a guild. Its roles are the role IDs known to
// it; members carry role IDs in their Member.Roles.
func (s *Server) AddGuild(g Guild) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gg := g
	s.guilds[g.ID] = &gg
	s.bump()
}

// AddChannel adds (or replaces) a channel.
func (s *Server) AddChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cc := c
	s.channels[c.ID] = &cc
	s.bump()
}

// AddDM creates a DM channel between the bot and user and returns its ID.
func (s *Server) AddDM(user User) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.newID()
	s.channels[id] = &Channel{ID: id, Type: ChannelDM, Recipients: []User{user}}
	s.bump()
	return id
}

// Channel returns a copy of a channel (or thread).
func (s *Server) Channel(id string) (Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[id]
	if !ok {
		return Channel{}, false
	}
	return *c, true
}

// Threads returns the threads whose parent is channelID, oldest first.
func (s *Server) Threads(channelID string) []Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Channel
	for _, c := range s.channels {
		if c.IsThread() && c.ParentID == channelID {
			out = append(out, *c)
		}
	}
	sortChannels(out)
	return out
}

// Message returns a copy of a message.
func (s *Server) Message(id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.messages[id]
	if !ok {
		return Message{}, false
	}
	return m.clone(), true
}

// Messages returns the messages of a channel (or thread) in creation order,
// including ephemeral interaction responses.
func (s *Server) Messages(channelID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, id := range s.byChannel[channelID] {
		if m := s.messages[id]; m.ChannelID == channelID && !m.Deleted {
			out = append(out, m.clone())
		}
	}
	return out
}

// DeletedMessages returns the deleted messages of a channel (or thread) in
// creation order, as they were when deleted: Messages leaves them out.
func (s *Server) DeletedMessages(channelID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, id := range s.byChannel[channelID] {
		if m := s.messages[id]; m.ChannelID == channelID && m.Deleted {
			out = append(out, m.clone())
		}
	}
	return out
}

// Requests returns every REST request the fake answered, in order.
func (s *Server) Requests() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.requests...)
}

// Edits returns every accepted message edit (channel PATCH and webhook
// PATCH) with the time the fake received it, in order. Benchmarks use it to
// measure how long a change takes to show in chat.
func (s *Server) Edits() []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Edit(nil), s.edits...)
}

// Commands returns the application commands registered for a scope: ""
// for global commands, or a guild ID.
func (s *Server) Commands(guildID string) []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.commands[scopeKey(guildID)]...)
}

func scopeKey(guildID string) string {
	if guildID == "" {
		return "global"
	}
	return guildID
}

// record appends a request record. Callers hold s.mu.
func (s *Server) record(r Record) {
	if n := s.opts.KeepRequests; n > 0 && len(s.requests) >= 2*n {
		s.requests = append(s.requests[:0], s.requests[len(s.requests)-n+1:]...)
	}
	s.requests = append(s.requests, r)
	s.bump()
}

// Changed returns a channel that is closed at the fake's next state
// change, for callers that wait on several sources at once (Wait covers
// the common case).
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// WaitEdit returns the first edit received at or after since for which
// match returns true, waiting for it until ctx ends. Benchmarks use it to
// measure progress latency: note the time a change happened (a tool call
// completed), then WaitEdit for the edit that shows it; Edit.At is when
// the fake received the PATCH.
func (s *Server) WaitEdit(ctx context.Context, since time.Time, match func(Edit) bool) (Edit, error) {
	var found Edit
	err := s.Wait(ctx, "a matching edit", func() bool {
		for _, e := range s.Edits() {
			if !e.At.Before(since) && match(e) {
				found = e
				return true
			}
		}
		return false
	})
	return found, err
}
