package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// approver is the Slack user who starts every session, so may approve it.
const approver = "U0ALICE"

const channel = "CCHAOS"

// A task names its session, turn and number of calls; the model fake's
// responder reads it back from the conversation, so the fake needs no
// state of its own to script 200 sessions at once, and a retried model
// call gets the same answer.
var taskRe = regexp.MustCompile(`chaos task (s\d+) (t\d+(?:r\d+)?) n=(\d+)`)
var verifyRe = regexp.MustCompile(`chaos verify (s\d+)`)

// answer is the final text of a turn: posted exactly once in the thread
// when nothing is lost or duplicated.
func answer(sid, turn string) string { return fmt.Sprintf("chaos answer %s %s done", sid, turn) }

// workload is the scripted side of the run: the model's answers, the users
// who type and approve, and what they saw. Its records are the suite's
// evidence: sandbot's own view is never consulted for a check.
type workload struct {
	cfg   Config
	flaps *modelFaults

	mu sync.Mutex
	// calls is every tool call ID the model issued.
	calls map[string]bool
	// results is the tool result the model received for each call (the
	// first one).
	results map[string]string
	// verified is each session's `cat .m/*` output from its last turn.
	verified map[string]string
	// firstCard is, per turn sent, the time from the message to the first
	// new bot message in its thread.
	firstCard []time.Duration
	// toolCard is, per completed tool call, the time from the worker
	// reporting it done (its result reaching the model) to the thread
	// showing it done.
	toolCard []time.Duration
	doneAt   map[string]time.Time
	shown    map[string]bool // calls whose done state a card has shown
	turns    []turnRecord
	clicks   map[string]int // approval button value → clicks that counted
	// clickTotal is every click, counted or not; clickUnacked the clicks
	// delivered that no bot acknowledged.
	clickTotal, clickUnacked int
	// clickRetried are acknowledged clicks a private reply said had failed,
	// made again.
	clickRetried int
	// approved are the calls whose Approve click a bot acknowledged: each
	// must show exactly one decision on its card.
	approved map[string]bool
	// awaiting are acknowledged clicks (by button value) whose user reads
	// the private replies that come after them: a reply that is not a
	// refusal ("already decided") says the click failed, and they click
	// again. replies is every such reply, for the report.
	awaiting map[string]clickWait
	replies  []string
}

// clickAckWait is how long a user waits for Slack to confirm a click: its
// 3 s for the app's acknowledgement, and a little for the fake's record.
const clickAckWait = 3500 * time.Millisecond

// clickWait is an acknowledged click: the Slack fake's call sequence when
// it was made, and its thread.
type clickWait struct {
	seq    int
	thread string
}

type turnRecord struct {
	Session, Turn string
	// Thread is the session's thread root (ts), to show what the user
	// saw when the turn did not end.
	Thread  string
	Calls   int
	Outcome string // answered, failed, lost
	Retries int
}

func newWorkload(cfg Config) *workload {
	return &workload{cfg: cfg, flaps: &modelFaults{}, calls: map[string]bool{}, results: map[string]string{},
		verified: map[string]string{}, doneAt: map[string]time.Time{}, shown: map[string]bool{}, clicks: map[string]int{},
		approved: map[string]bool{}, awaiting: map[string]clickWait{}}
}

// markerCommand is what call id runs: it appends its ID to a marker file of
// its own, so a command that ran twice has two lines, and a completed
// call's change must be in the workspace at the end. Some calls take a
// while, so faults land during commands too.
func markerCommand(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	ms := h.Sum32() % 700
	return fmt.Sprintf("mkdir -p .m && sleep 0.%03d && echo %s >> .m/%s", ms, id, id)
}

func shellArgs(cmds ...string) string {
	b, _ := json.Marshal(map[string]any{"commands": cmds})
	return string(b)
}

