package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/lru"
	"github.com/sandbot/sandbot/internal/metrics"
)

// SessionFinder is an optional capability of the chat.Handler given to
// Run: whether a thread has a session. With it, a reply in a thread the adapter has not seen before is
// routed by asking the session store instead of reading the thread from
// Slack (see Adapter.isSession).
type SessionFinder interface {
	HasSession(ctx context.Context, th chat.Thread) (bool, error)
}

// Adapter connects one Slack workspace to the core. It implements
// chat.Poster (plus chat.ThreadStarter, chat.Mentioner and
// chat.ThreadLinker) for the core to post into threads.
//
// Build it with New, hand Budget() to the core's configuration, then call
// Run with the core (the lifecycle every adapter shares). All methods are
// safe for concurrent use.
type Adapter struct {
	cfg    Config
	log    *slog.Logger
	api    *slackgo.Client
	budget *updateBudget // chat.update
	// deletes is chat.delete's budget (Tier 3, like chat.update's, but
	// counted by Slack on its own).
	deletes *updateBudget
	pacer   *editPacer
	limits  Limits

	threads *threadCache
	names   *nameCache // display names by user ID (users.info)
	// signals and streams are Slack's native signs of running turns
	// (assistant.go, stream.go); askers is who last wrote to each
	// session thread, by workflow ID.
	signals *signals
	streams *streams
	askers  *lru.Cache[string, string]
	// seen holds recent event keys, so the app_mention and the message
	// event of one user message, and Slack's redeliveries, are handled once
	// by this process (the workflow dedupes across replicas).
	seen *lru.Cache[string, struct{}]

	core chat.Handler
	ctx  context.Context // Run's context: the lifetime of event work
	wg   sync.WaitGroup  // event work started after an ack

	mu       sync.Mutex
	self     identity
	addr     string
	down     string // why the adapter is not connected; "" while it is
	ready    chan struct{}
	once     sync.Once
	inflight int
	idle     chan struct{} // closed and replaced whenever inflight drops to 0
}

// identity is who the bot is in the workspace (from auth.test).
type identity struct {
	UserID, BotID, TeamID string
	// TeamURL is the workspace's web address, "https://acme.slack.com/".
	TeamURL string
}

var (
	_ chat.Poster        = (*Adapter)(nil)
	_ chat.Attacher      = (*Adapter)(nil)
	_ chat.ThreadStarter = (*Adapter)(nil)
	_ chat.Mentioner     = (*Adapter)(nil)
	_ chat.ThreadLinker  = (*Adapter)(nil)
	_ chat.TurnObserver  = (*Adapter)(nil)
)

// New validates cfg and builds an adapter. Nothing is contacted until Run.
// log may be nil. The adapter adds platform=slack to every record it logs,
// so log must not carry a platform attribute already (it would be printed
// twice).
func New(cfg Config, log *slog.Logger) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []slackgo.Option{slackgo.OptionAppLevelToken(cfg.AppToken)}
	if cfg.APIURL != "" {
		opts = append(opts, slackgo.OptionAPIURL(cfg.APIURL))
	}
	a := &Adapter{
		cfg:     cfg,
		log:     log.With("platform", Platform),
		api:     slackgo.New(cfg.BotToken, opts...),
		budget:  newUpdateBudget(cfg.UpdateBudgetPerMinute, budgetWindow),
		deletes: newUpdateBudget(DeleteBudgetPerMinute, budgetWindow),
		pacer:   newEditPacer(cfg.EditInterval, cfg.EditBurst),
		limits:  DefaultLimits,
		threads: newThreadCache(),
		names:   newNameCache(),
		seen:    lru.New[string, struct{}](20000),
		ready:   make(chan struct{}),
		idle:    make(chan struct{}),
		down:    "not connected yet",
		askers:  lru.New[string, string](10000),
	}
	a.signals, a.streams = newSignals(a), newStreams(a, cfg.Streaming)
	return a, nil
}

