package slack

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/lru"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/session"
)

// Slack's native signs of a running turn, beside the card (the adapter's
// chat.TurnObserver side):
//
//   - the assistant thread status, assistant.threads.setStatus: "is
//     working…" under the thread while the turn works, "is waiting for
//     approval…" while a command waits, cleared when the turn ends. Slack
//     clears it itself when the bot posts into the thread (the card, the
//     approval notice), so it is set again after each post, and it drops it
//     two minutes after it was set, so a long working turn re-sends it.
//     Slack accepts it with chat:write in any thread (changelog 2026-03-05).
//   - the agent session, agents.sessions.setStatus: processing while the
//     turn runs (Slack then shows its native stop button; a click sends
//     agent_session_stopped, which takes the Stop button's path), active
//     when it ends, closed when the session is destroyed. Only apps declared
//     as agents (features.agent_view) get sessions.
//
// Slack's changelog of 2026-08-20, as third parties quote it (not read
// first-hand), retires assistant.threads.* in February 2027 in favour of
// agents.sessions.*: once setStatus is refused app-wide (unknown_method,
// method_deprecated…) the status turns itself off as below, and the agent
// session, with its stop button, stays.
//
// None of it may hold up the card: ObserveTurn records what the thread
// should show and a goroutine per thread sends it, the newest wish
// winning. A refusal that says the app cannot use a surface (missing
// scope, not an agent app) turns that surface off for the adapter, logged
// once at info; one that concerns a thread (not an assistant thread, no
// such thread) turns it off for that thread, logged at debug. A rate limit
// or network error gives the wish a few tries, then drops it: the next
// change sends again.

// Thread status texts, shown after the app's name.
const (
	statusWorking  = "is working…"
	statusApproval = "is waiting for approval…"
)

// Agent session statuses (agents.sessions.setStatus).
const (
	agentProcessing = slackgo.AgentSessionStatusProcessing
	agentActive     = slackgo.AgentSessionStatusActive
	agentClosed     = slackgo.AgentSessionStatusClosed
)

// Native-signal pacing.
const (
	// statusRefresh re-sends a working status before Slack's two-minute
	// timeout removes it, for as long as the watcher kept reporting the
	// turn within refreshFor (a replica that stopped watching, because
	// another holds the session's watch lease, soon stops refreshing).
	statusRefresh = 90 * time.Second
	refreshFor    = 10 * time.Minute
	// signalsPerMinute budgets each of assistant.threads.setStatus
	// ("special" rate limits, no number published) and
	// agents.sessions.setStatus (Tier 3) per workspace.
	signalsPerMinute = 50
	// signalTries bounds the attempts at one wish after transient errors.
	signalTries = 3
	// missingStopSubscription is agents.sessions.setStatus's warning when
	// the app does not subscribe to agent_session_stopped.
	missingStopSubscription = "missing_agent_session_stopped_event_subscription"
)

// wish is what a thread should show.
type wish struct{ status, agent string }

// wishFor is what a turn state asks Slack to show.
func wishFor(ts session.TurnState) wish {
	switch {
	case ts.Destroyed && !ts.Status.Active():
		return wish{"", agentClosed}
	case ts.Status == session.StatusThinking:
		return wish{statusWorking, agentProcessing}
	case ts.Status == session.StatusAwaitingApproval:
		// The stop button stays: stopping a turn that waits is allowed.
		return wish{statusApproval, agentProcessing}
	}
	return wish{"", agentActive}
}

// threadSignals is one thread's wishes and what Slack was last told.
type threadSignals struct {
	th         chat.Thread
	want, sent wish
	statusAt   time.Time // when the status was last sent
	seen       time.Time // when the watcher last reported the turn
	initiator  string    // user ID for a new agent session
	tries      int       // failed attempts at the current wish
	running    bool      // a sender goroutine owns the thread
	kick       chan struct{}
	// sending is true while a status call is out; posted then notes that
	// the bot posted meanwhile, so the status may be cleared already.
	sending, postedMeanwhile bool
	// agentSending and agentStale do the same for the session: a native
	// stop while its call is out asks for it to be sent again.
	agentSending, agentStale bool
}

