package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sandbot/sandbot/session"
)

// Watcher limits.
const (
	// notStartedTimeout ends a watcher whose turn has not started while the
	// session sits idle (it should start within moments of the message).
	notStartedTimeout = 10 * time.Minute
	// errorGiveUp ends a watcher after this long without a good poll.
	errorGiveUp = 2 * time.Minute
)

// turnFeed is what a watcher needs from the session workflows: read the
// turn (and, for its answer or approval hint, the transcript and the
// session info) and record the messages it posted. Sessions provides it.
type turnFeed interface {
	TurnState(ctx context.Context, id string) (session.TurnState, error)
	Info(ctx context.Context, id string) (session.Info, error)
	History(ctx context.Context, id string, req session.HistoryRequest) ([]session.HistoryEntry, error)
	SharedFile(ctx context.Context, id string, req session.SharedFileRequest) (session.SharedFileData, error)
	RecordChatRef(ctx context.Context, id string, req session.ChatRefRequest) error
	ClaimFinal(ctx context.Context, id string, req session.ClaimFinalRequest) (session.ClaimFinalResponse, error)
	ClaimWatch(ctx context.Context, id string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error)
}

// watchConfig is what a watcher takes from the core's configuration.
type watchConfig struct {
	// Prices turn tokens into cost on cards (see CoreConfig).
	Prices session.Prices
	// PollMin and PollMax bound the polling interval (see CoreConfig).
	PollMin, PollMax time.Duration
	// CallTimeout bounds each call on the session.
	CallTimeout time.Duration
	// ReplicaID is this bot's name in watch leases and final-answer claims.
	ReplicaID string
	// Lease is the watch lease to ask for (see CoreConfig.WatchLease).
	Lease time.Duration
	Clock Clock
	// Budget is the thread's platform budget, with defaults filled in.
	Budget Budget
	// Approvers and ApproverRoles are those of new sessions, named in the
	// hint of who may approve (the workflow has the final word).
	Approvers, ApproverRoles []string
	// Ends is when this replica's holds of each session's watch lease
	// ended, shared by the core's watchers (nil: none kept).
	Ends *holdEnds
	// Posted is the last turn of each session whose answer this process
	// posted, shared by the core's watchers (nil: none kept).
	Posted *postedAnswers
}

// watcher follows one session's turns and renders them into its thread:
// it polls the turn state, renders a card when the state's version moves
// (watcher_show.go), keeps one status message per turn edited in place on
// the platform's pace, then posts the final answer. There is at most one
// per session (see watchers); it follows turns in order up to the highest
// one asked for, then ends.
//
// Everything but the goal (upto) is owned by the watcher's
// goroutine, so polls, edits and posts of one session never overlap.
type watcher struct {
	feed turnFeed
	p    Poster
	th   Thread
	id   string
	cfg  watchConfig
	log  *slog.Logger
	kick chan struct{} // poke: poll now
	done chan struct{} // closed when the goroutine ends

	mu   sync.Mutex
	upto int // highest turn asked for
	// renewed is the latest hold this replica was granted with a message
	// while this watcher ran (the message renews the watcher's lease), so
	// its release names the hold the workflow keeps (see releaseLease).
	renewed time.Time

	approvers string // who may approve, fetched once
	// approverUsers are the people approvers names, for a Notifier.
	approverUsers []User

	// The watch lease, owned by the watcher's goroutine: held says this
	// replica holds it until until, and renews it at renewAt; legacy says
	// the session keeps no lease (its build predates it).
	held           bool
	legacy         bool
	until, renewAt time.Time
	// granted is the end of the current hold as the workflow granted it
	// (ClaimWatchResponse.Until; zero if unknown), which a release names
	// so that it never clears a hold renewed since (ClaimWatchRequest.Held).
	granted time.Time
	// holds counts the times this replica started holding the lease (see
	// startsHolding); a view drawn under an earlier hold rejoins its card
	// (see rejoin).
	holds int
	// lookFirst says another replica (or an earlier process of this
	// bot) may have posted a card of the turn this watcher shows without
	// recording it: true unless the current hold came with a message this
	// process sent (see CardFinder).
	lookFirst bool

	// unrecorded are status cards this replica posted whose record failed
	// without an answer, settled at every poll (watcher_card.go).
	unrecorded []unrecordedCard
}

func newWatcher(feed turnFeed, p Poster, th Thread, cfg watchConfig, log *slog.Logger) *watcher {
	id := th.ID()
	return &watcher{
		feed: feed, p: p, th: th, id: id, cfg: cfg,
		log:  log.With("workflow_id", id),
		kick: make(chan struct{}, 1),
		done: make(chan struct{}),
		// Resumed (no message of ours started it): look first.
		lookFirst: true,
	}
}

// raise asks the watcher to follow up to turn.
func (w *watcher) raise(turn int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.upto = max(w.upto, turn)
}

// renewedWith records a hold granted to this replica with a message
// while the watcher runs.
func (w *watcher) renewedWith(granted time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if granted.After(w.renewed) {
		w.renewed = granted
	}
}

