package workflows

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/session"
	"github.com/stretchr/testify/mock"
)

// The worker's policy wins over the settings the bot sent: a bot started the
// session asking for approval of everything, the worker says never, and the
// command runs without a request.
func TestSessionTakesTheWorkersPolicy(t *testing.T) {
	h := newHarness(t, shellCall("c1", "rm -rf build"), final("done"))
	in := h.input(session.ApproveAlways)
	h.at(0, func() { h.send("e1", "clean") })
	var end session.TurnState
	h.at(time.Minute, func() { end = h.state() })
	h.destroyAt(2 * time.Minute)
	h.mu.Lock()
	h.policy = session.Policy{ApprovalMode: session.ApproveNever, MaxToolCalls: 3}
	h.mu.Unlock()
	h.env.ExecuteWorkflow(session.WorkflowName, in)
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if end.Status != session.StatusComplete || end.ToolCalls[0].Decision != nil || end.ToolCalls[0].Status != session.CallCompleted {
		t.Fatalf("the worker's never-ask policy should have run the call unasked: %+v", end)
	}
	if ran := h.box.ran(); len(ran) != 1 || ran[0][0] != "rm -rf build" {
		t.Fatalf("executed: %v", ran)
	}
}

// A deliberately unversioned change (an extra side effect at the start of
// every run, without GetVersion) must fail the replay of the committed
// histories: the replay test is what stops such a change before it ships.
func TestReplayCatchesAnUnversionedChange(t *testing.T) {
	unversioned := func(ctx workflow.Context, in Input) (session.SessionResult, error) {
		var x int
		_ = workflow.SideEffect(ctx, func(workflow.Context) any { return 1 }).Get(&x)
		return Session(ctx, in)
	}
	for _, name := range []string{"v1-approvals.json", "v1-awaiting-approval.json", "v1-continue-as-new-run2.json", "v2-approvals.json", "v2-awaiting-approval.json"} {
		r := worker.NewWorkflowReplayer()
		r.RegisterWorkflowWithOptions(unversioned, workflow.RegisterOptions{Name: session.WorkflowName})
		err := r.ReplayWorkflowHistoryFromJSONFile(nil, filepath.Join("testdata", "histories", name))
		// TMPRL1100 is the SDK's code for a non-deterministic replay.
		if err == nil || !strings.Contains(err.Error(), "TMPRL1100") {
			t.Errorf("replaying %s against an unversioned change: got %v, want a nondeterminism error", name, err)
		}
	}
}

// Two bot replicas that both watched a turn ask to post its answer; the
// workflow grants one. A claim whose holder never recorded the post can be
// taken over after FinalClaimTakeover (the grant names the claim's earlier
// holder, who may have posted and died before recording it), and once the
// post is recorded nobody posts again.
func TestFinalPostIsClaimedOnce(t *testing.T) {
	h := newHarness(t, final("answer"))
	h.at(0, func() { h.send("e1", "hi") })
	type claim struct {
		resp session.ClaimFinalResponse
		err  error
	}
	var got []claim
	ask := func(who string) {
		h.update(session.UpdateClaimFinal, session.ClaimFinalRequest{Turn: 1, Claimer: who}, func(v any, err error) {
			c := claim{err: err}
			if v != nil {
				c.resp = v.(session.ClaimFinalResponse)
			}
			got = append(got, c)
		})
	}
	h.at(time.Second, func() { ask("bot-a"); ask("bot-b"); ask("bot-a") })
	h.at(time.Second+session.FinalClaimTakeover+time.Second, func() { ask("bot-b") })
	h.at(time.Second+session.FinalClaimTakeover+2*time.Second, func() {
		h.update(session.UpdateChatRef, session.ChatRefRequest{Turn: 1, Kind: "final", Ref: "m9"}, nil)
	})
	h.at(time.Second+session.FinalClaimTakeover+3*time.Second, func() { ask("bot-a") })
	h.destroyAt(time.Hour)
	h.run(h.input(session.ApproveNever))

	want := []session.ClaimFinalResponse{
		{Granted: true},
		{Holder: "bot-a"},
		{Granted: true},                   // bot-a again: its own claim, nobody's taken over
		{Granted: true, Earlier: "bot-a"}, // bot-a never recorded a post: bot-b takes over, told whose claim it was
		{Posted: true, Holder: "bot-b"},
	}
	if len(got) != len(want) {
		t.Fatalf("claims answered: %+v", got)
	}
	for i := range want {
		if got[i].err != nil || got[i].resp != want[i] {
			t.Errorf("claim %d: got %+v, %v; want %+v", i+1, got[i].resp, got[i].err, want[i])
		}
	}
}

