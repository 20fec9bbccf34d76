package chat_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// ctxPoster is a recPoster whose text posts fail on a cancelled context,
// as a real platform client's HTTP call does.
type ctxPoster struct{ *recPoster }

func (p *ctxPoster) PostText(ctx context.Context, th chat.Thread, md string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return p.recPoster.PostText(ctx, th, md)
}

// TestApprovalNoticeSurvivesShutdown: the bot starts shutting down right
// after it recorded that it tells the approvers of a turn. The record is
// what keeps the next bot from telling them again, so the post must
// still go out: a notice recorded but never posted is a ping nobody gets
// (CI caught TestSlackRestartMidTurn counting none).
func TestApprovalNoticeSurvivesShutdown(t *testing.T) {
	pending := awaiting("rm -rf build")
	states := []session.TurnState{{Turn: 0, Status: session.StatusIdle}, pending, pending, pending}
	s := &script{states: states}
	var (
		mu       sync.Mutex
		watchCtx context.Context
		closed   = make(chan struct{})
		core     *chat.Core
	)
	lim := limiterFunc(func(ctx context.Context) error {
		mu.Lock()
		watchCtx = ctx
		mu.Unlock()
		return nil
	})
	f := &chattest.Sessions{
		SendFn:      sendTurn(1, false),
		TurnStateFn: s.next,
		InfoFn: func(id string) (session.Info, error) {
			return session.Info{WorkflowID: id, Owner: chat.User{ID: "U1", Name: "ann"}}, nil
		},
		RecordFn: func(_ string, req session.ChatRefRequest) error {
			if req.Kind != session.ChatRefApprovalNotice {
				return nil
			}
			// Shutdown begins between the record and the post: Close
			// cancels the watcher's context, then waits for it.
			go func() { core.Close(); close(closed) }()
			mu.Lock()
			ctx := watchCtx
			mu.Unlock()
			<-ctx.Done()
			return nil
		},
	}
	clock := newAutoClock()
	core = newTestCore(t, f, clock, func(cfg *chat.CoreConfig) {
		cfg.Budgets["test"] = chat.Budget{MinEditInterval: 0, Limiter: lim}
	})
	p := &ctxPoster{recPoster: &recPoster{clock: clock}}
	if err := core.HandleMessage(context.Background(), p, msg("e1", "clean up")); err != nil {
		t.Fatal(err)
	}
	<-closed
	notices := 0
	for _, txt := range texts(p.recPoster) {
		if strings.Contains(txt, "waits for approval") {
			notices++
		}
	}
	if notices != 1 {
		t.Fatalf("approval notices posted: %d (texts %q), want 1: recorded as told, so it must be told", notices, texts(p.recPoster))
	}
}

// The watch lease comes with the message: a replica granted it by the
// message's update watches the turn without claiming it again (one
// workflow task fewer at the start of every turn); one that was not
// granted it, or whose session's build does not answer, claims it as
// before.
func TestWatchLeaseComesWithTheMessage(t *testing.T) {
	for _, granted := range []bool{true, false} {
		t.Run(map[bool]string{true: "granted", false: "not-offered"}[granted], func(t *testing.T) {
			s := &script{states: []session.TurnState{{Turn: 0, Status: session.StatusIdle}, running(1, 1, "ls"), done(1, 2, "ok")}}
			var (
				mu     sync.Mutex
				asked  *session.WatchClaim
				claims int
			)
			f := &chattest.Sessions{
				SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
					mu.Lock()
					asked = req.Watch
					mu.Unlock()
					resp := session.MessageResponse{Turn: 1}
					if granted {
						resp.Watch = &session.ClaimWatchResponse{Granted: true, Holder: req.Watch.Claimer}
					}
					return resp, nil
				},
				TurnStateFn: s.next,
				WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
					mu.Lock()
					defer mu.Unlock()
					if !req.Release {
						claims++
					}
					return session.ClaimWatchResponse{Granted: !req.Release, Holder: req.Claimer}, nil
				},
			}
			clock := newAutoClock()
			c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = "bot-a" })
			p := &recPoster{clock: clock}
			if err := c.HandleMessage(context.Background(), p, msg("e1", "list")); err != nil {
				t.Fatal(err)
			}
			waitIdle(t, c, testThread)
			mu.Lock()
			defer mu.Unlock()
			if asked == nil || asked.Claimer != "bot-a" || asked.For < session.WatchLeaseMin || asked.For > session.WatchLeaseMax {
				t.Fatalf("the message asked for the lease with %+v, want bot-a's claim within bounds", asked)
			}
			if granted && claims != 0 {
				t.Errorf("granted with the message, the watcher still claimed the lease %d times", claims)
			}
			if !granted && claims == 0 {
				t.Errorf("not granted with the message, the watcher never claimed the lease")
			}
			if got := texts(p); len(got) != 1 || got[0] != "ok" {
				t.Errorf("answers posted: %q, want the turn's answer once", got)
			}
		})
	}
}

