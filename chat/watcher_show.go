package chat

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sandbot/sandbot/chat/internal/pace"
	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/session"
)

// view is what the watcher shows of one turn: its status message, the
// card on screen and the newer one waiting for its edit.
type view struct {
	turn    int
	ref     string // status message, "" until posted
	version int64  // version last rendered
	shown   *Card  // card on screen (nil: unknown or none)
	pending *Card  // newer card waiting for its edit
	// pace spaces the message's posts and edits, spent at the end of each
	// (Budget.MinEditInterval, in bursts of Budget.EditBurst).
	pace pace.Bucket
	// hold is the watcher's hold of the lease this view last wrote under
	// (watcher.holds).
	hold int
	last session.TurnState
	// attached are the attachments already put in the thread, by name.
	attached map[string]bool
	// announced are the pending calls whose approvers were told, by call.
	announced map[string]bool
	// shared are the shared files this watcher posted, by call.
	shared map[string]bool
}

// newView starts showing ts's turn, in the status message it recorded (a
// restart keeps editing the same message).
func (w *watcher) newView(ts session.TurnState) *view {
	b := w.cfg.Budget
	v := &view{turn: ts.Turn, ref: ts.StatusRef, version: -1, pace: pace.NewBucket(b.MinEditInterval, b.EditBurst), hold: w.holds}
	if v.ref != "" {
		// A status message this view did not post: the replica that
		// watched the turn until now may have just spent its burst on it
		// (the chaos suite saw a takeover edit 0.1 s after the old
		// holder's paced edit). Start with the burst spent, here and in
		// an adapter that paces messages itself.
		w.paceTakenOver(v)
	}
	return v
}

// paceTakenOver paces v's card as a message another replica may have just
// edited: v's burst spent from now, and an adapter that paces messages
// itself told (TakeoverPacer).
func (w *watcher) paceTakenOver(v *view) {
	b := w.cfg.Budget
	v.pace = pace.NewSpentBucket(b.MinEditInterval, b.EditBurst, w.cfg.Clock.Now())
	if tp, ok := w.p.(TakeoverPacer); ok {
		tp.TookOver(w.th, v.ref)
	}
}

// rejoin makes v, drawn under an earlier hold of the watch lease, go on
// under the current one: its lease ran out in this replica's view (a poll
// or a write stalled past it) and was granted again, and meanwhile another
// replica may have held it and edited v's card. So the card is paced as
// one taken over, as newView paces a card it did not post; going on with
// the pace of its own last edits could land an edit right after the other
// replica's (the 1,000-turn soak counted two per-message violations on
// one card). Nothing changes when the hold is the same.
func (w *watcher) rejoin(v *view) {
	if v.hold == w.holds {
		return
	}
	v.hold = w.holds
	if v.ref != "" {
		w.paceTakenOver(v)
	}
}

// update renders ts if its version moved and queues the card if it differs
// from what is shown. Intermediate cards are replaced, never queued.
func (w *watcher) update(ctx context.Context, v *view, ts session.TurnState) {
	if ts.Version == v.version {
		if !running(v.last) {
			return
		}
		// Nothing changed but the clock: render what was seen, for the
		// running command's elapsed time.
		ts = v.last
	}
	v.version = ts.Version
	v.last = ts
	w.observe(ts)
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
		WorkflowID:       w.id,
		MaxButtonValue:   w.cfg.Budget.MaxButtonValue,
		MaxChars:         w.cfg.Budget.MaxCardChars,
		Mention:          func(u User) string { return mention(w.p, u) },
		Approvers:        w.approvers,
		MaxApprovalChars: w.cfg.Budget.MaxApprovalChars,
		MeasureCode:      w.cfg.Budget.MeasureCode,
		Prices:           w.cfg.Prices,
		Now:              w.cfg.Clock.Now(),
		FormatTime:       w.formatTime(),
		ViewOutput:       showsOutput(w.p),
	}
}

func (w *watcher) formatTime() func(time.Time) string {
	if f, ok := w.p.(TimeFormatter); ok {
		return f.FormatTime
	}
	return nil
}

// running reports whether a command of the turn is running: its card then
// shows the elapsed time, so it is rendered again even when nothing else
// changed (the card compares equal, and is not edited, between steps).
func running(ts session.TurnState) bool {
	for _, c := range ts.ToolCalls {
		if c.Status == session.CallRunning {
			return true
		}
	}
	return false
}