// The replica that posted turn 1's answer records it after the user has
// already started turn 2 (found by the chaos suite: the record was refused,
// and a replica that had missed turn 1's end posted the answer again). The
// record lands on turn 1's carried-over end, and a later claim of turn 1
// says it was posted; a claim held by another replica is not granted.
func TestPreviousTurnAnswerIsRecordedAndClaimed(t *testing.T) {
	h := newHarness(t, final("one"), final("two"))
	h.at(0, func() { h.send("e1", "first") })
	var got []session.ClaimFinalResponse
	var errs []error
	ask := func(turn int, who string) {
		h.update(session.UpdateClaimFinal, session.ClaimFinalRequest{Turn: turn, Claimer: who}, func(v any, err error) {
			if v != nil {
				got = append(got, v.(session.ClaimFinalResponse))
			}
			errs = append(errs, err)
		})
	}
	h.at(time.Second, func() { ask(1, "bot-a") })
	// Turn 2 begins (and ends) before bot-a records its post of turn 1.
	h.at(2*time.Second, func() { h.send("e2", "second") })
	h.at(3*time.Second, func() { ask(1, "bot-b") }) // bot-a holds it
	h.at(4*time.Second, func() {
		h.update(session.UpdateChatRef, session.ChatRefRequest{Turn: 1, Kind: "final", Ref: "m1"}, func(_ any, err error) { errs = append(errs, err) })
	})
	h.at(5*time.Second, func() { ask(1, "bot-b") })
	var end session.TurnState
	h.at(6*time.Second, func() { end = h.state() })
	h.destroyAt(time.Hour)
	h.run(h.input(session.ApproveNever))

	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d refused: %v", i+1, err)
		}
	}
	want := []session.ClaimFinalResponse{{Granted: true}, {Holder: "bot-a"}, {Posted: true, Holder: "bot-a"}}
	if len(got) != len(want) {
		t.Fatalf("claims answered: %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("claim %d: got %+v, want %+v", i+1, got[i], want[i])
		}
	}
	if end.Turn != 2 || end.Previous == nil || end.Previous.FinalRef != "m1" || end.FinalRef != "" {
		t.Fatalf("turn 1's answer should be recorded on turn 2's Previous, not on turn 2: %+v", end)
	}
}

// With a live watch lease, only its holder may claim a turn's answer: a
// replica that lost the lease but still finishes the turn it was showing
// is refused (the chaos suite saw both post). The new holder takes a
// claim of the old one over only once it is FinalClaimGrace old, since the
// old holder may still be posting.
func TestFinalClaimFollowsTheWatchLease(t *testing.T) {
	h := newHarness(t, final("answer"))
	h.at(0, func() { h.send("e1", "hi") })
	var got []session.ClaimFinalResponse
	ask := func(who string) {
		h.update(session.UpdateClaimFinal, session.ClaimFinalRequest{Turn: 1, Claimer: who}, func(v any, err error) {
			if err != nil {
				t.Errorf("claim by %s: %v", who, err)
				return
			}
			got = append(got, v.(session.ClaimFinalResponse))
		})
	}
	lease := func(who string, d time.Duration) {
		h.update(session.UpdateClaimWatch, session.ClaimWatchRequest{Claimer: who, For: d}, nil)
	}
	h.at(time.Second, func() { lease("bot-b", 10*time.Second) })
	h.at(2*time.Second, func() { ask("bot-a") }) // not the holder
	h.at(3*time.Second, func() { ask("bot-b") }) // the holder
	// bot-b stalls: its lease runs out and bot-a takes the watch over.
	h.at(12*time.Second, func() { lease("bot-a", time.Minute) })
	h.at(13*time.Second, func() { ask("bot-a") })                        // bot-b's claim is recent
	h.at(4*time.Second+session.FinalClaimGrace, func() { ask("bot-a") }) // now old enough
	h.destroyAt(time.Hour)
	h.run(h.input(session.ApproveNever))

	want := []session.ClaimFinalResponse{
		{Holder: "bot-b"},
		{Granted: true},
		{Holder: "bot-b"},
		{Granted: true, Earlier: "bot-b"}, // bot-b may have posted: bot-a looks first (chat.AnswerFinder)
	}
	if len(got) != len(want) {
		t.Fatalf("claims answered: %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("claim %d: got %+v, want %+v", i+1, got[i], want[i])
		}
	}
}