// Budget is the pacing the core's turn watcher should use for Slack
// threads: CoreConfig.Budgets[slack.Platform] = a.Budget(). Its Limiter
// waits (without spending) until the workspace chat.update budget allows
// another edit, so the watcher renders the newest state when its turn
// comes; Edit itself enforces the budget and the per-message interval
// whatever the caller does.
func (a *Adapter) Budget() chat.Budget {
	return chat.Budget{
		MinEditInterval: a.cfg.EditInterval,
		EditBurst:       a.cfg.EditBurst,
		Limiter:         a.budget,
		MaxButtonValue:  MaxButtonValue,
		MaxCardChars:    3500,
		// A command awaiting approval is one section's code block:
		// 3,000 characters after escaping, less the fences.
		MaxApprovalChars: maxSectionText - len(fenceOpen) - len(fenceClose) - 20,
		MeasureCode:      CodeLen,
	}
}

// Ready is closed once Run is connected (Socket Mode) or listening (HTTP
// mode) and events will be handled.
func (a *Adapter) Ready() <-chan struct{} { return a.ready }

// Connected returns nil while the adapter is connected to Slack (Socket
// Mode) or listening for its requests (HTTP mode), else why it is not. The
// bot's readiness check asks it.
func (a *Adapter) Connected() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down != "" {
		return errors.New("slack: " + a.down)
	}
	return nil
}

// setDown records why the adapter is not connected ("": it is).
func (a *Adapter) setDown(why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = why
}

// Addr is the HTTP-mode listen address once Ready (useful with ":0").
func (a *Adapter) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// Self returns the bot's user ID and workspace ID, known once Ready.
func (a *Adapter) Self() (userID, teamID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.self.UserID, a.self.TeamID
}

func (a *Adapter) identity() identity {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.self
}

// Run connects to Slack and hands events to core until ctx ends, then
// waits for event work in flight. Once connected it asks core to resume
// watching turns that were running when the bot stopped. It returns nil
// after ctx ends, or the error that made it stop (bad credentials, a port
// in use).
func (a *Adapter) Run(ctx context.Context, core chat.Handler) error {
	if core == nil {
		return errors.New("slack: run: core is nil")
	}
	a.core, a.ctx = core, ctx
	defer a.wg.Wait()
	defer a.setDown("stopped")
	r, err := a.api.AuthTestContext(ctx)
	metrics.ChatCall(Platform, "auth.test", err != nil)
	if err != nil {
		a.setDown("auth.test failed (check SANDBOT_SLACK_BOT_TOKEN)")
		return fmt.Errorf("slack: auth.test: %w (check SANDBOT_SLACK_BOT_TOKEN)", err)
	}
	a.mu.Lock()
	a.self = identity{UserID: r.UserID, BotID: r.BotID, TeamID: r.TeamID, TeamURL: r.URL}
	a.mu.Unlock()
	a.log.Info("slack: authenticated", "team_id", r.TeamID, "bot_user", r.UserID, "mode", a.cfg.Mode)
	switch a.cfg.Mode {
	case ModeHTTP:
		err = a.runHTTP(ctx)
	default:
		err = a.runSocket(ctx)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// markReady marks the adapter connected; the first time, it closes Ready
// and resumes watchers of running turns.
func (a *Adapter) markReady() {
	a.setDown("")
	a.once.Do(func() {
		close(a.ready)
		a.spawn("resume", func(ctx context.Context) error { return a.core.Resume(ctx, a, Platform) })
	})
}

// spawn runs event work on its own goroutine, on Run's context, and logs
// its failure. Run waits for spawned work before returning. The channel
// closes when the work has returned.
func (a *Adapter) spawn(what string, fn func(ctx context.Context) error) <-chan struct{} {
	done := make(chan struct{})
	a.wg.Add(1)
	a.busy(+1)
	go func() {
		defer a.wg.Done()
		defer a.busy(-1)
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				a.log.Error("slack: panic in event work", "work", what, "panic", r)
			}
		}()
		if err := fn(a.ctx); err != nil && a.ctx.Err() == nil {
			a.log.Warn("slack: event work failed", "work", what, "err", err)
		}
	}()
	return done
}

