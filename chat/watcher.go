package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strings"
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
	// maxCatchUp bounds how many unseen turns' answers one watcher posts.
	maxCatchUp = 3
)

// watcher follows one session's turns and renders them into its thread:
// one status message per turn, edited in place on the platform's pace,
// then the final answer. There is at most one per session in a Core; it
// follows turns in order up to the highest one asked for, then ends.
//
// Everything but upto is owned by the watcher's goroutine, so polls, edits
// and posts of one session never overlap.
type watcher struct {
	c      *Core
	p      Poster
	th     Thread
	id     string
	budget Budget
	log    *slog.Logger
	kick   chan struct{} // poke: poll now
	done   chan struct{} // closed when the goroutine ends

	// Guarded by c.mu:
	upto  int // highest turn asked for
	fresh int // lowest turn a new (not redelivered) message asked for; 0: none

	approvers string // who may approve, fetched once
}

// view is what the watcher shows of one turn.
type view struct {
	turn    int
	ref     string // status message, "" until posted
	version int64  // version last rendered
	shown   *Card  // card on screen (nil: unknown or none)
	pending *Card  // newer card waiting for its edit
	lastEnd time.Time
	// tokens and tokensAt are the edit bucket when Budget.EditBurst > 1.
	tokens   float64
	tokensAt time.Time
	last     session.TurnState
}

// watch makes sure a watcher follows th's session up to turn. It is
// idempotent: a running watcher only raises its goal. fresh says a new
// message asked for turn, so if the turn ends unseen (between two polls)
// its answer is still posted, from the transcript.
func (c *Core) watch(p Poster, th Thread, turn int, fresh bool) {
	id := th.ID()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if w := c.watchers[id]; w != nil {
		if turn > w.upto {
			w.upto = turn
		}
		if fresh && (w.fresh == 0 || turn < w.fresh) {
			w.fresh = turn
		}
		w.poke()
		return
	}
	w := &watcher{
		c: c, p: p, th: th, id: id,
		budget: c.budget(th.Platform),
		log:    c.log.With("workflow_id", id),
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		upto:   turn,
	}
	if fresh {
		w.fresh = turn
	}
	c.watchers[id] = w
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(w.done)
		w.run(c.ctx, turn)
	}()
}

// release ends the watcher unless a later turn was asked for meanwhile.
func (c *Core) release(w *watcher, last int, ok bool) (next int, more bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok && w.upto > last && !c.closed {
		return w.upto, true
	}
	delete(c.watchers, w.id)
	return 0, false
}

// goal is the highest turn asked for.
func (w *watcher) goal() int {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.upto
}

// freshFrom is the lowest turn whose answer this watcher must post even if
// it never saw the turn (math.MaxInt: none).
func (w *watcher) freshFrom() int {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if w.fresh == 0 {
		return math.MaxInt
	}
	return w.fresh
}

