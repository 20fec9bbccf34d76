package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"golang.org/x/time/rate"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/lru"
)

// Platform is the Location.Platform of Discord sessions.
const Platform = "discord"

// shutdownGrace is how long Run lets in-flight events finish after its
// context ends.
const shutdownGrace = 10 * time.Second

// Adapter connects one Discord bot to the chat core. Create it with New
// and start it with Run and the core (the lifecycle every adapter shares).
// It implements chat.Poster, chat.ThreadStarter,
// chat.Mentioner and chat.ThreadLinker, and shows message state as
// reactions (React, Unreact); those methods are safe for concurrent use
// once Run has opened the gateway.
type Adapter struct {
	cfg  Config
	core chat.Handler // set by Run before the gateway opens
	log  *slog.Logger
	s    *discordgo.Session

	ready   chan struct{}
	runOnce sync.Once

	mu      sync.Mutex
	botID   string
	down    string          // why the gateway is not connected; "" while it is
	work    context.Context // handlers' context; outlives Run's by shutdownGrace
	closing bool            // set when Run stops taking events

	inflight sync.WaitGroup
	queues   *serial
	// seenMsgs and seenInters drop events a gateway RESUME replays; a few
	// thousand IDs cover any replay window.
	seenMsgs *lru.Cache[string, struct{}]
	// contextSent are threads whose earlier messages this process already
	// fetched for a first prompt (a session only takes them once).
	contextSent *lru.Cache[string, struct{}]
	seenInters  *lru.Cache[string, struct{}]
	chans       *lru.Cache[string, chanInfo]

	// tookOver holds, per channel, the time before which no edit goes out
	// there: set by TookOver, spent by the next Edit (poster.go).
	tookOverMu sync.Mutex
	tookOver   map[string]time.Time
}

var (
	_ chat.Poster        = (*Adapter)(nil)
	_ chat.Attacher      = (*Adapter)(nil)
	_ chat.ThreadStarter = (*Adapter)(nil)
	_ chat.Mentioner     = (*Adapter)(nil)
	_ chat.ThreadLinker  = (*Adapter)(nil)
)

// New checks cfg and prepares an adapter; nothing touches the network
// until Run. log may be nil.
func New(cfg Config, log *slog.Logger) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.withDefaults()
	s, err := discordgo.New("Bot " + cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("discord: new session: %w", err)
	}
	s.Client = httpClient(cfg)
	s.Identify.Intents = intents(cfg)
	// See the package comment: handlers only hand events off, so running
	// them in order on the read loop keeps per-channel order for free.
	s.SyncEvents = true
	s.ShouldReconnectOnError = true
	s.ShouldRetryOnRateLimit = true
	s.MaxRestRetries = 3
	s.StateEnabled = true
	s.LogLevel = discordgo.LogError
	return &Adapter{
		cfg: cfg, log: log.With("platform", Platform), s: s,
		ready:       make(chan struct{}),
		botID:       cfg.ApplicationID,
		down:        "not connected yet",
		queues:      newSerial(),
		seenMsgs:    lru.New[string, struct{}](4096),
		contextSent: lru.New[string, struct{}](4096),
		seenInters:  lru.New[string, struct{}](1024),
		chans:       lru.New[string, chanInfo](4096),
	}, nil
}

// intents are the gateway intents the adapter needs: guilds (thread and
// channel state), guild and direct messages, and, if configured, the
// privileged message content.
func intents(cfg Config) discordgo.Intent {
	i := discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages
	if cfg.MessageContentIntent {
		i |= discordgo.IntentsMessageContent
	}
	return i
}

// rewriter sends requests for discord.com to another server (the fake),
// setting both URL.Host and Host so that server sees its own address and
// advertises a gateway URL the bot can dial.
type rewriter struct {
	target *url.URL
	base   http.RoundTripper
}