// pacedPoster is a recPoster that paces edits itself and records which
// messages it was told were taken over.
type pacedPoster struct {
	*recPoster
	mu   sync.Mutex
	took []string
}

func (p *pacedPoster) TookOver(_ chat.Thread, ref string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.took = append(p.took, ref)
}

// A watcher that takes over a turn whose status message another replica
// posted (and may have just edited) starts with its edit burst spent and
// tells an adapter that paces messages itself: its first edit waits one
// interval (the chaos suite saw a takeover edit 0.1 s after the old
// holder's, a per-message violation).
func TestTakeoverWaitsBeforeItsFirstEdit(t *testing.T) {
	active := running(7, 5, "make")
	next := running(7, 6, "make", "test")
	end := done(7, 7, "built")
	active.StatusRef, next.StatusRef, end.StatusRef = "m42", "m42", "m42"
	s := &script{states: []session.TurnState{active, next, end}}
	f := &chattest.Sessions{
		ListFn: func(chat.ListFilter) ([]chat.SessionSummary, error) {
			return []chat.SessionSummary{{WorkflowID: testThread.ID(), Location: testThread}}, nil
		},
		TurnStateFn: s.next,
	}
	clock := newAutoClock()
	const interval = time.Second
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) {
		cfg.Budgets["test"] = chat.Budget{MinEditInterval: interval, EditBurst: 4}
	})
	p := &pacedPoster{recPoster: &recPoster{clock: clock}}
	start := clock.Now()
	if err := c.Resume(context.Background(), p, "test"); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	edits := p.ops("edit")
	if len(edits) == 0 || edits[0].Ref != "m42" {
		t.Fatalf("edits = %+v, want m42 edited", edits)
	}
	if gap := edits[0].At.Sub(start); gap < interval {
		t.Errorf("first edit of a taken-over message %v after the takeover; want at least one interval (%v)", gap, interval)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.took) == 0 || p.took[0] != "m42" {
		t.Errorf("the adapter was told of taken-over messages %q, want m42", p.took)
	}
}

// deadlinePoster records, for every card post and edit, how long its
// context had left.
type deadlinePoster struct {
	*recPoster
	mu   sync.Mutex
	left []time.Duration // -1: no deadline
}

func (p *deadlinePoster) note(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		p.left = append(p.left, time.Until(dl))
	} else {
		p.left = append(p.left, -1)
	}
}

func (p *deadlinePoster) Post(ctx context.Context, th chat.Thread, c chat.Card) (string, error) {
	p.note(ctx)
	return p.recPoster.Post(ctx, th, c)
}

func (p *deadlinePoster) Edit(ctx context.Context, th chat.Thread, ref string, c chat.Card) error {
	p.note(ctx)
	return p.recPoster.Edit(ctx, th, ref, c)
}

// A card write (post or edit) of a lease holder ends before its view of
// the lease does: a write the platform holds back (a 429's Retry-After)
// must not land once another replica may have taken the watch over (the
// chaos suite saw two edits of one card 324 ns apart, and cards posted
// twice).
func TestCardWritesEndWithTheLease(t *testing.T) {
	s := &script{states: []session.TurnState{{Turn: 0, Status: session.StatusIdle}, running(1, 1, "ls"), running(1, 2, "ls", "make"), done(1, 3, "ok")}}
	f := &chattest.Sessions{SendFn: sendTurn(1, false), TurnStateFn: s.next}
	clock := newAutoClock()
	const lease = 15 * time.Second
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.WatchLease = lease })
	p := &deadlinePoster{recPoster: &recPoster{clock: clock}}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "build")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.left) == 0 {
		t.Fatal("no card was posted or edited")
	}
	for i, left := range p.left {
		if left < 0 || left > lease {
			t.Errorf("card write %d: %v left on its context, want at most the lease (%v)", i+1, left, lease)
		}
	}
}