// approverHint says who may decide approvals: the owner plus configured
// approvers and roles of new sessions (the workflow has the final word).
func (w *watcher) approverHint(ctx context.Context) string {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	info, err := w.feed.Info(cctx, w.id)
	if err != nil {
		w.log.Warn("watcher: info", "err", err)
		return ""
	}
	who := []string{mention(w.p, info.Owner) + " (owner)"}
	w.approverUsers = []User{info.Owner}
	for _, a := range w.cfg.Approvers {
		who = append(who, mention(w.p, User{ID: a}))
		w.approverUsers = append(w.approverUsers, User{ID: a})
	}
	for _, r := range w.cfg.ApproverRoles {
		who = append(who, "role "+r)
	}
	return strings.Join(who, ", ")
}

// flush shows the pending card if the platform's pace allows. final waits
// for the pace instead of skipping.
func (w *watcher) flush(ctx context.Context, v *view, final bool) {
	if v.pending == nil {
		return
	}
	clock := w.cfg.Clock
	if wait := v.pace.Wait(clock.Now()); wait > 0 {
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
	if !w.attach(ctx, v, card) {
		// The card refers to a file that is not in the thread: showing it
		// would offer an approval of a command nobody can read in full.
		// It stays pending; the next flush tries again.
		return
	}
	wctx, cancel, ok := w.leaseBound(ctx)
	if !ok && final && w.hold(ctx) {
		// The turn's last card: renew now rather than leave it unshown.
		wctx, cancel, ok = w.leaseBound(ctx)
	}
	if !ok {
		return // the lease is about to run out; the next poll renews it
	}
	if v.hold != w.holds {
		// Granted anew just now: pace the card as taken over first.
		cancel()
		w.rejoin(v)
		if final {
			w.flush(ctx, v, final) // waits the new pace out (once: the hold is v's now)
		}
		return
	}
	defer cancel()
	if v.ref == "" && w.lookFirst {
		// Once a hold: the later turns' cards are this hold's own.
		w.lookFirst = false
		if refs := w.findCards(wctx, v, card.Key); len(refs) > 0 {
			// Shown on that card from the next flush (its pace starts
			// spent: its poster may have just edited it).
			w.takeLeftCard(ctx, v, refs)
			return
		}
	}
	if v.ref == "" {
		ref, err := w.p.Post(wctx, w.th, card)
		v.pace.Spend(clock.Now())
		if err != nil {
			w.log.Warn("watcher: post status failed", "turn", v.turn, "err", err)
			return
		}
		v.ref, v.shown, v.pending = ref, &card, nil
		w.log.Debug("watcher: posted the turn's status card", "turn", v.turn, "ref", ref, "key", card.Key)
		w.recordCard(ctx, v, ref)
		w.announce(ctx, v)
		return
	}
	err := w.p.Edit(wctx, w.th, v.ref, card)
	v.pace.Spend(clock.Now())
	if err != nil {
		// Logged, not fatal: the card stays pending and the next one retries.
		w.log.Warn("watcher: edit status failed", "turn", v.turn, "err", err)
		return
	}
	v.shown, v.pending = &card, nil
	w.announce(ctx, v)
}

// finalEditRetries are the waits between attempts at a finished turn's
// last card edit when one fails: a 429 storm that outlasts the write's
// lease bound, a lease that could not be renewed while the server
// restarted. No later poll makes that edit, so the card would show the
// turn unfinished for good — the long chaos run of 2026-12-06 (seed
// 1796551543678679107) found a card still offering Approve for a call
// approved, run and answered. They run before the answer is posted, while
// this replica still holds the watch (the answer lets the user start the
// next turn, which another replica may watch), and add up to well under
// session.FinalClaimGrace.
var finalEditRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}

// flushFinal makes a finished turn's last card edit, trying again after
// finalEditRetries while it fails. A card never posted is not posted now:
// the answer says the turn ended.
func (w *watcher) flushFinal(ctx context.Context, v *view) {
	w.flush(ctx, v, true)
	for _, d := range finalEditRetries {
		if v.pending == nil || v.ref == "" || ctx.Err() != nil {
			return
		}
		w.log.Info("watcher: the finished turn's card edit did not land; trying again", "turn", v.turn, "in", d)
		select {
		case <-ctx.Done():
			return
		case <-w.cfg.Clock.After(d):
		}
		w.flush(ctx, v, true)
	}
	if v.pending != nil && v.ref != "" {
		w.log.Error("watcher: the finished turn's card could not be updated; it shows the turn as last drawn", "turn", v.turn)
	}
}