// respond is the model fake's responder.
func (w *workload) respond(req fakeopenai.RecordedRequest) fakeopenai.Step {
	if st, ok := w.flaps.next(); ok {
		return st
	}
	msgs := req.Body.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		var tools []fakeopenai.ChatMessage
		for _, m := range msgs[i+1:] {
			if m.Role == "tool" {
				tools = append(tools, m)
			}
		}
		w.recordResults(tools)
		if m := taskRe.FindStringSubmatch(msgs[i].Content); m != nil {
			sid, turn := m[1], m[2]
			n, _ := strconv.Atoi(m[3])
			if len(tools) >= n {
				return fakeopenai.FinalStep(answer(sid, turn))
			}
			id := fmt.Sprintf("%s%sc%d", sid, turn, len(tools)+1)
			w.mu.Lock()
			w.calls[id] = true
			w.mu.Unlock()
			return fakeopenai.ToolCallStep(id, "shell", shellArgs(markerCommand(id)))
		}
		if m := verifyRe.FindStringSubmatch(msgs[i].Content); m != nil {
			sid := m[1]
			// Only a read that ran to its end counts: a worker killed
			// during the cat reports the call interrupted, so read again.
			if len(tools) == 0 || (!completedResult(tools[len(tools)-1].Content) && len(tools) < 6) {
				return fakeopenai.ToolCallStep(fmt.Sprintf("%sverify%d", sid, len(tools)+1), "shell", shellArgs("cat .m/*"))
			}
			if last := tools[len(tools)-1].Content; completedResult(last) {
				w.mu.Lock()
				w.verified[sid] = last
				w.mu.Unlock()
			}
			return fakeopenai.FinalStep("chaos verified " + sid)
		}
	}
	return fakeopenai.FinalStep("chaos: no task in this conversation")
}

func (w *workload) recordResults(tools []fakeopenai.ChatMessage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range tools {
		if _, ok := w.results[m.ToolCallID]; !ok {
			w.results[m.ToolCallID] = m.Content
			w.doneAt[m.ToolCallID] = time.Now()
		}
	}
}

// modelFaults are the model API's flaps: a number of 500s, or a window of
// 401s (a rotated key), served before any scripted answer.
type modelFaults struct {
	mu        sync.Mutex
	errors    int
	authUntil time.Time
	served    map[string]int
}

func (f *modelFaults) serverErrors(n int) {
	f.mu.Lock()
	f.errors += n
	f.mu.Unlock()
}

func (f *modelFaults) authWindow(d time.Duration) {
	f.mu.Lock()
	f.authUntil = time.Now().Add(d)
	f.mu.Unlock()
}

func (f *modelFaults) next() (fakeopenai.Step, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.served == nil {
		f.served = map[string]int{}
	}
	if time.Now().Before(f.authUntil) {
		f.served["401"]++
		return fakeopenai.ErrorStep(401, "Incorrect API key provided: sk-ch***cdef."), true
	}
	if f.errors > 0 {
		f.errors--
		f.served["500"]++
		return fakeopenai.ErrorStep(500, "The server had an error while processing your request."), true
	}
	return fakeopenai.Step{}, false
}

// driveSession is one user's conversation: Turns turns of 5–10 approved
// calls, each message delivered 1–4 times (redeliveries out of order), and
// a last turn that reads the markers back.
func (w *workload) driveSession(ctx context.Context, s *stack, rng *rand.Rand, sid string) {
	var th chat.Thread
	for t := 1; t <= w.cfg.Turns; t++ {
		turn := fmt.Sprintf("t%d", t)
		n := 5 + rng.IntN(6)
		rec := turnRecord{Session: sid, Turn: turn, Calls: n}
		for attempt := 0; ; attempt++ {
			tok := turn
			if attempt > 0 {
				tok = fmt.Sprintf("%sr%d", turn, attempt)
			}
			text := fmt.Sprintf("chaos task %s %s n=%d", sid, tok, n)
			var ok bool
			th, ok = w.send(ctx, s, rng, th, text)
			if !ok {
				rec.Outcome = "lost"
				break
			}
			rec.Thread = th.Thread
			out := w.await(ctx, s, th, answer(sid, tok))
			if out == "failed" && attempt < 6 && ctx.Err() == nil {
				// A visible failure (the model's key was refused): the
				// user asks again, as a person would.
				rec.Retries++
				continue
			}
			rec.Outcome = out
			break
		}
		w.mu.Lock()
		w.turns = append(w.turns, rec)
		w.mu.Unlock()
		if rec.Outcome == "lost" || th.Thread == "" {
			return
		}
	}
	for attempt := 0; attempt < 4 && ctx.Err() == nil; attempt++ {
		var ok bool
		if th, ok = w.send(ctx, s, rng, th, "chaos verify "+sid); !ok {
			return
		}
		if w.await(ctx, s, th, "chaos verified "+sid) == "answered" {
			return
		}
	}
}

