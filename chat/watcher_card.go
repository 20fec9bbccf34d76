package chat

import (
	"context"

	"github.com/sandbot/sandbot/session"
)

// One status card per turn, across replicas.
//
// A replica records the card it posted (session.ChatRefStatus) so that the
// next watcher edits it rather than posting another. A holder held up
// recording its card past its watch lease (a Temporal restart while the
// machine is loaded) leaves the replica that takes the watch over with no
// card recorded: it posts its own, and the turn would be drawn on two cards
// (the chaos suite's long mode counted calls shown on two). The session
// keeps the first card recorded for a turn and refuses any other
// (session.CardRecordedAlready, naming the first), and whichever replica is
// refused deletes its card and, if it still draws the turn, edits the
// recorded one from then on. A record that fails without an answer (the
// call timed out; it may still land) leaves the card unrecorded here, and
// every later poll settles it against what the session recorded.

// PointerCard is what an extra status card becomes where it cannot be
// deleted (see Deleter): one line saying where the turn goes on. It does
// not say "above": the recorded card may be either the earlier or the
// later of the two.
func PointerCard() Card {
	return Card{Title: "↕️ This turn goes on in its other status message in this thread."}
}

// unrecordedCard is a status card this replica posted whose record the
// session has not confirmed yet.
type unrecordedCard struct {
	turn int
	ref  string
}

// unsettledCards keeps, per session, the unrecorded cards of a watcher
// that ended before it could settle them (it gave up after failed polls,
// or its turn ended), for the session's next watcher in this process to
// settle: forgotten, such a card stayed in the thread beside the turn's
// recorded one (the chaos suite's load mode, session s091). Watchers hand
// them over under the watchers' lock (see watchers), so one session's are
// never settled by two watchers. A nil *unsettledCards keeps nothing.
type unsettledCards struct {
	m map[string][]unrecordedCard
}

func newUnsettledCards() *unsettledCards { return &unsettledCards{m: map[string][]unrecordedCard{}} }

// unsettledKept bounds the sessions kept; past it, new ones are not.
const unsettledKept = 4096

func (u *unsettledCards) put(id string, cs []unrecordedCard) {
	if u == nil || len(cs) == 0 || len(u.m) >= unsettledKept {
		return
	}
	u.m[id] = append(u.m[id], cs...)
}

func (u *unsettledCards) take(id string) []unrecordedCard {
	if u == nil {
		return nil
	}
	cs := u.m[id]
	delete(u.m, id)
	return cs
}

// recordCard records ref, the status card v shows for its turn, and
// reports whether the session took it. Refused because another card was
// recorded first, it deletes ref and adopts that one; failed otherwise, it
// keeps the card to settle at the next polls (settleCards).
func (w *watcher) recordCard(ctx context.Context, v *view, ref string) bool {
	err := w.recordErr(ctx, v.turn, session.ChatRefStatus, ref)
	if err == nil {
		return true
	}
	if first, ok := session.RecordedCard(err); ok {
		w.log.Info("watcher: another replica's status card was recorded first for the turn; deleting ours and going on in that one",
			"turn", v.turn, "ours", ref, "recorded", first)
		w.dropCard(ctx, v.turn, ref)
		w.adopt(v, first)
		return false
	}
	w.log.Warn("watcher: record chat ref; trying again at the next poll", "kind", session.ChatRefStatus, "turn", v.turn, "err", err)
	w.unrecorded = append(w.unrecorded, unrecordedCard{turn: v.turn, ref: ref})
	return false
}

// findCards looks in the thread for status cards of v's turn (key) that
// a replica posted and never recorded; none where the Poster cannot look.
func (w *watcher) findCards(ctx context.Context, v *view, key string) []string {
	f, ok := w.p.(CardFinder)
	if !ok || key == "" {
		return nil
	}
	after := ""
	if m := v.last.MessageRefs; len(m) > 0 {
		after = m[0] // the turn's cards came after its first message
	}
	refs, err := f.FindCards(ctx, w.th, key, after)
	if err != nil {
		// Posting anyway risks a second card; not posting, a turn shown
		// on none.
		w.log.Warn("watcher: look for the turn's status card; posting one", "turn", v.turn, "err", err)
		return nil
	}
	return refs
}