// A destroy update that arrives while the run waits for its handlers before
// continuing as new (here: a fork still copying its snapshot) is carried
// out; before the fix it waited forever. A destroy signal in that window
// used to be dropped by the continue-as-new; since signed decisions, runs
// ignore the (unsignable) destroy signal altogether, so it changes nothing.
func TestDestroyWhileWaitingToContinueAsNew(t *testing.T) {
	for _, viaSignal := range []bool{false, true} {
		h := newHarness(t, shellCall("c1", "touch a"), final("one"))
		// The fork's copy takes an hour and then fails, so the fork never
		// starts a child the test would have to run.
		h.env.OnActivity(sandboxActs.CopySnapshot, mock.Anything, mock.Anything).After(time.Hour).Return(temporal.NewNonRetryableApplicationError("store unreachable", "test", nil))
		in := h.input(session.ApproveNever)
		in.Settings.HistoryLimitBytes = 1 << 20
		h.at(0, func() { h.send("e1", "hello") })
		h.at(time.Minute, func() {
			h.update(session.UpdateFork, session.ForkRequest{Location: session.Location{Platform: "console", Channel: "c", Thread: "fork"}, User: owner}, nil)
		})
		h.at(90*time.Second, func() {
			// Past the limit from now on, while the fork copies; the chat
			// ref wakes the loop, which then waits for the fork's handler
			// before continuing as new.
			h.env.SetCurrentHistorySize(2 << 20)
			h.update(session.UpdateChatRef, session.ChatRefRequest{Turn: 1, Kind: "status", Ref: "m1"}, nil)
		})
		var destroyed *session.DestroyResponse
		h.at(2*time.Minute, func() {
			if viaSignal {
				h.env.SignalWorkflow(session.SignalDestroy, session.DestroyRequest{User: owner})
				return
			}
			h.update(session.UpdateDestroy, session.DestroyRequest{User: owner}, func(v any, err error) {
				if err == nil {
					r := v.(session.DestroyResponse)
					destroyed = &r
				}
			})
		})
		h.mu.Lock()
		h.policy = in.Settings.Policy
		h.mu.Unlock()
		h.env.ExecuteWorkflow(session.WorkflowName, in)
		err := h.env.GetWorkflowError()
		if viaSignal {
			var can *workflow.ContinueAsNewError
			if !errors.As(err, &can) || len(h.destroyed) != 0 {
				t.Fatalf("a destroy signal must be ignored (the run continues as new, nothing destroyed); got %v, destroyed %+v", err, h.destroyed)
			}
			continue
		}
		if err != nil {
			t.Fatalf("want the session destroyed, got %v (rejected updates: %q)", err, h.rejects)
		}
		var res session.SessionResult
		if err := h.env.GetWorkflowResult(&res); err != nil || !res.Destroyed {
			t.Fatalf("result %+v, %v", res, err)
		}
		if destroyed == nil {
			t.Fatal("the destroy update never completed")
		}
		if len(h.destroyed) == 0 || !h.destroyed[len(h.destroyed)-1].DeleteSnapshots {
			t.Fatalf("destroy activity: %+v", h.destroyed)
		}
	}
}

