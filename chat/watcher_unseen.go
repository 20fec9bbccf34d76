package chat

import (
	"context"
	"sync"

	"github.com/sandbot/sandbot/session"
)

// unseenNotice is the notice on the card of a turn that ended while no bot
// watched it, drawn afterwards from the session's transcript.
const unseenNotice = "This turn ended while no bot was watching it; this card was completed afterwards from the session's log. /history shows everything it did."

// finishUnseen finishes the turn before ts's (the current turn) when it
// ended while no replica watched it: nobody claimed or posted its answer,
// so nobody made its card's last edit either (finish edits the card before
// it claims). It happens when every bot was down or cut off from the
// session as the turn ended, and the next turn began before a scan took
// the ended one up: the next message's watcher drew only the new turn, and
// the old card kept offering Approve for a call that had been approved
// and run (the long chaos run of seed 1796607650757124012).
//
// The claim on the turn comes first, so one replica finishes it, and the
// card is drawn from what the session still has of the turn: its calls
// and their results from the transcript, its decisions from the session's
// log, how it ended from ts.Previous. The answer is posted as a watched
// turn's is, and recorded, so no later watcher does this again; a turn
// with a card and no answer records its card as what it posted.
func (w *watcher) finishUnseen(ctx context.Context, ts session.TurnState) {
	p := ts.Previous
	if p == nil || p.Turn != ts.Turn-1 || p.Turn <= 0 || answeredElsewhere(p, w.cfg.ReplicaID) {
		return
	}
	if p.FinalClaim == w.cfg.ReplicaID && w.cfg.Posted.has(w.id, p.Turn) {
		// This process claimed and posted it, and its record did not
		// land (the session could not be reached): posting again would
		// answer twice. The claim is granted again to the same replica,
		// so only this memory tells the two apart.
		w.log.Warn("watcher: the previous turn's answer was posted here and its record was lost; not posting it again", "turn", p.Turn)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	hist, err := w.feed.History(cctx, w.id, session.HistoryRequest{Last: unseenHistory})
	cancel()
	if err != nil {
		w.log.Warn("watcher: history for a turn that ended unwatched", "turn", p.Turn, "err", err)
		return
	}
	granted, earlier := w.claimAnswer(ctx, p.Turn)
	if !granted {
		return
	}
	w.log.Info("watcher: finishing a turn that ended while no replica watched it", "turn", p.Turn, "status_ref", p.StatusRef)
	st := unseenTurn(p, hist)
	if p.StatusRef != "" {
		w.addDecisions(ctx, &st)
		v := w.newView(st)
		card := RenderTurn(st, w.renderOptions())
		v.pending = &card
		w.flushFinal(ctx, v)
	}
	plain := finalText(st)
	if plain == "" && !st.Stopped {
		plain = lastAnswer(hist, p.Turn) // a session of a build whose TurnEnd kept no text
	}
	text := lateAnswer(st, plain)
	if text == "" {
		if p.StatusRef != "" {
			// Nothing to post: the card is the turn's last word.
			w.record(ctx, p.Turn, chatRefFinal, p.StatusRef)
		}
		return
	}
	if !w.limit(ctx) {
		return
	}
	// Its card came before its answer, and the current turn's first
	// message after it.
	ref, err := w.postClaimed(ctx, p.Turn, text, earlier, p.StatusRef, firstRef(ts.MessageRefs), plain)
	if err != nil {
		w.log.Error("watcher: post the answer of a turn that ended unwatched", "turn", p.Turn, "err", err)
		return
	}
	w.record(ctx, p.Turn, chatRefFinal, ref)
}

// unseenHistory is how many of the transcript's last entries finishUnseen
// reads: a turn of the default 50-call cap and the current turn's first
// entries fit.
const unseenHistory = 200

// unseenTurn is what a card can show of turn p.Turn from the transcript
// entries hist: each call the model asked for, with its result as its
// output; a call with no result did not finish. Decisions are added from
// the session's log by the caller (addDecisions), which also marks a
// rejected call.
func unseenTurn(p *session.TurnEnd, hist []session.HistoryEntry) session.TurnState {
	st := session.TurnState{
		Turn: p.Turn, Status: p.Status, Stopped: p.Stopped, Error: p.Error, FinalText: p.FinalText,
		StartedAt: p.StartedAt, EndedAt: p.EndedAt, Usage: p.Usage, StatusRef: p.StatusRef,
		Notices: []string{unseenNotice},
	}
	index := map[string]int{}
	for _, e := range hist {
		if e.Turn != p.Turn {
			continue
		}
		switch e.Msg.Role {
		case session.RoleAssistant:
			for _, tc := range e.Msg.ToolCalls {
				if _, dup := index[tc.ID]; dup {
					continue
				}
				index[tc.ID] = len(st.ToolCalls)
				st.ToolCalls = append(st.ToolCalls, session.ToolCallState{
					CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments,
					Status: session.CallFailed, Error: "It did not finish.",
				})
			}
		case session.RoleTool:
			i, ok := index[e.Msg.ToolCallID]
			if !ok {
				continue
			}
			c := &st.ToolCalls[i]
			c.Status, c.Error, c.EndedAt = session.CallCompleted, "", e.At
			c.Output = session.CallOutput(e.Msg.Content)
		}
	}
	return st
}

// chatRefFinal is the chat_ref kind of a turn's answer (or of its card,
// for a turn with nothing to post).
const chatRefFinal = "final"

// postedAnswers keeps, per session, the last turn whose answer this
// process posted. It is safe for concurrent use; a nil *postedAnswers
// keeps nothing.
type postedAnswers struct {
	mu sync.Mutex
	m  map[string]int
}

func newPostedAnswers() *postedAnswers { return &postedAnswers{m: map[string]int{}} }

// postedKept bounds the sessions remembered; past it the map starts over
// (a forgotten session can only be answered again if its answer's record
// was lost too).
const postedKept = 4096

func (a *postedAnswers) posted(id string, turn int) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.m) >= postedKept {
		clear(a.m)
	}
	a.m[id] = max(a.m[id], turn)
}

func (a *postedAnswers) has(id string, turn int) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m[id] == turn
}