// The turn's last card goes out even when the watcher's view of its
// lease is about to run out (renewals failed while Temporal was away):
// it renews first rather than leave the card showing a running turn.
func TestFinalCardRenewsANearlySpentLease(t *testing.T) {
	clock := newAutoClock()
	t0 := clock.Now()
	const lease = 15 * time.Second
	var mu sync.Mutex
	failedLate := false
	f := &chattest.Sessions{
		SendFn: sendTurn(1, false),
		TurnStateFn: func(string) (session.TurnState, error) {
			if clock.Now().Sub(t0) < lease-900*time.Millisecond {
				return running(1, 1, "make"), nil
			}
			return done(1, 2, "built"), nil
		},
		WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			at := clock.Now().Sub(t0)
			switch {
			case req.Release || at < time.Second:
				return session.ClaimWatchResponse{Granted: !req.Release, Holder: req.Claimer}, nil
			case at < lease-900*time.Millisecond || !failedLate:
				// The server is away; the first attempt at the turn's end
				// fails too.
				failedLate = at >= lease-900*time.Millisecond
				return session.ClaimWatchResponse{}, errBoom
			}
			return session.ClaimWatchResponse{Granted: true, Holder: req.Claimer}, nil
		},
	}
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) {
		cfg.WatchLease = lease
		cfg.PollMin, cfg.PollMax = 200*time.Millisecond, 200*time.Millisecond
	})
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "build")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	cards := append(p.ops("post"), p.ops("edit")...)
	if len(cards) == 0 || cards[len(cards)-1].Card.Title != "✅ Done" {
		var titles []string
		for _, e := range cards {
			titles = append(titles, e.Op+" "+e.Card.Title)
		}
		t.Fatalf("cards: %q, want the last to show Done", titles)
	}
	mu.Lock()
	defer mu.Unlock()
	if !failedLate {
		t.Fatal("the scenario did not happen: no renewal failed at the turn's end")
	}
}

// A watcher whose lease ran out in its own view (a poll stalled past it)
// and is then granted it again may have been followed meanwhile by another
// replica that drew the turn on the same card: it paces the card as taken
// over (burst spent, the adapter told), as a watcher that did not post it
// would, instead of going on with the pace of its own last edits, which
// could put an edit right after the other replica's.
func TestLeaseRegainedAfterALapsePacesTheCardAsTakenOver(t *testing.T) {
	clock := newAutoClock()
	const interval = time.Second
	var mu sync.Mutex
	polls := 0
	var regained time.Time
	f := &chattest.Sessions{
		SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
			return session.MessageResponse{Turn: 1, Watch: &session.ClaimWatchResponse{Granted: true, Holder: req.Watch.Claimer}}, nil
		},
		TurnStateFn: func(string) (session.TurnState, error) {
			mu.Lock()
			defer mu.Unlock()
			polls++
			switch polls {
			case 1:
				return running(1, 1, "ls"), nil
			case 2:
				return running(1, 2, "ls", "make"), nil
			case 3:
				// This poll stalls past the lease; the next claim is a new grant.
				clock.advance(session.WatchLease + time.Second)
				regained = clock.Now()
				return running(1, 3, "ls", "make", "test"), nil
			}
			return done(1, 4, "built"), nil
		},
	}
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) {
		cfg.ReplicaID = "bot-a"
		cfg.Budgets["test"] = chat.Budget{MinEditInterval: interval, EditBurst: 4}
	})
	p := &pacedPoster{recPoster: &recPoster{clock: clock}}
	if err := c.HandleMessage(context.Background(), p, msg("e1", "build")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	posts := p.ops("post")
	if len(posts) != 1 {
		t.Fatalf("posts %+v, want the turn's one card", posts)
	}
	mu.Lock()
	at := regained
	mu.Unlock()
	var after []posterEvent
	for _, e := range p.ops("edit") {
		if !e.At.Before(at) {
			after = append(after, e)
		}
	}
	if len(after) == 0 {
		t.Fatalf("no edit after the lease was granted again: %+v", p.Events())
	}
	if gap := after[0].At.Sub(at); gap < interval {
		t.Errorf("first edit %v after the lease was granted again; want at least one interval (%v), as for a card taken over", gap, interval)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.took, posts[0].Ref) {
		t.Errorf("the adapter was told of taken-over messages %q, want the card %s", p.took, posts[0].Ref)
	}
}