// leaseMargin is how long before its view of the watch lease ends a
// replica stops starting card writes (a fifth of a shorter lease): a
// request on its way when the lease ends must still land before another
// replica can hold it.
const leaseMargin = time.Second

// leaseBound bounds a card write by this replica's view of its watch
// lease. A post or edit the platform held back (a 429 and its
// Retry-After, the adapter's own pacing) must not land after the lease
// ran out, when another replica may have taken the watch over: the chaos
// suite saw two edits of one card 324 ns apart, and cards posted twice,
// from such late writes. ok is false when the lease is too close to its
// end to start one.
func (w *watcher) leaseBound(ctx context.Context) (context.Context, context.CancelFunc, bool) {
	if w.legacy || !w.held {
		return ctx, func() {}, true
	}
	left := w.until.Sub(w.cfg.Clock.Now()) - min(leaseMargin, w.cfg.Lease/5)
	if left <= 0 {
		return nil, nil, false
	}
	c, cancel := context.WithTimeout(ctx, left)
	return c, cancel, true
}

// announce tells the people who may approve, once per turn, with a new
// message that mentions them: the card's edit that shows the buttons
// notifies nobody. Once per turn, not per call: a turn of ten approved
// commands would otherwise post ten mentions (the chaos suite counted
// them); after the first, the approvers are watching the card.
func (w *watcher) announce(ctx context.Context, v *view) {
	p := v.last.Pending
	if p == nil || v.last.Status != session.StatusAwaitingApproval || len(v.announced) > 0 || v.last.ApprovalNoticed != "" || w.approvers == "" {
		return
	}
	if w.th.Platform == "console" {
		return // the terminal's one user sees the approval bar already
	}
	if v.announced == nil {
		v.announced = map[string]bool{}
	}
	v.announced[p.CallID] = true
	if !w.limit(ctx) {
		return
	}
	// Recorded before it is posted: a bot killed between the two must not
	// leave the next bot to post it again (the chaos suite saw that). At
	// most once, then: if this bot is killed right after the record, the
	// approvers get no ping, but the card shows the buttons all the same.
	if err := w.recordErr(ctx, v.turn, session.ChatRefApprovalNotice, p.CallID); err != nil {
		if strings.Contains(err.Error(), session.NoticeRecordedAlready) {
			// Another replica told them (a watch taken over): not ours to post.
			w.log.Info("watcher: approvers already told", "turn", v.turn)
			return
		}
		w.log.Warn("watcher: record chat ref", "kind", session.ChatRefApprovalNotice, "turn", v.turn, "err", err)
		return
	}
	// Once recorded, it is posted even while the bot shuts down (ctx
	// cancelled by Close, which waits for this watcher): the record keeps
	// every later bot from posting it, so a post cut short here would be
	// a ping nobody ever gets (CI caught a graceful restart doing that).
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.CallTimeout)
	defer cancel()
	text := ApprovalNoticeText(v.turn, w.approvers)
	var err error
	if n, ok := w.p.(Notifier); ok {
		_, err = n.Notify(pctx, w.th, text, w.approverUsers)
	} else {
		_, err = w.p.PostText(pctx, w.th, text)
	}
	if err != nil {
		w.log.Warn("watcher: announce the approval", "turn", v.turn, "err", err)
	}
}

// attach puts the card's attachments that are not in the thread yet into
// it, and reports whether all of them are there.
func (w *watcher) attach(ctx context.Context, v *view, card Card) bool {
	for _, a := range card.Attachments {
		if v.attached[a.Name] {
			continue
		}
		if !w.limit(ctx) {
			return false
		}
		var err error
		if at, ok := w.p.(Attacher); ok {
			err = at.Attach(ctx, w.th, a)
		} else {
			_, err = w.p.PostText(ctx, w.th, attachmentText(a))
		}
		if err != nil {
			w.log.Warn("watcher: attaching a file failed; the card waits for it", "turn", v.turn, "file", a.Name, "err", err)
			return false
		}
		if v.attached == nil {
			v.attached = map[string]bool{}
		}
		v.attached[a.Name] = true
	}
	return true
}