// takeLeftCard makes refs[0], the oldest card of v's turn found in the
// thread, the turn's card: recorded, and drawn on from the next flush.
// The other cards found are extras, deleted once the record is confirmed
// (a record refused means another card was recorded meanwhile: then the
// found card is the extra).
func (w *watcher) takeLeftCard(ctx context.Context, v *view, refs []string) {
	w.log.Info("watcher: found the turn's status card, posted and never recorded; going on in it",
		"turn", v.turn, "ref", refs[0], "found", len(refs))
	w.adopt(v, refs[0])
	if w.recordCard(ctx, v, refs[0]) {
		for _, extra := range refs[1:] {
			w.dropCard(ctx, v.turn, extra)
		}
	}
}

// settleCards compares the status cards this watcher posted but could not
// record with ts, a fresh poll, whether this replica holds the watch or
// not: one the session recorded after all is done with; one beside another
// recorded card is deleted (and v, if it shows it, adopts the recorded
// one); one with no card recorded yet is recorded again (a retry of the
// same ref is accepted, so it is safe whoever holds the watch). It returns
// ts as the session stands after that, so a view made from it starts on the
// turn's card.
func (w *watcher) settleCards(ctx context.Context, v *view, ts session.TurnState) session.TurnState {
	if len(w.unrecorded) == 0 {
		return ts
	}
	keep := w.unrecorded[:0]
	for _, c := range w.unrecorded {
		prev := ts.Previous
		switch {
		case prev != nil && prev.Turn == c.turn && prev.StatusRef != "":
			// The turn ended; the session says which card it recorded.
			if prev.StatusRef != c.ref {
				w.log.Info("watcher: another status card was recorded for the turn that ended; deleting ours", "turn", c.turn, "ours", c.ref, "recorded", prev.StatusRef)
				w.dropCard(ctx, c.turn, c.ref)
			}
		case c.turn != ts.Turn:
			// The session keeps no card ref of this turn to compare with
			// (older than the one before, or a build that carries none
			// over): the card may be the turn's only one, so it stays.
			w.log.Warn("watcher: the turn ended before its status card was recorded; it stays as posted", "turn", c.turn, "ref", c.ref, "session_turn", ts.Turn)
		case ts.StatusRef == c.ref:
			// Recorded after all (the call that timed out had landed).
		case ts.StatusRef != "":
			w.log.Info("watcher: another status card was recorded for the turn; deleting ours", "turn", c.turn, "ours", c.ref, "recorded", ts.StatusRef)
			w.dropCard(ctx, c.turn, c.ref)
			if v != nil && v.turn == c.turn && v.ref == c.ref {
				w.adopt(v, ts.StatusRef)
			}
		default:
			err := w.recordErr(ctx, c.turn, session.ChatRefStatus, c.ref)
			first, refused := session.RecordedCard(err)
			switch {
			case err == nil:
				ts.StatusRef = c.ref
			case refused:
				w.log.Info("watcher: another replica's status card was recorded first for the turn; deleting ours", "turn", c.turn, "ours", c.ref, "recorded", first)
				w.dropCard(ctx, c.turn, c.ref)
				if v != nil && v.turn == c.turn && v.ref == c.ref {
					w.adopt(v, first)
				}
				ts.StatusRef = first
			default:
				w.log.Warn("watcher: record chat ref", "kind", session.ChatRefStatus, "turn", c.turn, "err", err)
				keep = append(keep, c)
			}
		}
	}
	w.unrecorded = keep
	return ts
}

// adopt makes v show its turn in ref, the card another replica recorded:
// what v last drew is drawn there at the next flush, paced as a message
// another bot may have just edited (see newView).
func (w *watcher) adopt(v *view, ref string) {
	if v.pending == nil {
		v.pending = v.shown
	}
	v.ref, v.shown = ref, nil
	w.paceTakenOver(v)
}

// dropCard takes ref, a status card of turn that is not the turn's card,
// out of the thread: deleted where the platform can, else edited into
// PointerCard (see Deleter). Like a record, it is done even while the bot
// shuts down: a card left here would stay a duplicate for good. It is not
// bounded by the watch lease: nobody else writes to a card the session
// never recorded.
func (w *watcher) dropCard(ctx context.Context, turn int, ref string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.CallTimeout)
	defer cancel()
	if d, ok := w.p.(Deleter); ok {
		err := d.Delete(cctx, w.th, ref)
		if err == nil {
			return
		}
		w.log.Warn("watcher: delete an extra status card; making it a pointer instead", "turn", turn, "ref", ref, "err", err)
	}
	if !w.limit(cctx) {
		return
	}
	if err := w.p.Edit(cctx, w.th, ref, PointerCard()); err != nil {
		w.log.Error("watcher: an extra status card stays in the thread", "turn", turn, "ref", ref, "err", err)
	}
}