// goal is the highest turn asked for.
func (w *watcher) goal() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.upto
}

// poke makes the watcher poll now.
func (w *watcher) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// run follows turns from want on; after each, release says whether a later
// one was asked for meanwhile (and gives the watch lease up when not).
func (w *watcher) run(ctx context.Context, want int, release func(w *watcher, last int, ok bool) (int, bool)) {
	for {
		last, ok := w.follow(ctx, want)
		next, more := release(w, last, ok)
		if !more {
			return
		}
		want = max(next, last+1)
	}
}

// releaseTimeout bounds giving a lease up at shutdown.
const releaseTimeout = 2 * time.Second

// hold reports whether this replica holds the session's watch lease,
// claiming or renewing it as due. Only the holder renders and posts; the
// others stand by. When the session cannot be asked, a lease still running
// is kept and none is taken.
func (w *watcher) hold(ctx context.Context) bool {
	if w.legacy {
		return true
	}
	now := w.cfg.Clock.Now()
	if w.held && now.Before(w.renewAt) {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	res, err := w.feed.ClaimWatch(cctx, w.id, session.ClaimWatchRequest{Claimer: w.cfg.ReplicaID, For: w.cfg.Lease})
	cancel()
	switch {
	case errors.Is(err, ErrNoWatchLease):
		w.log.Info("watcher: the session's build keeps no watch lease; watching without one")
		w.legacy = true
		return true
	case err != nil:
		w.log.Warn("watcher: claim watch lease", "err", err)
		return w.held && now.Before(w.until)
	case !res.Granted:
		if w.held {
			w.log.Warn("watcher: lost the watch lease; standing by", "holder", res.Holder)
			// Nobody else was granted it before its end in this view.
			w.cfg.Ends.ended(w.id, w.until)
		}
		w.held = false
		return false
	}
	fresh := !w.held || !now.Before(w.until)
	if fresh {
		w.log.Debug("watcher: holds the watch lease")
		if w.held {
			// It ran out in this view before this grant: another replica
			// may have held it meanwhile.
			w.cfg.Ends.ended(w.id, w.until)
		}
	}
	// Measured from before the call, so the local view never outlasts the
	// workflow's.
	w.held, w.until, w.renewAt, w.granted = true, now.Add(w.cfg.Lease), now.Add(w.cfg.Lease/3), res.Until
	if fresh {
		w.lookFirst = true // someone else may have shown the turn meanwhile
		w.startsHolding(now)
	}
	return true
}

// startsHolding is called when this replica starts holding the session's
// watch lease at (granted with a message, or claimed), not when it renews
// one it holds. Another replica may have drawn the session until then and
// filled the thread's edit window shared by every replica on the token:
// the adapter is told (TookOver with no ref) so that this replica's first
// edit there waits the window out, whatever card it edits (a card taken
// over, a new turn's card, its own card where the previous holder's was
// not recorded yet). The chaos suite's load mode counted 12 edits over
// Discord's window around handoffs other than a card's takeover.
//
// Not when this replica's own hold ended less than a window before at: no
// other replica can have edited since then, because every replica waits a
// window from its grant, and its grant came after that end.
func (w *watcher) startsHolding(at time.Time) {
	w.holds++
	window := w.cfg.Budget.HandoffWindow
	tp, ok := w.p.(TakeoverPacer)
	if window <= 0 || !ok {
		return
	}
	if end, ok := w.cfg.Ends.last(w.id); ok && at.Sub(end) < window {
		return
	}
	tp.TookOver(w.th, "")
}

// releaseLease gives the lease up when the watcher ends, on its own or by
// the core's close (a bot shutting down), so another replica — or this
// bot's next start — need not wait for it to run out. Only a process that
// dies, or loses its connection, leaves its lease to run out.
func (w *watcher) releaseLease(ctx context.Context) {
	if !w.held || w.legacy {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(w.cfg.CallTimeout, releaseTimeout))
	defer cancel()
	// Before the release: no other replica is granted the lease earlier.
	end := w.cfg.Clock.Now()
	if w.until.Before(end) {
		end = w.until
	}
	w.cfg.Ends.ended(w.id, end)
	// The later of this watcher's own grants and a message's: both were
	// granted to this replica, and the later is the hold the workflow
	// keeps. Naming an earlier one, the release would be refused as stale
	// and the lease left to run out with nobody watching.
	held := w.granted
	w.mu.Lock()
	if w.renewed.After(held) {
		held = w.renewed
	}
	w.mu.Unlock()
	if _, err := w.feed.ClaimWatch(cctx, w.id, session.ClaimWatchRequest{Claimer: w.cfg.ReplicaID, Release: true, Held: held}); err != nil {
		w.log.Warn("watcher: release watch lease", "err", err)
	}
	w.held = false
}

// holdEnds keeps, per session, when this replica's last hold of the watch
// lease ended (released, or run out in its view): the earliest time another
// replica can have been granted it. It is safe for concurrent use; a nil
// *holdEnds keeps nothing.
type holdEnds struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func newHoldEnds() *holdEnds { return &holdEnds{m: map[string]time.Time{}} }

// holdEndsKept bounds the sessions remembered; past it the oldest half
// is forgotten (a forgotten session only waits a window it need not).
const holdEndsKept = 4096

func (h *holdEnds) ended(id string, at time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.m) >= holdEndsKept {
		var ts []time.Time
		for _, t := range h.m {
			ts = append(ts, t)
		}
		slices.SortFunc(ts, time.Time.Compare)
		cut := ts[len(ts)/2]
		for k, t := range h.m {
			if t.Before(cut) {
				delete(h.m, k)
			}
		}
	}
	h.m[id] = at
}