// attachmentText is an attachment as a message, for a Poster that cannot
// attach files: its title, then its content in a code block that the
// content cannot close.
func attachmentText(a Attachment) string {
	fence := "```"
	for strings.Contains(a.Content, fence) {
		fence += "`"
	}
	return "**" + a.Name + "** (" + a.Title + ")\n" + fence + "\n" + strings.TrimRight(a.Content, "\n") + "\n" + fence
}

// limit waits for the shared platform budget, if any.
func (w *watcher) limit(ctx context.Context) bool {
	if w.cfg.Budget.Limiter == nil {
		return true
	}
	if err := w.cfg.Budget.Limiter.Wait(ctx); err != nil {
		w.log.Warn("watcher: rate limiter", "err", err)
		return false
	}
	return true
}

// record tells the session which message shows its turn, so a restarted
// bot edits it instead of posting another.
func (w *watcher) record(ctx context.Context, turn int, kind, ref string) {
	if kind == chatRefFinal {
		// Before the record, which may fail: the answer is out.
		w.cfg.Posted.posted(w.id, turn)
	}
	if err := w.recordErr(ctx, turn, kind, ref); err != nil {
		w.log.Warn("watcher: record chat ref", "kind", kind, "turn", turn, "err", err)
	}
}

func (w *watcher) recordErr(ctx context.Context, turn int, kind, ref string) error {
	// What was posted is recorded even when the bot is shutting down
	// (ctx cancelled by Close): otherwise the next bot posts it again.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.CallTimeout)
	defer cancel()
	return w.feed.RecordChatRef(cctx, w.id, session.ChatRefRequest{Turn: turn, Kind: kind, Ref: ref})
}

// finish makes the last edit of a finished turn's card and posts its
// answer, unless an earlier watcher (before a restart) already did.
func (w *watcher) finish(ctx context.Context, v *view, ts session.TurnState) {
	if ts.FinalRef != "" && v.shown == nil {
		// Finalized before we looked (a duplicate event, or a restart
		// after the answer was posted): nothing to add.
		return
	}
	defer w.markMessages(ctx, ts)
	// The native signs of the turn end too; the answer may go into the
	// turn's stream instead of a message of its own.
	answered := false
	defer func() {
		if !answered {
			w.endTurn(ctx, ts, "")
		}
	}()
	quiet := v.ref == "" && len(ts.ToolCalls) == 0 && len(ts.Notices) == 0 && ts.Status == session.StatusComplete
	if !quiet {
		// A turn that answered before its card was ever shown needs no
		// card; every other one gets its final edit.
		w.flushFinal(ctx, v)
	}
	// Shared files before the answer, which may refer to them.
	w.share(ctx, v, ts)
	if ts.FinalRef != "" {
		return
	}
	text := finalText(ts)
	if ts.Stopped && v.ref == "" {
		text = safetext.Text(ts.FinalText) // no card says it
	}
	if text == "" && v.ref != "" && w.claim(ctx, ts.Turn) {
		// Nothing to post, but the session must know its answer is out
		// (the card), or bots would keep looking for one to post, and the
		// next turn's watcher would take the card for one nobody finished
		// (finishUnseen).
		w.record(ctx, ts.Turn, chatRefFinal, v.ref)
		return
	}
	if text == "" {
		return
	}
	// Messages already wait for the next turn: the answer comes after
	// them in the thread, so it says which turn it ends (lateAnswer). A
	// replica that took the claim over looks for either form.
	other := lateAnswer(ts, text)
	if ts.Queued > 0 {
		text, other = other, text
	}
	ok, earlier := w.claimAnswer(ctx, ts.Turn)
	if !ok || !w.limit(ctx) {
		return
	}
	answered = true
	streamed := text
	if earlier != "" {
		// The earlier holder may have posted the answer (postClaimed
		// looks first): not into this replica's stream, which would show
		// it again.
		streamed = ""
	}
	if ref, took := w.endTurn(ctx, ts, streamed); took {
		w.record(ctx, ts.Turn, chatRefFinal, ref)
		return
	}
	ref, err := w.postClaimed(ctx, ts.Turn, text, earlier, cmp.Or(firstRef(ts.MessageRefs), v.ref), "", other)
	if err != nil {
		w.log.Error("watcher: post final answer failed", "turn", ts.Turn, "err", err)
		return
	}
	w.record(ctx, ts.Turn, chatRefFinal, ref)
}