// handedOff waits until work is done, for at most AckWithin, and reports
// whether it was. The work of an event ends soon after its durable step
// (the message or decision reached the session's workflow); the caller
// acknowledges the envelope or request only if it did. A bot killed before
// then leaves it unacknowledged, and one whose handoff is slower than
// AckWithin does not acknowledge it either: Slack then sends an event
// again (redeliveries are recognised by event ID) and tells a clicking
// user the app did not respond, so they click again (a decision that did
// land answers "already decided"). An ack sent first, or at the bound,
// told Slack an event was handled that a bot dying next would lose. The
// work itself goes on either way.
func (a *Adapter) handedOff(ctx context.Context, done <-chan struct{}) bool {
	t := time.NewTimer(a.cfg.AckWithin)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (a *Adapter) busy(d int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inflight += d
	if a.inflight == 0 {
		close(a.idle)
		a.idle = make(chan struct{})
	}
}

// WaitIdle blocks until no event work is running (every event acked so
// far has been fully handled), or ctx ends. Tests use it to assert that
// an event caused nothing, without sleeping.
func (a *Adapter) WaitIdle(ctx context.Context) error {
	for {
		a.mu.Lock()
		n, ch := a.inflight, a.idle
		a.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// allowed applies AllowedUsers and AllowedChannels.
func (a *Adapter) allowedUser(user string) bool {
	return len(a.cfg.AllowedUsers) == 0 || slices.Contains(a.cfg.AllowedUsers, user)
}

func (a *Adapter) allowedChannel(channel string) bool {
	return len(a.cfg.AllowedChannels) == 0 || slices.Contains(a.cfg.AllowedChannels, channel)
}

func (a *Adapter) isApprover(user string) bool { return slices.Contains(a.cfg.Approvers, user) }

// thread builds a session location in this workspace.
func (a *Adapter) thread(team, channel, threadTS string) chat.Thread {
	if team == "" {
		team = a.identity().TeamID
	}
	return chat.Thread{Platform: Platform, Workspace: team, Channel: channel, Thread: threadTS}
}

// Mention implements chat.Mentioner: a token that Mrkdwn turns into a real
// Slack mention (<@U…>), which plain text from a model cannot produce.
func (a *Adapter) Mention(u chat.User) string {
	if isUserID(u.ID) {
		return mentionOpen + u.ID + mentionClose
	}
	if u.Name != "" {
		return "@" + u.Name
	}
	return "@" + u.ID
}

// ThreadLink implements chat.ThreadLinker: a Markdown link to the thread's
// root message, built without an API call.
func (a *Adapter) ThreadLink(th chat.Thread) string {
	u := a.ThreadURL(th)
	if u == "" {
		return "`" + th.Thread + "`"
	}
	return "[thread](" + u + ")"
}

// ThreadURL implements chat.ThreadURLer: the thread's permalink, which a
// pull request links back to.
func (a *Adapter) ThreadURL(th chat.Thread) string {
	base := strings.TrimRight(a.identity().TeamURL, "/")
	if base == "" || th.Thread == "" {
		return ""
	}
	return base + "/archives/" + url.PathEscape(th.Channel) + "/p" + strings.ReplaceAll(th.Thread, ".", "")
}

// FormatTime implements chat.TimeFormatter: a token Mrkdwn turns into
// Slack's <!date>, shown in each reader's time zone, with the UTC text as
// the fallback.
func (a *Adapter) FormatTime(t time.Time) string {
	return timeOpen + strconv.FormatInt(t.Unix(), 10) + "|" + t.UTC().Format("Jan 2 15:04 UTC") + timeClose
}
