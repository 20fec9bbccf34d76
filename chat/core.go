package chat

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sandbot/sandbot/session"
)

// StartDefaults is what a session started by a chat message begins with.
// The message's author becomes the owner and the first line of the message
// the title.
type StartDefaults struct {
	Settings session.Settings
	// Backend is the sandbox backend of new sessions ("" lets the workflow
	// pick its default).
	Backend string
}

// CoreConfig configures a Core. Zero fields take the documented defaults.
type CoreConfig struct {
	Start StartDefaults
	// TemporalUIBase is the Temporal Web UI address for /status links, for
	// example "http://localhost:8233" ("" leaves the link out).
	TemporalUIBase string
	// Namespace is the Temporal namespace (default "default").
	Namespace string
	// Budgets holds each platform's edit pacing and size budget, keyed by
	// Location.Platform; platforms not listed get DefaultBudget.
	Budgets map[string]Budget
	// PollMin and PollMax bound the turn watcher's polling interval: it
	// starts at PollMin when a turn begins (or after an approval) and grows
	// by half each quiet poll up to PollMax. Defaults 150 ms and 1 s.
	PollMin, PollMax time.Duration
	// CallTimeout bounds quick Temporal calls (messages, approvals, queries);
	// default 30 s. LongCallTimeout bounds calls that wait for the session
	// (pause, stop, destroy, fork, backend); default 10 min.
	CallTimeout, LongCallTimeout time.Duration
	// Authorize, if set, is asked before every message, command and action.
	// A returned *UserError's text is shown to the user; any other error
	// shows a generic refusal. The workflow still checks approval rights.
	Authorize func(ctx context.Context, u User, th Thread) error
	// Backends are the backend names shown by /help and /backend (display
	// only: the workflow validates switches).
	Backends []string
	// ServedBackends, if set, reports which backends running workers serve
	// right now; /backend and /fork refuse any other with a list of those
	// that are.
	ServedBackends func(ctx context.Context) ([]string, error)
	// Clock is the time source of watchers (default: the real clock).
	Clock Clock
	// ReplicaID names this bot process when it claims a turn's answer
	// (session.UpdateClaimFinal), so two replicas never both post it.
	// Default: host name, process ID and a random suffix.
	ReplicaID string
	// WatchLease is the watch lease a watcher asks for (see
	// session.UpdateClaimWatch); default session.WatchLease. Only the
	// replica holding a session's lease renders and posts its turns;
	// another takes over within about this long after the holder dies.
	WatchLease time.Duration
	// Repos is how messages name repositories (see RepoConfig).
	Repos RepoConfig
	// Prices show what turns and sessions cost (zero: tokens only).
	Prices session.Prices
	// ScanEvery is how often the core looks for sessions that need a bot
	// and have none (a turn running or an answer unposted, with no live
	// watch lease) once Resume was called; default session.WatchLease/3.
	ScanEvery time.Duration
}

func (cfg CoreConfig) withDefaults() CoreConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.PollMin, 150*time.Millisecond)
	def(&cfg.PollMax, time.Second)
	if cfg.PollMax < cfg.PollMin {
		cfg.PollMax = cfg.PollMin
	}
	def(&cfg.CallTimeout, 30*time.Second)
	def(&cfg.LongCallTimeout, 10*time.Minute)
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = defaultReplicaID()
	}
	def(&cfg.WatchLease, session.WatchLease)
	cfg.WatchLease = min(max(cfg.WatchLease, session.WatchLeaseMin), session.WatchLeaseMax)
	def(&cfg.ScanEvery, cfg.WatchLease/3)
	return cfg
}

// defaultReplicaID is unique per process: a restarted bot is a new replica,
// and may take over a claim its predecessor left only after the workflow's
// takeover time.
func defaultReplicaID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:8])
}