// Two bot replicas that both saw no approval notice for a turn (a watch
// taken over between them) both ask to record one: the first record is
// the claim to post it, the second is refused, so the approvers are told
// once (the chaos suite's long mode counted notices posted twice).
func TestApprovalNoticeRecordedOncePerTurn(t *testing.T) {
	h := newHarness(t, shellCall("c1", "rm -rf build"), final("done"))
	h.at(0, func() { h.send("e1", "clean") })
	var errs []error
	notice := func() {
		h.update(session.UpdateChatRef, session.ChatRefRequest{Turn: 1, Kind: session.ChatRefApprovalNotice, Ref: "c1"}, func(_ any, err error) { errs = append(errs, err) })
	}
	h.at(time.Second, notice)
	h.at(2*time.Second, notice)
	var mid session.TurnState
	h.at(3*time.Second, func() { mid = h.state() })
	h.at(4*time.Second, func() {
		h.update(session.UpdateApprove, session.ApproveRequest{CallID: "c1", Decision: session.DecisionApprove, User: owner}, nil)
	})
	h.destroyAt(time.Hour)
	h.run(h.input(session.ApproveUnlessReadOnly))

	if mid.Status != session.StatusAwaitingApproval || mid.ApprovalNoticed != "c1" {
		t.Fatalf("mid-turn state: status %s, noticed %q; want awaiting approval, noticed c1", mid.Status, mid.ApprovalNoticed)
	}
	if len(errs) != 2 || errs[0] != nil {
		t.Fatalf("record results %v: want the first accepted", errs)
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), session.NoticeRecordedAlready) {
		t.Fatalf("second record: %v, want refused with %q", errs[1], session.NoticeRecordedAlready)
	}
}

// Two bot replicas around a watch takeover both post a status card for a
// turn (the first was held up recording its ref past its lease): the
// session keeps the first card recorded, accepts that ref again (a retried
// record), and refuses the other with a refusal naming the recorded card,
// so the refused replica deletes its own and adopts it (the chaos suite's
// long mode saw calls shown on two cards).
func TestFirstCardRecordedWins(t *testing.T) {
	h := newHarness(t, shellCall("c1", "rm -rf build"), final("done"))
	h.at(0, func() { h.send("e1", "clean") })
	var errs []error
	record := func(ref string) func() {
		return func() {
			h.update(session.UpdateChatRef, session.ChatRefRequest{Turn: 1, Kind: session.ChatRefStatus, Ref: ref}, func(_ any, err error) { errs = append(errs, err) })
		}
	}
	h.at(time.Second, record("m-b"))
	h.at(2*time.Second, record("m-a"))
	h.at(3*time.Second, record("m-b"))
	var mid session.TurnState
	h.at(4*time.Second, func() { mid = h.state() })
	h.at(5*time.Second, func() {
		h.update(session.UpdateApprove, session.ApproveRequest{CallID: "c1", Decision: session.DecisionApprove, User: owner}, nil)
	})
	h.destroyAt(time.Hour)
	h.run(h.input(session.ApproveUnlessReadOnly))

	if mid.StatusRef != "m-b" {
		t.Fatalf("turn 1's card is %q, want the first recorded, m-b", mid.StatusRef)
	}
	if len(errs) != 3 || errs[0] != nil || errs[2] != nil {
		t.Fatalf("record results %v: want the first and its retry accepted", errs)
	}
	if ref, ok := session.RecordedCard(errs[1]); !ok || ref != "m-b" {
		t.Fatalf("second card's record: %v, want refused naming m-b (%q)", errs[1], session.CardRecordedAlready)
	}
}