func (w *watcher) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *watcher) run(ctx context.Context, want int) {
	for {
		last, ok := w.follow(ctx, want)
		next, more := w.c.release(w, last, ok)
		if !more {
			return
		}
		want = max(next, last+1)
	}
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
	cfg := w.c.cfg
	clock := w.c.clock
	interval := cfg.PollMin
	var v *view
	var idleSince time.Time
	lastGood := clock.Now()
	for {
		cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
		ts, err := w.c.s.TurnState(cctx, w.id)
		cancel()
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
			interval = cfg.PollMax
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
		default:
			lastGood = clock.Now()
			if v != nil && ts.Turn > v.turn {
				// The turn ended between two polls and the next one began.
				w.missed(ctx, v)
				return v.turn, true
			}
			if v == nil && ts.Turn > want {
				// Turns want..ts.Turn-1 ended before the first poll.
				w.catchUp(ctx, max(want, w.freshFrom()), ts.Turn)
				if ts.Turn > w.goal() {
					return ts.Turn - 1, true
				}
				want = ts.Turn
			}
			if v == nil {
				v = &view{turn: ts.Turn, ref: ts.StatusRef, version: -1}
				interval = cfg.PollMin
			}
			before := v.version
			w.update(ctx, v, ts)
			if v.version != before {
				// Something is happening: stay quick so the next change
				// shows soon; quiet polls back off again.
				interval = cfg.PollMin
			}
			if finished(ts) {
				w.finish(ctx, v, ts)
				return ts.Turn, true
			}
			w.flush(ctx, v, false)
		}
		d := interval
		if v != nil && v.pending != nil {
			d = min(d, max(w.nextEdit(v).Sub(clock.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-w.kick:
			interval = cfg.PollMin
		case <-clock.After(d):
			interval = min(interval*3/2, cfg.PollMax)
		}
	}
}

// update renders ts if its version moved and queues the card if it differs
// from what is shown.
func (w *watcher) update(ctx context.Context, v *view, ts session.TurnState) {
	if ts.Version == v.version {
		return
	}
	v.version = ts.Version
	v.last = ts
	if ts.Pending != nil && w.approvers == "" {
		w.approvers = w.approverHint(ctx)
	}
	card := RenderTurn(ts, w.renderOptions())
	if v.shown != nil && reflect.DeepEqual(*v.shown, card) {
		v.pending = nil
		return
	}
	v.pending = &card
}

func (w *watcher) renderOptions() RenderOptions {
	return RenderOptions{
		WorkflowID:     w.id,
		MaxButtonValue: w.budget.MaxButtonValue,
		MaxChars:       w.budget.MaxCardChars,
		Mention:        func(u User) string { return mention(w.p, u) },
		Approvers:      w.approvers,
	}
}

// approverHint says who may decide approvals: the owner plus configured
// approvers and roles of new sessions (the workflow has the final word).
func (w *watcher) approverHint(ctx context.Context) string {
	cctx, cancel := context.WithTimeout(ctx, w.c.cfg.CallTimeout)
	defer cancel()
	info, err := w.c.s.Info(cctx, w.id)
	if err != nil {
		w.log.Warn("watcher: info", "err", err)
		return ""
	}
	who := []string{mention(w.p, info.Owner) + " (owner)"}
	st := w.c.cfg.Start.Settings
	for _, a := range st.Approvers {
		who = append(who, mention(w.p, User{ID: a}))
	}
	for _, r := range st.ApproverRoles {
		who = append(who, "role "+r)
	}
	return strings.Join(who, ", ")
}

// nextEdit is when the next edit of v's message may start.
func (w *watcher) nextEdit(v *view) time.Time {
	iv := w.budget.MinEditInterval
	if w.budget.EditBurst <= 1 {
		return v.lastEnd.Add(iv)
	}
	now := w.c.clock.Now()
	if v.tokensAt.IsZero() {
		return now // nothing spent yet: the bucket is full
	}
	tokens := w.refill(v, now)
	if tokens >= 1 {
		return now
	}
	// A millisecond of slack keeps float rounding from going early.
	return now.Add(time.Duration((1-tokens)*float64(iv)) + time.Millisecond)
}

func (w *watcher) refill(v *view, now time.Time) float64 {
	t := v.tokens + float64(now.Sub(v.tokensAt))/float64(w.budget.MinEditInterval)
	return min(t, float64(w.budget.EditBurst))
}

// spend takes one edit from v's bucket.
func (w *watcher) spend(v *view) {
	if w.budget.EditBurst <= 1 {
		return
	}
	now := w.c.clock.Now()
	if v.tokensAt.IsZero() {
		v.tokens = float64(w.budget.EditBurst) // a fresh message starts full
	} else {
		v.tokens = w.refill(v, now)
	}
	v.tokens--
	v.tokensAt = now
}

// flush shows the pending card if the platform's pace allows. final waits
// for the pace instead of skipping.
func (w *watcher) flush(ctx context.Context, v *view, final bool) {
	if v.pending == nil {
		return
	}
	clock := w.c.clock
	if wait := w.nextEdit(v).Sub(clock.Now()); wait > 0 && !v.lastEnd.IsZero() {
		if !final {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(wait):
		}
	}
	if !w.limit(ctx) {
		return
	}
	card := *v.pending
	if v.ref == "" {
		ref, err := w.p.Post(ctx, w.th, card)
		v.lastEnd = clock.Now()
		w.spend(v)
		if err != nil {
			w.log.Warn("watcher: post status failed", "turn", v.turn, "err", err)
			return
		}
		v.ref, v.shown, v.pending = ref, &card, nil
		w.record(ctx, v.turn, "status", ref)
		return
	}
	err := w.p.Edit(ctx, w.th, v.ref, card)
	v.lastEnd = clock.Now()
	w.spend(v)
	if err != nil {
		// Logged, not fatal: the card stays pending and the next one retries.
		w.log.Warn("watcher: edit status failed", "turn", v.turn, "err", err)
		return
	}
	v.shown, v.pending = &card, nil
}

// limit waits for the shared platform budget, if any.
func (w *watcher) limit(ctx context.Context) bool {
	if w.budget.Limiter == nil {
		return true
	}
	if err := w.budget.Limiter.Wait(ctx); err != nil {
		w.log.Warn("watcher: rate limiter", "err", err)
		return false
	}
	return true
}

func (w *watcher) record(ctx context.Context, turn int, kind, ref string) {
	cctx, cancel := context.WithTimeout(ctx, w.c.cfg.CallTimeout)
	defer cancel()
	if err := w.c.s.RecordChatRef(cctx, w.id, session.ChatRefRequest{Turn: turn, Kind: kind, Ref: ref}); err != nil {
		w.log.Warn("watcher: record chat ref", "kind", kind, "turn", turn, "err", err)
	}
}

// finish makes the last edit of a finished turn's card and posts its
// answer, unless an earlier watcher (before a restart) already did.
func (w *watcher) finish(ctx context.Context, v *view, ts session.TurnState) {
	if ts.FinalRef != "" && v.shown == nil {
		// Finalized before we looked (a duplicate event, or a restart
		// after the answer was posted): nothing to add.
		return
	}
	quiet := v.ref == "" && len(ts.ToolCalls) == 0 && len(ts.Notices) == 0 && ts.Status == session.StatusComplete
	if !quiet {
		// A turn that answered before its card was ever shown needs no
		// card; every other one gets its final edit.
		w.flush(ctx, v, true)
	}
	if ts.FinalRef != "" {
		return
	}
	text := finalText(ts)
	if text == "" || !w.limit(ctx) {
		return
	}
	ref, err := w.p.PostText(ctx, w.th, text)
	if err != nil {
		w.log.Error("watcher: post final answer failed", "turn", ts.Turn, "err", err)
		return
	}
	w.record(ctx, ts.Turn, "final", ref)
}

// finalText is what a finished turn posts as its own message.
func finalText(ts session.TurnState) string {
	switch {
	case ts.FinalText != "":
		return ts.FinalText
	case ts.Status == session.StatusFailed && ts.Error != "":
		return "⚠️ This turn failed: " + ts.Error
	case ts.Status == session.StatusFailed:
		return "⚠️ This turn failed."
	}
	return ""
}

// missed finalizes a turn that ended between two polls (the next turn has
// already started): its card gets a last edit from the last state seen,
// and its answer comes from the transcript.
func (w *watcher) missed(ctx context.Context, v *view) {
	st := v.last
	st.Status = session.StatusComplete
	st.Pending = nil
	st.Notices = append(append([]string(nil), st.Notices...), "This turn ended between two updates; /history shows everything it did.")
	if v.ref != "" {
		card := RenderTurn(st, w.renderOptions())
		v.pending = &card
		w.flush(ctx, v, true)
	}
	if v.last.FinalRef == "" {
		w.catchUp(ctx, v.turn, v.turn+1)
	}
}

// catchUp posts the answers of turns [from, to) that this watcher never
// saw running, taken from the transcript (at most maxCatchUp of them).
func (w *watcher) catchUp(ctx context.Context, from, to int) {
	from = max(from, to-maxCatchUp)
	if from >= to {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, w.c.cfg.CallTimeout)
	hist, err := w.c.s.History(cctx, w.id, session.HistoryRequest{Last: 100})
	cancel()
	if err != nil {
		w.log.Warn("watcher: history for unseen turns", "from", from, "to", to, "err", err)
		return
	}
	for t := from; t < to; t++ {
		text := lastAnswer(hist, t)
		if text == "" || !w.limit(ctx) {
			continue
		}
		if _, err := w.p.PostText(ctx, w.th, text); err != nil {
			w.log.Error("watcher: post answer of unseen turn", "turn", t, "err", err)
		}
	}
}

// lastAnswer is the last plain assistant message of turn t.
func lastAnswer(hist []session.HistoryEntry, t int) string {
	for i := len(hist) - 1; i >= 0; i-- {
		e := hist[i]
		if e.Turn == t && e.Msg.Role == session.RoleAssistant && e.Msg.Content != "" && len(e.Msg.ToolCalls) == 0 {
			return e.Msg.Content
		}
	}
	return ""
}

// String names the watcher in logs and test failures.
func (w *watcher) String() string { return fmt.Sprintf("watcher(%s)", w.id) }
