package chat

import (
	"context"

	"github.com/sandbot/sandbot/session"
)

// TurnObserver is an optional Poster capability for a platform that shows
// a running turn natively as well as on its card: Slack's thread status
// ("is working…"), its agent session with the native stop button, and its
// streamed messages.
//
// The watcher calls ObserveTurn from its goroutine with every turn state it
// renders, before the card's post or edit, and EndTurn once the turn is
// over (finished, stopped, failed, or ended between two polls). Only the
// replica that holds the session's watch lease calls them. Neither may
// hold up the card: ObserveTurn must not wait for the network (queue the
// work), and EndTurn may only wait for what it needs to take the answer.
// Both must accept repeats and states of turns they never saw.
type TurnObserver interface {
	ObserveTurn(th Thread, ts session.TurnState)
	// EndTurn gets the turn's last state and the answer the core is about
	// to post ("" when there is none to post, or another replica posts
	// it). An observer that streams the turn may put the answer into its
	// stream: it returns that message's reference and true, and the core
	// then posts nothing. Otherwise it returns false (also on failure:
	// the core posts the answer as usual, so it is never lost).
	EndTurn(ctx context.Context, th Thread, ts session.TurnState, answer string) (ref string, took bool)
}

// observe hands ts to the poster's TurnObserver, if it has one.
func (w *watcher) observe(ts session.TurnState) {
	if o, ok := w.p.(TurnObserver); ok {
		o.ObserveTurn(w.th, ts)
	}
}

// endTurn tells the poster's TurnObserver that ts's turn is over, offering
// it answer; took says it posted the answer (at ref).
func (w *watcher) endTurn(ctx context.Context, ts session.TurnState, answer string) (ref string, took bool) {
	o, ok := w.p.(TurnObserver)
	if !ok {
		return "", false
	}
	return o.EndTurn(ctx, w.th, ts, answer)
}