// answerRetries are the waits between attempts to post a claimed answer
// when the platform refuses it (a 429 storm outlasting the adapter's own
// retries, a platform outage). They add up to well under
// session.FinalClaimGrace, so no other replica takes the claim over and
// posts the answer too while this one is still trying.
var answerRetries = []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}

// postClaimed posts turn's answer under a claim this replica was just
// granted, unless the replica that held the claim before (earlier) posted
// it already: then the ref of that post, found in the thread between the
// messages after and before (see AnswerFinder). A Poster that cannot look
// posts; the answer is never left unposted for want of a look, and a
// failed look posts too. Nor does a turn with no message known to start
// the look from: the whole thread may hold an equal answer of an older
// turn, and taking it for this one would lose the answer, which is worse
// than showing it twice.
//
// The earlier holder may have posted the answer in another form than text
// (as a watched turn's answer, where this replica posts it late: see
// lateAnswer), so each of also is looked for too.
func (w *watcher) postClaimed(ctx context.Context, turn int, text, earlier, after, before string, also ...string) (string, error) {
	if f, ok := w.p.(AnswerFinder); ok && earlier != "" && after != "" {
		forms := append([]string{text}, also...)
		for i, form := range forms {
			if slices.Contains(forms[:i], form) {
				continue
			}
			ref, err := f.FindAnswer(ctx, w.th, form, after, before)
			if err != nil {
				w.log.Warn("watcher: look for the answer the claim's earlier holder may have posted; posting it", "turn", turn, "earlier", earlier, "err", err)
				break
			}
			if ref != "" {
				w.log.Info("watcher: the claim's earlier holder posted the answer and did not record it; recording its post", "turn", turn, "earlier", earlier, "ref", ref)
				return ref, nil
			}
		}
	}
	return w.postAnswer(ctx, text)
}

// firstRef is refs' first, or "".
func firstRef(refs []string) string {
	if len(refs) == 0 {
		return ""
	}
	return refs[0]
}

// postAnswer posts a turn's answer, trying again after answerRetries.
func (w *watcher) postAnswer(ctx context.Context, text string) (string, error) {
	ref, err := w.p.PostText(ctx, w.th, text)
	for _, d := range answerRetries {
		if err == nil || ctx.Err() != nil {
			break
		}
		w.log.Warn("watcher: post final answer failed; trying again", "in", d, "err", err)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(d):
		}
		ref, err = w.p.PostText(ctx, w.th, text)
	}
	return ref, err
}

// claim asks the session whether this replica may post the turn's answer.
// Another replica that watched the same turn may hold the claim, or have
// posted already; then this one stays quiet. If the session cannot be
// asked, nothing is posted now: the answer is not lost, since the turn ends
// with no final ref and the next watcher (a later message, a restart's
// Resume) posts it.
func (w *watcher) claim(ctx context.Context, turn int) bool {
	ok, _ := w.claimAnswer(ctx, turn)
	return ok
}

// claimAnswer is claim, with the replica whose claim the grant took over
// ("" for none): it may have posted the answer already (postClaimed).
func (w *watcher) claimAnswer(ctx context.Context, turn int) (granted bool, earlier string) {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	defer cancel()
	res, err := w.feed.ClaimFinal(cctx, w.id, session.ClaimFinalRequest{Turn: turn, Claimer: w.cfg.ReplicaID})
	if err != nil {
		w.log.Warn("watcher: claim final answer", "turn", turn, "err", err)
		return false, ""
	}
	if !res.Granted {
		w.log.Debug("watcher: another replica posts the answer", "turn", turn, "holder", res.Holder, "posted", res.Posted)
	}
	return res.Granted, res.Earlier
}

// finalText is what a finished turn posts as its own message, with the
// model's controls and bidi overrides neutralised (an answer must not be
// able to clear a terminal or restyle a message).
func finalText(ts session.TurnState) string {
	switch {
	case ts.Stopped:
		// The card says who stopped it, and /stop answered: a third
		// message would only repeat them.
		return ""
	case ts.FinalText != "":
		return safetext.Text(ts.FinalText)
	case ts.Status == session.StatusFailed:
		return failedText(ts.Turn, ts.Error)
	}
	return ""
}