// signals sends the native signals of every thread. Safe for concurrent
// use.
type signals struct {
	a       *Adapter
	refresh time.Duration
	status  *updateBudget
	agent   *updateBudget

	mu      sync.Mutex
	threads map[string]*threadSignals // by workflow ID
	// statusOff and agentOff say why a surface is off for the adapter.
	statusOff, agentOff string
	// offThreads are threads that refused a surface ("status:"/"agent:"
	// + workflow ID).
	offThreads *lru.Cache[string, struct{}]
	warned     bool // the stop-subscription warning was logged
	// senders counts running sender goroutines; quiet is closed and
	// replaced whenever it drops to zero (for Wait).
	senders int
	quiet   chan struct{}
}

func newSignals(a *Adapter) *signals {
	return &signals{
		a: a, refresh: statusRefresh,
		status:     newUpdateBudget(signalsPerMinute, budgetWindow),
		agent:      newUpdateBudget(signalsPerMinute, budgetWindow),
		threads:    map[string]*threadSignals{},
		offThreads: lru.New[string, struct{}](10000),
		quiet:      make(chan struct{}),
	}
}

// wait blocks until no sender runs, or ctx ends. Tests use it to see
// what the signals did without sleeping.
func (s *signals) wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, ch := s.senders, s.quiet
		s.mu.Unlock()
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

// doneLocked is a sender ending.
func (s *signals) doneLocked(t *threadSignals) {
	t.running = false
	s.untrackLocked()
}

// track counts a background sender (also the streams'), for wait.
func (s *signals) track() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.senders++
}

// untrack is a sender counted by track ending.
func (s *signals) untrack() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.untrackLocked()
}

func (s *signals) untrackLocked() {
	if s.senders--; s.senders == 0 {
		close(s.quiet)
		s.quiet = make(chan struct{})
	}
}

// ObserveTurn implements chat.TurnObserver: the thread's status and agent
// session follow the turn, sent in the background.
func (a *Adapter) ObserveTurn(th chat.Thread, ts session.TurnState) {
	a.signals.wish(th, wishFor(ts))
	a.streams.observe(th, ts)
}

// EndTurn implements chat.TurnObserver: the status is cleared and the
// agent session leaves processing; with streaming on, the answer goes
// into the turn's stream.
func (a *Adapter) EndTurn(ctx context.Context, th chat.Thread, ts session.TurnState, answer string) (string, bool) {
	w := wishFor(ts)
	if w.agent == agentProcessing {
		w = wish{"", agentActive} // a turn that ended between polls
	}
	a.signals.wish(th, w)
	return a.streams.end(ctx, th, ts, answer)
}

// noteUser remembers who last wrote to a thread's session: the initiator
// of its agent session and the recipient of its streams.
func (s *signals) noteUser(th chat.Thread, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.threads[th.ID()]; t != nil {
		t.initiator = user
	}
	s.a.askers.Put(th.ID(), user)
}

// wish records what th should show and makes sure a sender works on it.
// A thread that never showed anything is not told it is idle.
func (s *signals) wish(th chat.Thread, w wish) {
	if th.Thread == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := th.ID()
	t := s.threads[id]
	if t == nil {
		if w.agent != agentProcessing {
			return
		}
		t = &threadSignals{th: th, kick: make(chan struct{}, 1)}
		t.initiator, _ = s.a.askers.Get(id)
		s.threads[id] = t
	}
	if t.want != w {
		t.want, t.tries = w, 0
	}
	t.seen = time.Now()
	s.startLocked(t)
}

// posted is the bot having posted into th: Slack cleared its status.
func (s *signals) posted(th chat.Thread) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.threads[th.ID()]
	if t == nil {
		return
	}
	t.postedMeanwhile = t.sending
	if t.sent.status != "" || t.sending {
		t.sent.status = ""
		s.startLocked(t)
	}
}

// stopped is a user's click on the native stop button: Slack leaves the
// session processing until the app moves it, so the thread's current
// wish is sent again (processing if the turn still runs, active once it
// ended). A thread this replica knows nothing of (another replica watches
// its turn, or none runs) is made active after a stop that went to the
// core; after a refused one it is left as it is, for whoever watches it.
func (s *signals) stopped(th chat.Thread, refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.threads[th.ID()]
	if t == nil && refused {
		return
	}
	if t == nil {
		t = &threadSignals{th: th, kick: make(chan struct{}, 1), want: wish{"", agentActive}}
		s.threads[th.ID()] = t
	}
	t.sent.agent, t.tries = "", 0
	t.agentStale = t.agentSending
	s.startLocked(t)
}