func (rw *rewriter) RoundTrip(req *http.Request) (*http.Response, error) {
	base := rw.base
	if base == nil {
		base = http.DefaultTransport
	}
	if h := req.URL.Hostname(); h != "discord.com" && h != "discordapp.com" {
		return base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host, r.Host = rw.target.Scheme, rw.target.Host, rw.target.Host
	return base.RoundTrip(r)
}

// httpClient is the REST client: cfg.HTTPClient (or a default) with every
// request paced (see globalPacer) and counted (see meter) and, with
// APIBase set, sent there.
func httpClient(cfg Config) *http.Client {
	c := cfg.HTTPClient
	if c == nil {
		c = &http.Client{Timeout: 30 * time.Second}
	}
	cc := *c
	if cfg.APIBase != "" {
		u, _ := url.Parse(cfg.APIBase) // checked by Validate
		cc.Transport = &rewriter{target: u, base: cc.Transport}
	}
	cc.Transport = meter{base: cc.Transport}
	if cfg.RequestsPerSecond > 0 {
		cc.Transport = globalPacer{base: cc.Transport, lim: rate.NewLimiter(rate.Limit(cfg.RequestsPerSecond), 1)}
	}
	return &cc
}

// globalPacer spaces the requests that count against Discord's global
// limit per bot (Config.RequestsPerSecond) before they leave: discordgo
// paces each route by its bucket's headers, but learns of the global
// limit only from a 429, and the replicas on one token share it. Interaction
// callbacks and webhook calls (follow-ups, edits of interaction answers)
// are exempt, as Discord exempts them, so a click is never acknowledged
// late for the pace of card edits. A burst of 1: in any second one
// replica sends at most its rate plus one.
type globalPacer struct {
	base http.RoundTripper
	lim  *rate.Limiter
}

func (g globalPacer) RoundTrip(req *http.Request) (*http.Response, error) {
	if !globalExempt(req.URL.Path) {
		if err := g.lim.Wait(req.Context()); err != nil {
			return nil, fmt.Errorf("discord: pacing under the global rate limit: %w", err)
		}
	}
	base := g.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}

// globalExempt reports whether a REST path is outside Discord's global
// rate limit: interaction callbacks (/interactions/{id}/{token}/callback)
// and webhooks, interaction follow-ups included (/webhooks/{app}/{token}).
func globalExempt(path string) bool {
	return strings.Contains(path, "/interactions/") || strings.Contains(path, "/webhooks/")
}

// Ready is closed once Run has connected, registered the commands and
// resumed watching active turns.
func (a *Adapter) Ready() <-chan struct{} { return a.ready }

// Run opens the gateway, registers the slash commands (in Config.GuildID,
// or globally), asks core to resume watchers of turns that were running
// when the bot stopped, and hands events to core until ctx ends. Then it
// stops taking events, lets in-flight ones finish (for up to 10 s), and
// closes the gateway. It returns an error if the bot cannot connect or
// register its commands; after that, only nil. Run may be called once.
func (a *Adapter) Run(ctx context.Context, core chat.Handler) error {
	if core == nil {
		return errors.New("discord: run: core is nil")
	}
	first := false
	a.runOnce.Do(func() { first = true })
	if !first {
		return errors.New("discord: Run called twice")
	}
	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	a.mu.Lock()
	a.work, a.core = work, core
	a.mu.Unlock()
	defer stop()

	removers := []func(){
		a.s.AddHandler(a.onReady),
		a.s.AddHandler(a.onMessageCreate),
		a.s.AddHandler(a.onThreadCreate),
		a.s.AddHandler(a.onInteractionCreate),
		a.s.AddHandler(func(*discordgo.Session, *discordgo.Resumed) {
			a.log.Info("gateway resumed")
			a.setDown("")
		}),
		a.s.AddHandler(func(*discordgo.Session, *discordgo.Disconnect) {
			a.log.Warn("gateway disconnected; reconnecting")
			a.setDown("gateway disconnected; reconnecting")
		}),
	}
	defer a.setDown("stopped")
	removeAll := func() {
		for _, r := range removers {
			r()
		}
	}
	if err := a.s.Open(); err != nil {
		removeAll()
		return fmt.Errorf("discord: open gateway: %w", err)
	}
	if err := a.registerCommands(ctx); err != nil {
		removeAll()
		_ = a.s.Close()
		return err
	}
	if err := core.Resume(ctx, a, Platform); err != nil {
		// Not fatal: new events still work, and the core scans again
		// every interval for turns that need a bot.
		a.log.Error("resume watchers failed", "err", err)
	}
	close(a.ready)
	a.log.Info("discord adapter running", "bot_id", a.bot(), "guild", a.cfg.GuildID, "invite_url", InviteURL(a.cfg.ApplicationID))

	<-ctx.Done()
	removeAll()
	a.mu.Lock()
	a.closing = true
	a.mu.Unlock()
	done := make(chan struct{})
	go func() {
		a.inflight.Wait()
		a.queues.wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		a.log.Warn("shutdown: cancelling events still in flight")
		stop()
		<-done
	}
	if err := a.s.Close(); err != nil {
		a.log.Warn("close gateway", "err", err)
	}
	return nil
}

// ctx is the context for work on events.
func (a *Adapter) ctx() context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.work
}

// accept reports whether events are still taken, and if so counts one in
// flight; the caller must call a.inflight.Done. Checking and counting
// under one lock keeps shutdown's Wait from racing a late Add.
func (a *Adapter) accept() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return false
	}
	a.inflight.Add(1)
	return true
}

func (a *Adapter) bot() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.botID
}

func (a *Adapter) onReady(_ *discordgo.Session, r *discordgo.Ready) {
	if r.User == nil {
		return
	}
	a.mu.Lock()
	a.botID = r.User.ID
	a.down = ""
	a.mu.Unlock()
	a.log.Info("gateway ready", "bot_id", r.User.ID, "session", r.SessionID != "")
}

// Connected returns nil while the gateway is connected (ready or resumed),
// else why it is not. The bot's readiness check asks it.
func (a *Adapter) Connected() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down != "" {
		return errors.New("discord: " + a.down)
	}
	return nil
}

func (a *Adapter) setDown(why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = why
}

// Session is the underlying discordgo session, for callers that need a
// Discord call the adapter does not wrap. Do not add handlers that block.
func (a *Adapter) Session() *discordgo.Session { return a.s }