// Core is the platform-neutral bot: it routes messages, commands and
// button clicks of every platform to session workflows and keeps one turn
// watcher per active session that renders progress into the thread.
//
// All methods are safe for concurrent use; adapters call them from their
// event goroutines after acknowledging the platform. Watchers run on their
// own goroutines, detached from the context of the event that started them
// (an HTTP handler's context ends when it returns), until their turn ends
// or Close is called.
type Core struct {
	cfg CoreConfig
	s   Sessions
	log *slog.Logger
	// commands is commandTable. /help lists it through this field: read
	// from the handler directly, the table would refer to itself (an
	// initialization cycle).
	commands []command
	watchers *watchers

	scanMu   sync.Mutex
	scanning map[string]*scanLoop // by platform
}

// NewCore returns a Core using s for sessions. log may be nil.
func NewCore(cfg CoreConfig, s Sessions, log *slog.Logger) *Core {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Core{cfg: cfg.withDefaults(), s: s, log: log, commands: commandTable}
	ends, posted := newHoldEnds(), newPostedAnswers()
	c.watchers = newWatchers(func(p Poster, th Thread) *watcher {
		cfg := c.watchConfig(th.Platform)
		cfg.Ends, cfg.Posted = ends, posted
		return newWatcher(s, p, th, cfg, log)
	})
	return c
}

// watchConfig is what the watchers of platform's threads take from the
// core's configuration.
func (c *Core) watchConfig(platform string) watchConfig {
	return watchConfig{
		PollMin: c.cfg.PollMin, PollMax: c.cfg.PollMax, CallTimeout: c.cfg.CallTimeout,
		ReplicaID:     c.cfg.ReplicaID,
		Lease:         c.cfg.WatchLease,
		Clock:         c.cfg.Clock,
		Budget:        c.budget(platform),
		Approvers:     c.cfg.Start.Settings.Approvers,
		ApproverRoles: c.cfg.Start.Settings.ApproverRoles,
		Prices:        c.cfg.Prices,
	}
}

// Close stops every watcher and waits for them. Turns keep running in their
// workflows; a restarted bot picks them up with Resume. Handle* calls after
// Close still reach the sessions but start no watchers.
func (c *Core) Close() { c.watchers.close() }

// Wait blocks until no watcher is running (all watched turns ended).
func (c *Core) Wait() { c.watchers.wait() }

// WaitThread blocks until no watcher runs for th, or ctx ends.
func (c *Core) WaitThread(ctx context.Context, th Thread) error {
	return c.watchers.waitThread(ctx, th.ID())
}