// send posts text (a mention at the channel's root for the first message)
// and delivers its events again 0–3 more times, some of them later and so
// after the messages that follow.
func (w *workload) send(ctx context.Context, s *stack, rng *rand.Rand, th chat.Thread, text string) (chat.Thread, bool) {
	msg := fakeslack.UserMessage{User: approver, Channel: channel, Text: text}
	if th.Thread == "" {
		msg.Text = s.slack.Mention() + " " + text
	} else {
		msg.ThreadTS = th.Thread
	}
	before := time.Now()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	sent, err := s.slack.SendMessage(sctx, msg)
	cancel()
	if err != nil {
		return th, false
	}
	if th.Thread == "" {
		th = chat.Thread{Platform: slack.Platform, Workspace: s.slack.Options().TeamID, Channel: channel, Thread: sent.Message.TS}
	}
	extra := rng.IntN(w.cfg.MaxDeliveries)
	delays := make([]time.Duration, extra)
	for i := range delays {
		delays[i] = time.Duration(rng.IntN(3000)) * time.Millisecond
	}
	for _, env := range sent.Envelopes {
		for _, d := range delays {
			go func() {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
				rctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				_, _ = s.slack.Redeliver(rctx, env)
			}()
		}
	}
	// The first card: the first bot message in the thread that was not
	// there before.
	seen := map[string]bool{}
	for _, m := range s.slack.Snapshot().BotMessages(channel, th.Thread) {
		seen[m.TS] = true
	}
	go func() {
		wctx, cancel := context.WithTimeout(ctx, w.cfg.TurnTimeout)
		defer cancel()
		_, err := s.slack.WaitFor(wctx, func(sn fakeslack.Snapshot) bool {
			for _, m := range sn.BotMessages(channel, th.Thread) {
				if !seen[m.TS] && m.User != approver {
					return true
				}
			}
			return false
		})
		if err == nil {
			w.mu.Lock()
			w.firstCard = append(w.firstCard, time.Since(before))
			w.mu.Unlock()
		}
	}()
	return th, true
}