// failedText says that turn failed, and why when err says. It names the
// turn, as the card's footer does, rather than saying "this turn": the
// answer may be posted after the user's next message (a claim taken over,
// a post held back by rate limits), and then "this turn" reads as that
// message's (two chaos short runs' users took a late failure for the
// failure of the message they had just sent, and asked again while it ran).
func failedText(turn int, err string) string {
	if err == "" {
		return fmt.Sprintf("⚠️ Turn %d failed.", turn)
	}
	return fmt.Sprintf("⚠️ Turn %d failed: %s", turn, safetext.Text(err))
}

// lateAnswer is text, the answer of the turn st ended, as it is posted
// once a later turn has begun (a turn that ended while no bot watched it,
// or between two polls) or messages wait for one. By then the thread
// holds a newer message, and an answer that does not say which turn it
// ends reads as that message's (the chaos short run of seed
// 1796648807632877242 took turn 3's failure, posted after the user's next
// message, for that message's failure, and asked a third time). So a late
// answer names its turn, as the cards' footers do; a failure's text
// (failedText) names it already.
func lateAnswer(st session.TurnState, text string) string {
	if text == "" || (st.Status == session.StatusFailed && !st.Stopped && st.FinalText == "") {
		return text
	}
	return turnLabelled(st.Turn, text)
}

// turnLabelled is the answer text of turn with the label that names it.
func turnLabelled(turn int, text string) string {
	return fmt.Sprintf("↩️ _Turn %d's answer:_\n\n%s", turn, text)
}

// missed finalizes a turn that ended between two polls (the next turn has
// already started): its card gets a last edit from the last state seen,
// and its answer comes from the transcript.
//
// The last state seen may be old: this watcher's polls may have failed for
// a while (a server restart), or it may have stood by while another
// replica held the lease and finished the turn. So a turn whose answer
// another replica claimed or posted is left alone: that replica saw the
// turn end and made the card's last edit from it (finish edits before it
// claims), and an edit from the older view would take decisions and
// results off the card again (the long chaos run's approval "lost" after
// its click: the card showed the call undecided). And the calls' decisions
// come from the session's log, which the old view may predate.
func (w *watcher) missed(ctx context.Context, v *view, next session.TurnState) {
	if p := next.Previous; p != nil && p.Turn == v.turn && answeredElsewhere(p, w.cfg.ReplicaID) {
		w.log.Info("watcher: another replica finished the turn this one last saw; leaving its card as that replica left it",
			"turn", v.turn, "final_claim", p.FinalClaim, "final_ref", p.FinalRef)
		return
	}
	st := v.last
	st.ToolCalls = slices.Clone(st.ToolCalls)
	w.addDecisions(ctx, &st)
	st.Status = session.StatusComplete
	if p := next.Previous; p != nil && p.Turn == v.turn {
		// How it really ended: stopped or failed turns must not show as
		// done.
		st.Status, st.Stopped, st.Error, st.FinalText = p.Status, p.Stopped, p.Error, p.FinalText
	}
	st.Pending = nil
	if st.Stopped || st.Status == session.StatusFailed {
		// A call still running or waiting when last seen never finished.
		for i := range st.ToolCalls {
			switch c := &st.ToolCalls[i]; c.Status {
			case session.CallPending, session.CallAwaitingApproval, session.CallRunning:
				c.Status = session.CallFailed
			}
		}
	}
	st.Notices = append(append([]string(nil), st.Notices...), "This turn ended between two updates; /history shows everything it did.")
	if v.ref != "" {
		card := RenderTurn(st, w.renderOptions())
		v.pending = &card
		w.flushFinal(ctx, v)
	}
	w.share(ctx, v, st)
	w.endTurn(ctx, st, "")
	if p := next.Previous; v.last.FinalRef == "" && (p == nil || p.Turn != v.turn || p.FinalRef == "") {
		if !w.catchUp(ctx, v.turn, v.turn+1, next.Turn, cmp.Or(firstRef(v.last.MessageRefs), v.ref), firstRef(next.MessageRefs)) && v.ref != "" && next.Turn == v.turn+1 && w.claim(ctx, v.turn) {
			// Nothing to post: the card is the turn's last word, recorded
			// as finish records it.
			w.record(ctx, v.turn, chatRefFinal, v.ref)
		}
	}
	w.markMessages(ctx, st)
}

// answeredElsewhere reports whether another replica claimed or posted the
// answer of the turn p ended.
func answeredElsewhere(p *session.TurnEnd, me string) bool {
	return p.FinalRef != "" || (p.FinalClaim != "" && p.FinalClaim != me)
}