// HandleMessage handles a message addressed to the bot: a command (see
// ParseCommand) is run and answered in the thread; anything else is sent to
// the thread's session (starting one if needed) and its turn is watched. An
// empty or oversized message is answered with a hint and starts no turn; a
// redelivered event (same EventID) starts nothing new. m.EventID must be
// set.
//
// Problems the user can fix are answered in the thread and return nil; the
// returned error is for internal failures, already answered with a generic
// line.
func (c *Core) HandleMessage(ctx context.Context, p Poster, m Message) error {
	th := m.Thread
	if err := c.authorize(ctx, m.User, th); err != nil {
		c.say(ctx, p, th, UserMessage(err))
		return nil
	}
	text := strings.TrimSpace(m.Text)
	if text == "" && len(m.Files) > 0 {
		// Files alone are a message too: the model reads what came with
		// them.
		text = filesOnlyText
	}
	if text == "" {
		c.say(ctx, p, th, "Tell me what to do in this thread, or send /help for commands.")
		return nil
	}
	if cmd, ok, err := ParseCommand(text); ok {
		if err != nil {
			// One short line, the same for every platform and prefix; /help
			// has the list.
			c.say(ctx, p, th, err.Error())
			return nil
		}
		r, err := c.HandleCommand(ctx, p, th, m.User, cmd)
		c.deliver(ctx, p, th, r)
		return err
	}
	if n := len(text); n > session.MaxMessageBytes {
		c.say(ctx, p, th, fmt.Sprintf("Your message is %d bytes; the limit is %d bytes. Put large content in a file in the workspace and point me at it.", n, session.MaxMessageBytes))
		return nil
	}
	if m.EventID == "" {
		c.say(ctx, p, th, internalErrorText)
		return errors.New("chat: message has no EventID; adapters must pass the platform's event ID so redeliveries are recognised")
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	req := session.MessageRequest{EventID: m.EventID, User: m.User, Text: text, Ref: m.Ref, Context: contextText(m.Context), Attachments: m.Files}
	if req.MessageBytes() > session.MaxMessageBytes {
		req.Context = "" // the message itself wins; the thread's past is a bonus
	}
	if err := session.CheckAttachments(req.Attachments); err != nil {
		c.say(ctx, p, th, "Your message was not sent: "+err.Error()+".")
		return nil
	}
	if n := req.MessageBytes(); n > session.MaxMessageBytes {
		c.say(ctx, p, th, fmt.Sprintf("Your message and its %d attachments' descriptions are %d bytes together; the limit is %d bytes. Send fewer files or a shorter message.", len(req.Attachments), n, session.MaxMessageBytes))
		return nil
	}
	if model, rest, ok := cutModel(text); ok {
		if strings.TrimSpace(rest) == "" {
			c.say(ctx, p, th, "model="+model+" picks the model for a task; add the task after it, or use /model "+model+".")
			return nil
		}
		req.Model, req.Text = model, strings.TrimSpace(rest)
	}
	if spec, named, err := c.messageRepo(th, text); err != nil {
		c.say(ctx, p, th, err.Error())
		return nil
	} else if spec != nil {
		req.Repo = spec
		if named {
			c.log.Info("message names a repository", "workflow_id", th.ID(), "repo", spec.Name())
		}
	}
	start := c.startInput(th, m.User, text)
	if m.Backend != "" {
		if msg := c.checkServed(cctx, m.Backend); msg != "" {
			c.say(ctx, p, th, msg)
			return nil
		}
		start.Backend = m.Backend
	}
	// The watch lease comes with the message: one update instead of two
	// at the start of the turn (see session.MessageRequest.Watch).
	req.Watch = &session.WatchClaim{Claimer: c.cfg.ReplicaID, For: c.cfg.WatchLease}
	asked := c.cfg.Clock.Now()
	var granted time.Time
	resp, err := c.s.Send(cctx, start, req)
	if err != nil {
		c.say(ctx, p, th, UserMessage(err))
		return c.internal(err, "send", th.ID())
	}
	if !resp.Watch.GrantedTo(c.cfg.ReplicaID) {
		// Not granted (another replica holds it), not offered (an older
		// build), or granted to another replica: Temporal answers a
		// repeated update ID (a redelivered event another replica sent
		// first) with the first sender's outcome, lease and all. The
		// watcher claims it as it always did.
		asked = time.Time{}
	} else {
		granted = resp.Watch.Until
	}
	c.log.Info("message sent", "workflow_id", th.ID(), "event_id", m.EventID, "turn", resp.Turn,
		"duplicate", resp.Duplicate, "queued", resp.Queued)
	if r, ok := p.(Reactor); ok && m.Ref != "" && !resp.Duplicate {
		if err := r.React(ctx, th, m.Ref, ReactionWorking); err != nil {
			c.log.Warn("react to the message", "workflow_id", th.ID(), "err", err)
		}
	}
	// A duplicate resumes watching only if nobody watches its turn here;
	// watch is idempotent and a finished turn with both refs recorded ends
	// the watcher at its first poll.
	c.watchers.watchHeld(p, th, resp.Turn, asked, granted)
	return nil
}

// startInput is the SessionInput of a session started by a message.
func (c *Core) startInput(th Thread, u User, text string) session.SessionInput {
	title, _, _ := strings.Cut(text, "\n")
	return session.SessionInput{
		Location: th,
		Owner:    u,
		Title:    truncate(strings.TrimSpace(title), 60),
		Backend:  c.cfg.Start.Backend,
		Settings: c.cfg.Start.Settings,
	}
}

// Resume is called when a bot starts (and when its platform connection is
// re-established): it finds the platform's sessions that need a bot — a
// turn running, or one that ended with its answer unposted — and watches
// those nobody else holds the watch lease of, editing the status message
// recorded in the turn state instead of posting a new one. It then keeps
// doing so every ScanEvery until the core closes, so when the replica
// watching a session dies, another takes over once its lease runs out.
//
// It returns the first listing's error, for the caller to log, and scans
// on all the same: a bot that starts while the Temporal server restarts
// fails its first listing, and it used to return there without its
// periodic scan, so for the rest of its life it never took over a session
// whose watcher died, nor drew a turn nobody else watched.
//
// Where sessions are indexed (search attributes) only sessions flagged as
// needing a bot are listed, so a scan does not query months of idle
// sessions.
func (c *Core) Resume(ctx context.Context, p Poster, platform string) error {
	n, listed, err := c.scan(ctx, p, platform)
	if err == nil {
		c.log.Info("resumed watchers", "platform", platform, "sessions", listed, "watching", n)
	} else {
		c.log.Warn("resume: the first scan failed; scanning again every interval", "platform", platform, "every", c.cfg.ScanEvery, "err", err)
	}
	c.startScans(p, platform)
	return err
}

// startScans starts platform's periodic scan, or hands a running one the
// new poster (a reconnect).
func (c *Core) startScans(p Poster, platform string) {
	c.scanMu.Lock()
	defer c.scanMu.Unlock()
	if c.scanning == nil {
		c.scanning = map[string]*scanLoop{}
	}
	if l := c.scanning[platform]; l != nil {
		l.setPoster(p) // a reconnect: the loop goes on with the new poster
		return
	}
	l := &scanLoop{p: p}
	c.scanning[platform] = l
	c.watchers.spawn(func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.cfg.Clock.After(c.cfg.ScanEvery):
			}
			if _, _, err := c.scan(ctx, l.poster(), platform); err != nil && ctx.Err() == nil {
				c.log.Warn("scan for unwatched sessions", "platform", platform, "err", err)
			}
		}
	})
}