// await answers approvals in th until the answer is posted ("answered"), a
// turn failure shows ("failed") or the turn timeout passes ("lost").
func (w *workload) await(ctx context.Context, s *stack, th chat.Thread, want string) string {
	deadline := time.Now().Add(w.cfg.TurnTimeout)
	botID := s.slack.Options().BotID
	// Failed cards of earlier attempts stay in the thread; only a new one
	// is this attempt's.
	failedBefore := map[string]bool{}
	for _, m := range s.slack.Snapshot().BotMessages(channel, th.Thread) {
		if strings.Contains(messageText(m), "❌ Failed") {
			failedBefore[m.TS] = true
		}
	}
	for {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return "lost"
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		var click *fakeslack.Click
		var value string
		var outcome string
		_, _ = s.slack.WaitFor(wctx, func(sn fakeslack.Snapshot) bool {
			click, outcome = nil, ""
			w.readReplies(sn, th.Thread)
			for _, m := range sn.BotMessages(channel, th.Thread) {
				if m.BotID != botID {
					continue
				}
				text := messageText(m)
				if strings.Contains(text, want) {
					outcome = "answered"
					return true
				}
				w.noteShownDone(text)
				for _, b := range m.Buttons() {
					if slack.ActionIDOf(b.ActionID) != chat.ActionApprove {
						continue
					}
					w.mu.Lock()
					clicked := w.clicks[b.Value]
					w.mu.Unlock()
					if clicked == 0 {
						click = &fakeslack.Click{User: approver, Channel: channel, MessageTS: m.TS, ActionID: b.ActionID}
						value = b.Value
						return true
					}
				}
			}
			for _, m := range sn.BotMessages(channel, th.Thread) {
				if m.BotID == botID && strings.Contains(messageText(m), "❌ Failed") && !failedBefore[m.TS] {
					outcome = "failed"
					return true
				}
			}
			return false
		})
		cancel()
		if outcome != "" {
			return outcome
		}
		if click == nil {
			continue
		}
		w.mu.Lock()
		w.clicks[value]++
		w.mu.Unlock()
		seq := lastSeq(s.slack.Snapshot())
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		id, err := s.slack.ClickButton(cctx, *click)
		cancel()
		unacked := false
		if err == nil {
			// Slack tells the user an app that does not acknowledge a
			// click within 3 s did not respond (it never sends the click
			// again): the bot that got it died. They click again.
			actx, cancel := context.WithTimeout(ctx, clickAckWait)
			_, err = s.slack.WaitFor(actx, func(sn fakeslack.Snapshot) bool { return sn.Acked(id) })
			cancel()
			unacked = err != nil
		}
		w.mu.Lock()
		w.clickTotal++
		if unacked {
			w.clickUnacked++
		}
		if err == nil {
			if _, call, derr := chat.DecodeApproval(value); derr == nil {
				w.approved[call] = true
			}
			w.awaiting[value] = clickWait{seq: seq, thread: th.Thread}
		}
		if err != nil {
			// Not delivered (no connection for a minute) or not
			// acknowledged: the button is still there to click.
			w.clicks[value]--
		}
		w.mu.Unlock()
	}
}

// readReplies is the user of thread reading the private replies Slack
// showed them after their acknowledged clicks: a refusal ("already
// decided") ends the wait; any other reply says the click did not take
// (the session could not be reached), so the button may be clicked again,
// as a person would.
func (w *workload) readReplies(sn fakeslack.Snapshot, thread string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for value, cw := range w.awaiting {
		if cw.thread != thread {
			continue
		}
		for _, c := range sn.CallsTo("chat.postEphemeral") {
			if c.Seq <= cw.seq || c.Error != "" || c.Form.Get("user") != approver || c.Form.Get("thread_ts") != thread {
				continue
			}
			text := c.Form.Get("text")
			w.replies = append(w.replies, text)
			delete(w.awaiting, value)
			if !strings.Contains(text, "already decided") {
				w.clicks[value]--
				w.clickRetried++
			}
			break
		}
	}
}

// lastSeq is the sequence number of the fake's latest Web API call.
func lastSeq(sn fakeslack.Snapshot) int {
	if len(sn.Calls) == 0 {
		return 0
	}
	return sn.Calls[len(sn.Calls)-1].Seq
}

// noteShownDone records when a completed call first shows as done on a
// card: the card line of a call has its marker file name in the command.
func (w *workload) noteShownDone(text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, at := range w.doneAt {
		if w.shown[id] || !strings.Contains(text, ".m/"+id) {
			continue
		}
		for line := range strings.SplitSeq(text, "\n") {
			if strings.Contains(line, ".m/"+id) && strings.Contains(line, "✅") {
				w.shown[id] = true
				w.toolCard = append(w.toolCard, time.Since(at))
			}
		}
	}
}

// messageText is a message's text as a reader sees it.
func messageText(m fakeslack.Message) string { return m.ReaderText() }

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(s) }