func (h *holdEnds) last(id string) (time.Time, bool) {
	if h == nil {
		return time.Time{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.m[id]
	return t, ok
}

// finished reports whether a turn is over.
func finished(ts session.TurnState) bool {
	return ts.Status == session.StatusComplete || ts.Status == session.StatusFailed ||
		ts.Destroyed && !ts.Status.Active()
}

// follow polls until turn want (or a later one asked for) has ended and
// been finalized, and returns the last turn it is done with. A turn counts
// as the watcher's only if its number is at least want: a "complete" of an
// earlier turn is not the answer to the message being watched. ok is false
// when it gave up (ctx ended, the session is gone or paused, the turn did
// not start).
func (w *watcher) follow(ctx context.Context, want int) (last int, ok bool) {
	clock := w.cfg.Clock
	interval := w.cfg.PollMin
	var v *view
	var idleSince time.Time
	lastGood := clock.Now()
	for {
		cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
		ts, err := w.feed.TurnState(cctx, w.id)
		cancel()
		if err == nil {
			ts = w.settleCards(ctx, v, ts)
		}
		switch {
		case ctx.Err() != nil:
			return 0, false
		case errors.Is(err, ErrNoSession):
			w.log.Info("watcher: session is gone", "err", err)
			return 0, false
		case err != nil:
			if clock.Now().Sub(lastGood) > errorGiveUp {
				w.log.Error("watcher: giving up after failed polls", "err", err)
				return 0, false
			}
			w.log.Warn("watcher: poll failed", "err", err)
			interval = w.cfg.PollMax
		case ts.Turn < want:
			// The message waits for a turn: the previous one runs, or the
			// workflow is about to start it.
			lastGood = clock.Now()
			if ts.Status.Active() {
				idleSince = time.Time{}
				break
			}
			if ts.Paused || ts.Destroyed {
				w.log.Info("watcher: session paused; /resume or a new message restarts watching", "turn", want)
				return 0, false
			}
			if idleSince.IsZero() {
				idleSince = clock.Now()
			} else if clock.Now().Sub(idleSince) > notStartedTimeout {
				w.log.Warn("watcher: turn did not start", "turn", want, "session_turn", ts.Turn)
				return 0, false
			}
		case !w.hold(ctx):
			// Another replica watches. Stand by, polling slowly: when its
			// lease runs out (it died), this watcher takes over, starting
			// from what the turn state records (the status message to edit).
			lastGood = clock.Now()
			if finished(ts) && ts.FinalRef != "" && !ts.AwaitingPost && ts.Turn >= w.goal() {
				return ts.Turn, true // answered by the holder
			}
			v = nil
			interval = w.cfg.PollMax
		default:
			lastGood = clock.Now()
			if v != nil && ts.Turn > v.turn {
				// The turn ended between two polls and the next one began.
				w.missed(ctx, v, ts)
				return v.turn, true
			}
			if v == nil {
				if ts.Turn-1 > want {
					w.log.Warn("watcher: answers of turns two or more back are not posted: the session keeps no claim for them and another replica may have posted them",
						"from", want, "through", ts.Turn-2, "session_turn", ts.Turn)
				}
				// The turn before this one may have ended with nobody
				// watching it: turns want..ts.Turn-1 ended before this
				// first poll, or the message that started this turn came
				// while no replica watched the one before.
				w.finishUnseen(ctx, ts)
				if ts.Turn > want {
					if ts.Turn > w.goal() {
						return ts.Turn - 1, true
					}
					want = ts.Turn
				}
			}
			if v == nil {
				v = w.newView(ts)
				interval = w.cfg.PollMin
			}
			w.rejoin(v)
			before := v.version
			w.update(ctx, v, ts)
			if v.version != before {
				// Something is happening: stay quick so the next change
				// shows soon; quiet polls back off again.
				interval = w.cfg.PollMin
			}
			if finished(ts) {
				w.finish(ctx, v, ts)
				return ts.Turn, true
			}
			w.flush(ctx, v, false)
			w.share(ctx, v, ts)
		}
		d := interval
		if v != nil && v.pending != nil {
			d = min(d, v.pace.Wait(clock.Now()))
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-w.kick:
			interval = w.cfg.PollMin
		case <-clock.After(d):
			interval = min(interval*3/2, w.cfg.PollMax)
		}
	}
}

// String names the watcher in logs and test failures.
func (w *watcher) String() string { return fmt.Sprintf("watcher(%s)", w.id) }