// scanCallTimeout bounds each turn-state query of a scan.
const scanCallTimeout = 5 * time.Second

// scanLoop is the state of one platform's periodic scan.
type scanLoop struct {
	mu sync.Mutex
	p  Poster
}

func (l *scanLoop) setPoster(p Poster) { l.mu.Lock(); l.p = p; l.mu.Unlock() }
func (l *scanLoop) poster() Poster     { l.mu.Lock(); defer l.mu.Unlock(); return l.p }

// scan starts a watcher for every listed session that needs one and has
// no live watch lease, and returns how many it started and listed.
func (c *Core) scan(ctx context.Context, p Poster, platform string) (started, listed int, err error) {
	list, err := c.s.List(ctx, ListFilter{Platform: platform, ActiveOnly: true, TurnActive: true})
	if err != nil {
		return 0, 0, fmt.Errorf("chat: resume %s: %w", platform, err)
	}
	for _, s := range list {
		if ctx.Err() != nil {
			break
		}
		if c.watchers.poke(s.WorkflowID) {
			continue // watched here already
		}
		// A session whose workers are all down cannot answer; it must not
		// hold up the scan of the others for long.
		cctx, cancel := context.WithTimeout(ctx, min(c.cfg.CallTimeout, scanCallTimeout))
		ts, err := c.s.TurnState(cctx, s.WorkflowID)
		cancel()
		if err != nil {
			c.log.Warn("resume: turn state", "workflow_id", s.WorkflowID, "err", err)
			continue
		}
		if needsWatch(ts) && (ts.Watcher == "" || ts.Watcher == c.cfg.ReplicaID || !c.cfg.Clock.Now().Before(ts.WatchUntil)) {
			c.log.Debug("scan: watching a session nobody watches", "workflow_id", s.WorkflowID, "turn", ts.Turn,
				"status", ts.Status, "awaiting_post", ts.AwaitingPost, "watcher", ts.Watcher, "watch_until", ts.WatchUntil)
			c.watchers.watch(p, s.Location, ts.Turn)
			started++
		}
	}
	return started, len(list), nil
}