// has reports whether a thread refused a surface (key "status:"/"agent:"
// + workflow ID).
func (s *signals) has(key string) bool {
	_, ok := s.offThreads.Get(key)
	return ok
}

// startLocked wakes t's sender, starting one if none runs.
func (s *signals) startLocked(t *threadSignals) {
	if t.running {
		select {
		case t.kick <- struct{}{}:
		default:
		}
		return
	}
	t.running = true
	s.senders++
	go s.run(t)
}

// run sends t's wishes until Slack shows them, then ends (or, while the
// turn works, waits to refresh the status).
func (s *signals) run(t *threadSignals) {
	ctx := s.a.runContext()
	for {
		s.mu.Lock()
		send, wait := s.nextLocked(t, time.Now())
		if send == nil && wait <= 0 {
			s.doneLocked(t)
			if t.want == t.sent && t.want.agent != agentProcessing {
				delete(s.threads, t.th.ID())
			}
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if send != nil {
			send(ctx)
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-t.kick:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		if ctx.Err() != nil {
			s.mu.Lock()
			s.doneLocked(t)
			s.mu.Unlock()
			return
		}
	}
}

// nextLocked is the next call t needs, or how long to wait before a
// refresh is due (0: nothing more to do).
func (s *signals) nextLocked(t *threadSignals, now time.Time) (send func(context.Context), wait time.Duration) {
	id := t.th.ID()
	statusOn := s.statusOff == "" && !s.has("status:"+id)
	agentOn := s.agentOff == "" && !s.has("agent:"+id)
	if t.tries >= signalTries {
		// Give the wish up; Slack keeps what it had (the status expires
		// by itself).
		t.sent, t.tries = t.want, 0
	}
	// The session first: its processing state is what offers the stop.
	if agentOn && t.want.agent != t.sent.agent {
		return func(ctx context.Context) { s.sendAgent(ctx, t) }, 0
	}
	if statusOn && t.want.status != t.sent.status {
		return func(ctx context.Context) { s.sendStatus(ctx, t) }, 0
	}
	if statusOn && t.want.status == statusWorking && t.sent.status == statusWorking && now.Sub(t.seen) < refreshFor {
		if due := t.statusAt.Add(s.refresh).Sub(now); due > 0 {
			return nil, due
		}
		return func(ctx context.Context) { s.sendStatus(ctx, t) }, 0
	}
	return nil, 0
}

// sendStatus and sendAgent send the thread's newest wish once the budget
// allows a call (the wish may have changed while they waited).
func (s *signals) sendStatus(ctx context.Context, t *threadSignals) {
	if err := s.status.acquire(ctx); err != nil {
		return
	}
	s.mu.Lock()
	v := t.want.status
	t.sending, t.postedMeanwhile = true, false
	s.mu.Unlock()
	err := s.a.api.SetAssistantThreadsStatusContext(ctx, slackgo.AssistantThreadsSetStatusParameters{
		ChannelID: t.th.Channel, ThreadTS: t.th.Thread, Status: v,
	})
	metrics.ChatCall(Platform, "assistant.threads.setStatus", err != nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	t.sending = false
	if err == nil {
		t.sent.status, t.statusAt, t.tries = v, time.Now(), 0
		if t.postedMeanwhile {
			// The bot posted while the status was on its way: Slack may
			// have shown it and cleared it. Send it again.
			t.sent.status = ""
		}
		return
	}
	s.refusedLocked(ctx, t, "status", "assistant.threads.setStatus", err, s.status)
}

func (s *signals) sendAgent(ctx context.Context, t *threadSignals) {
	if err := s.agent.acquire(ctx); err != nil {
		return
	}
	s.mu.Lock()
	v, initiator := t.want.agent, t.initiator
	t.agentSending, t.agentStale = true, false
	s.mu.Unlock()
	res, err := s.a.api.SetAgentSessionStatusContext(ctx, slackgo.AgentSessionSetStatusParameters{
		Status: v, ChannelID: t.th.Channel, ThreadTS: t.th.Thread, InitiatorUserID: initiator,
	})
	metrics.ChatCall(Platform, "agents.sessions.setStatus", err != nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	t.agentSending = false
	if err == nil {
		t.sent.agent, t.tries = v, 0
		if t.agentStale {
			t.sent.agent = ""
		}
		if res != nil && strings.Contains(res.Warning, missingStopSubscription) && !s.warned {
			s.warned = true
			s.a.log.Info("slack: agent sessions work, but the app does not subscribe to agent_session_stopped, so Slack's stop button does nothing; add the event (see deploy/slack-app-manifest.yaml)")
		}
		return
	}
	s.refusedLocked(ctx, t, "agent", "agents.sessions.setStatus", err, s.agent)
}

// appWideRefusals are error codes that say the app cannot use a method at
// all (in this workspace), rather than in one thread.
var appWideRefusals = map[string]bool{
	"missing_scope": true, "not_allowed_token_type": true, "not_allowed": true, "unknown_method": true,
	"method_deprecated": true, "feature_not_enabled": true, "access_denied": true, "no_permission": true,
	"not_authed": true, "invalid_auth": true, "account_inactive": true, "token_revoked": true,
	"team_access_not_granted": true, "app_not_agent": true,
}

// refusedLocked handles a failed signal call: a refusal turns the surface
// off for the app or the thread; anything else costs the wish a try.
func (s *signals) refusedLocked(ctx context.Context, t *threadSignals, surface, method string, err error, b *updateBudget) {
	var rl *slackgo.RateLimitedError
	var se slackgo.SlackErrorResponse
	switch {
	case errors.As(err, &rl):
		b.pause(max(rl.RetryAfter, time.Second))
		t.tries++
	case errors.As(err, &se) && appWideRefusals[se.Err]:
		why := method + " answered " + se.Err
		if surface == "status" {
			s.statusOff = why
			s.a.log.Info("slack: thread status is off for this app", "why", why, "fix", "the bot token needs chat:write (or assistant:write)")
		} else {
			s.agentOff = why
			s.a.log.Info("slack: agent sessions are off for this app; the card's Stop button still works", "why", why,
				"fix", "declare the app as an agent (features.agent_view) to get Slack's native stop button")
		}
	case errors.As(err, &se):
		s.offThreads.Add(surface+":"+t.th.ID(), struct{}{})
		s.a.log.Debug("slack: a native signal is off for this thread", "thread_id", t.th.ID(), "method", method, "error", se.Err)
	case ctx.Err() != nil:
	default:
		t.tries++
		s.a.log.Debug("slack: native signal failed", "thread_id", t.th.ID(), "method", method, "err", err)
	}
}

// onAgentStop handles a click on Slack's native stop button: the Stop
// button's path (chat.ActionStop for the thread's session), with the same
// checks as a click on the card (allowed users and channels). The event
// reached us over the Socket Mode connection or a request signed with the
// signing secret, as every event does: the user it names is Slack's word.
func (a *Adapter) onAgentStop(ctx context.Context, team string, e *slackevents.AgentSessionStoppedEvent) error {
	if e.Channel == "" || e.ThreadTimestamp == "" {
		return nil
	}
	if !a.seen.Add("stop:"+e.Channel+":"+e.ThreadTimestamp+":"+e.EventTimestamp, struct{}{}) {
		return nil // a redelivery
	}
	th := a.thread(team, e.Channel, e.ThreadTimestamp)
	a.streams.halted(th, e.StreamingMessageTimestamps)
	reply := func(ctx context.Context, text string) error {
		return a.ephemeral(ctx, e.Channel, e.ThreadTimestamp, e.User, text)
	}
	// Whatever happens, Slack needs the session moved on.
	refusal := ""
	switch {
	case e.User == "":
		a.signals.stopped(th, true)
		return nil
	case !a.allowedUser(e.User):
		refusal = "You are not on this bot's list of allowed users."
	case !a.allowedChannel(e.Channel):
		refusal = "This bot is not enabled in this channel."
	}
	if refusal != "" {
		defer a.signals.stopped(th, true)
		return reply(ctx, refusal)
	}
	defer a.signals.stopped(th, false)
	return a.core.HandleAction(ctx, a, chat.Action{
		ID: chat.ActionStop, User: a.user(ctx, e.User, ""), Thread: th, Reply: reply,
	})
}

// runContext is Run's context (the background before Run).
func (a *Adapter) runContext() context.Context {
	if a.ctx == nil {
		return context.Background()
	}
	return a.ctx
}