// A message may carry a watch lease claim: granted as claim_watch would
// (to its sender while nobody else's lease runs), refused while another
// replica's runs, ignored when malformed; the message is taken either way.
func TestWatchLeaseWithTheMessage(t *testing.T) {
	h := newHarness(t, final("one"), final("two"), final("three"))
	var got []session.MessageResponse
	send := func(id string, w *session.WatchClaim) {
		h.update(session.UpdateSendMessage, session.MessageRequest{EventID: id, User: owner, Text: "hi", Watch: w}, func(v any, err error) {
			if err != nil {
				t.Errorf("message %s refused: %v", id, err)
				return
			}
			got = append(got, v.(session.MessageResponse))
		})
	}
	h.at(0, func() { send("e1", &session.WatchClaim{Claimer: "bot-a", For: 15 * time.Second}) })
	h.at(time.Second, func() { send("e2", &session.WatchClaim{Claimer: "bot-b", For: 15 * time.Second}) })
	h.at(2*time.Second, func() { send("e3", &session.WatchClaim{Claimer: "bot-b", For: time.Hour}) })
	h.at(3*time.Second, func() { send("e1", &session.WatchClaim{Claimer: "bot-a", For: 15 * time.Second}) }) // redelivered
	var mid session.TurnState
	h.at(4*time.Second, func() { mid = h.state() })
	h.destroyAt(time.Hour)
	h.run(h.input(session.ApproveNever))

	if len(got) != 4 {
		t.Fatalf("answers: %+v", got)
	}
	if w := got[0].Watch; w == nil || !w.Granted || w.Holder != "bot-a" {
		t.Errorf("first message: lease %+v, want granted to bot-a", w)
	}
	if w := got[1].Watch; w == nil || w.Granted || w.Holder != "bot-a" {
		t.Errorf("second message while bot-a's lease runs: %+v, want refused, held by bot-a", w)
	}
	if got[2].Watch != nil {
		t.Errorf("a claim out of bounds: %+v, want no answer (the bot claims on its own)", got[2].Watch)
	}
	if w := got[3].Watch; !got[3].Duplicate || w == nil || !w.Granted {
		t.Errorf("redelivered message: %+v, want a duplicate with the lease renewed", got[3])
	}
	if mid.Watcher != "bot-a" {
		t.Errorf("turn state names watcher %q, want bot-a", mid.Watcher)
	}
}

// A release names the hold it gives up (ClaimWatchRequest.Held). One whose
// hold was renewed since — the same replica's next message granted the
// lease again while the release was on its way — is refused, and the
// lease stays with the replica that is about to draw the next turn; the
// release of the current hold, or one naming no hold (a bot of an earlier
// build), clears it. Without the check the stale release cleared the
// renewed lease, and a scanning replica drew the turn beside its sender.
func TestStaleReleaseKeepsARenewedLease(t *testing.T) {
	h := newHarness(t, final("one"), final("two"))
	var grants []time.Time
	send := func(id string) {
		h.update(session.UpdateSendMessage, session.MessageRequest{EventID: id, User: owner, Text: "hi", Watch: &session.WatchClaim{Claimer: "bot-a", For: 15 * time.Second}}, func(v any, err error) {
			if err != nil {
				t.Errorf("message %s refused: %v", id, err)
				return
			}
			if w := v.(session.MessageResponse).Watch; w != nil && w.Granted {
				grants = append(grants, w.Until)
			}
		})
	}
	var errs []error
	release := func(held func() time.Time) func() {
		return func() {
			h.update(session.UpdateClaimWatch, session.ClaimWatchRequest{Claimer: "bot-a", Release: true, Held: held()}, func(_ any, err error) { errs = append(errs, err) })
		}
	}
	first := func() time.Time { return grants[0] }
	second := func() time.Time { return grants[1] }
	none := func() time.Time { return time.Time{} }
	var watchers []string
	look := func() { watchers = append(watchers, h.state().Watcher) }
	h.at(0, func() { send("e1") })
	h.at(time.Second, func() { send("e2") }) // renews bot-a's lease
	h.at(2*time.Second, release(first))      // stale: refused
	h.at(3*time.Second, look)
	h.at(4*time.Second, release(second)) // the current hold: cleared
	h.at(5*time.Second, look)
	h.at(6*time.Second, func() {
		h.update(session.UpdateClaimWatch, session.ClaimWatchRequest{Claimer: "bot-a", For: 15 * time.Second}, nil)
	})
	h.at(7*time.Second, release(none)) // an earlier build's release: cleared
	h.at(8*time.Second, look)
	h.destroyAt(time.Hour)
	h.run(h.input(session.ApproveNever))

	if len(grants) != 2 || !grants[1].After(grants[0]) {
		t.Fatalf("grants %v, want two, the second later", grants)
	}
	var appErr *temporal.ApplicationError
	if len(errs) != 3 || !errors.As(errs[0], &appErr) || appErr.Type() != session.ErrTypeStaleRelease || errs[1] != nil || errs[2] != nil {
		t.Fatalf("releases answered %v, want the stale one refused (%s), the others taken", errs, session.ErrTypeStaleRelease)
	}
	if want := []string{"bot-a", "", ""}; !slices.Equal(watchers, want) {
		t.Errorf("watchers after each release %q, want %q", watchers, want)
	}
}