// needsWatch reports whether a turn found by a scan still needs a
// watcher: it runs, or it ended and its answer was not posted (the
// workflow says so since the watch lease; before, a turn whose status
// message was posted but not its answer).
func needsWatch(ts session.TurnState) bool {
	if ts.Status.Active() || ts.AwaitingPost {
		return true
	}
	return ts.Turn > 0 && finished(ts) && ts.StatusRef != "" && ts.FinalRef == ""
}

// nudge makes the session's watcher poll now, starting one if the session
// has an active turn and nobody watches it.
func (c *Core) nudge(ctx context.Context, p Poster, th Thread) {
	id := th.ID()
	if c.watchers.poke(id) {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	ts, err := c.s.TurnState(cctx, id)
	if err != nil {
		c.log.Warn("nudge: turn state", "workflow_id", id, "err", err)
		return
	}
	if ts.Status.Active() {
		c.watchers.watch(p, th, ts.Turn)
	}
}

func (c *Core) authorize(ctx context.Context, u User, th Thread) error {
	if c.cfg.Authorize == nil {
		return nil
	}
	err := c.cfg.Authorize(ctx, u, th)
	var ue *UserError
	if err != nil && !errors.As(err, &ue) {
		return &UserError{Msg: "You may not use this bot here.", Err: err}
	}
	return err
}

// internal logs err and returns it wrapped unless it is a *UserError (the
// user was told and nothing is wrong with the bot).
func (c *Core) internal(err error, op, id string) error {
	var ue *UserError
	if errors.As(err, &ue) {
		c.log.Info(op+" refused", "workflow_id", id, "reason", ue.Msg)
		return nil
	}
	c.log.Error(op+" failed", "workflow_id", id, "err", err)
	return fmt.Errorf("chat: %s: %w", op, err)
}

// say posts a short text answer, logging a failure.
func (c *Core) say(ctx context.Context, p Poster, th Thread, text string) {
	if _, err := p.PostText(ctx, th, text); err != nil {
		c.log.Warn("post reply failed", "thread_id", th.ID(), "err", err)
	}
}

// deliver posts a command reply in the thread (a message has no ephemeral
// channel, so Ephemeral is ignored here).
func (c *Core) deliver(ctx context.Context, p Poster, th Thread, r Reply) {
	switch {
	case r.Card != nil:
		if _, err := p.Post(ctx, th, *r.Card); err != nil {
			c.log.Warn("post reply failed", "thread_id", th.ID(), "err", err)
		}
	case r.Text != "":
		c.say(ctx, p, th, r.Text)
	}
}

func (c *Core) budget(platform string) Budget {
	b, ok := c.cfg.Budgets[platform]
	if !ok {
		b = DefaultBudget
	}
	return b.withDefaults()
}

// mention renders u for p's platform.
func mention(p Poster, u User) string {
	if m, ok := p.(Mentioner); ok {
		return m.Mention(u)
	}
	if u.Name != "" {
		return "@" + u.Name
	}
	if u.ID != "" {
		return "@" + u.ID
	}
	return "someone"
}

// threadLink renders th for p's platform.
func threadLink(p Poster, th Thread) string {
	if l, ok := p.(ThreadLinker); ok {
		if s := l.ThreadLink(th); s != "" {
			return s
		}
	}
	return "`" + th.Thread + "`"
}

// truncate cuts s to at most n runes, ending with "…" when cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return string(r[:n])
	}
	return string(r[:n-1]) + "…"
}

// orDefault is s, or fallback when s is empty.
func orDefault(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