// addDecisions fills in the decisions, from the session's log, of the calls
// of st (a state last seen before its turn ended) that show none: a
// decision made after the last poll is on record there. A call approved
// since is no longer waiting; one rejected did not run. If the session
// cannot be asked, st stays as it was seen.
func (w *watcher) addDecisions(ctx context.Context, st *session.TurnState) {
	undecided := false
	for _, c := range st.ToolCalls {
		undecided = undecided || c.Decision == nil
	}
	if !undecided {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	info, err := w.feed.Info(cctx, w.id)
	cancel()
	if err != nil {
		w.log.Warn("watcher: the session's decisions for a turn that ended unseen", "turn", st.Turn, "err", err)
		return
	}
	for i := range st.ToolCalls {
		c := &st.ToolCalls[i]
		if c.Decision != nil {
			continue
		}
		for j := len(info.Decisions) - 1; j >= 0; j-- {
			d := info.Decisions[j]
			if d.CallID != c.CallID || d.Turn != st.Turn {
				continue
			}
			c.Decision = &d
			switch {
			case d.Decision == session.DecisionReject:
				c.Status = session.CallRejected
			case c.Status == session.CallAwaitingApproval:
				c.Status = session.CallPending
			}
			break
		}
	}
}

// catchUp posts the answer of a turn in [from, to) that this watcher never
// saw end, taken from the transcript, when that turn is the one just before
// the current one: the answer is claimed first and its post recorded, as a
// watched turn's is, since another replica may have watched the turn and
// posted it. Older turns are left alone: the session keeps the claim of
// the current turn and the one before only, and the soak (400 turns, no
// faults) posted two answers twice when they were posted unclaimed. It
// reports whether the turn had an answer to post (or its transcript could
// not be read): false says there was nothing to post. after and before
// bound where in the thread the turn's answer can be (postClaimed).
func (w *watcher) catchUp(ctx context.Context, from, to, current int, after, before string) (answer bool) {
	t := current - 1
	if from < t {
		w.log.Warn("watcher: answers of turns two or more back are not posted: the session keeps no claim for them and another replica may have posted them",
			"from", from, "to", min(to, t), "session_turn", current)
	}
	if t < from || t >= to {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	hist, err := w.feed.History(cctx, w.id, session.HistoryRequest{Last: 100})
	cancel()
	if err != nil {
		w.log.Warn("watcher: history for an unseen turn end", "turn", t, "err", err)
		return true
	}
	plain := lastAnswer(hist, t)
	if plain == "" {
		return false
	}
	ok, earlier := w.claimAnswer(ctx, t)
	if !ok || !w.limit(ctx) {
		return true
	}
	ref, err := w.postClaimed(ctx, t, turnLabelled(t, plain), earlier, after, before, plain)
	if err != nil {
		w.log.Error("watcher: post answer of unseen turn", "turn", t, "err", err)
		return true
	}
	w.record(ctx, t, chatRefFinal, ref)
	return true
}

// lastAnswer is the last plain assistant message of turn t.
func lastAnswer(hist []session.HistoryEntry, t int) string {
	for i := len(hist) - 1; i >= 0; i-- {
		e := hist[i]
		if e.Turn == t && e.Msg.Role == session.RoleAssistant && e.Msg.Content != "" && len(e.Msg.ToolCalls) == 0 {
			return safetext.Text(e.Msg.Content)
		}
	}
	return ""
}

// markMessages swaps the working reaction on the turn's messages for how
// the turn ended.
func (w *watcher) markMessages(ctx context.Context, ts session.TurnState) {
	r, ok := w.p.(Reactor)
	if !ok || len(ts.MessageRefs) == 0 {
		return
	}
	end := ReactionDone
	switch {
	case ts.Stopped:
		end = ReactionStopped
	case ts.Status == session.StatusFailed:
		end = ReactionFailed
	}
	for _, ref := range ts.MessageRefs {
		if err := r.Unreact(ctx, w.th, ref, ReactionWorking); err != nil {
			w.log.Warn("watcher: remove the working reaction", "turn", ts.Turn, "err", err)
		}
		if err := r.React(ctx, w.th, ref, end); err != nil {
			w.log.Warn("watcher: react with the turn's end", "turn", ts.Turn, "err", err)
		}
	}
}
