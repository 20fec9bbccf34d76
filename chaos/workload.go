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
//
// A task may name the backend it must run on (on=docker): its first call
// is then a pwd, whose output shows where it ran (the soak's check that a
// backend switch took effect). A verify may name how many turns to read
// the markers of (upto=N): it reads them in chunks (see markerGlobs) that
// each fit a tool result, and looks for markers of forks (which must not
// be in their parent's workspace).
var taskRe = regexp.MustCompile(`chaos task (s\d+) (t\d+(?:r\d+)?) n=(\d+)(?: on=(\w+))?`)
var verifyRe = regexp.MustCompile(`chaos verify (s\d+)(?: upto=(\d+))?(?: try=(\d+))?`)

// A fork check (the soak's) reads a marker of its parent in the fork's
// workspace, then writes a marker of its own.
var forkCheckRe = regexp.MustCompile(`chaos forkcheck (f\d+(?:r\d+)?) reads (s\d+t\d+(?:r\d+)?c\d+)`)

// forkCheckAnswer is the final text of a fork check.
func forkCheckAnswer(tok string) string { return "chaos forkcheck " + tok + " done" }

// answer is the final text of a turn: posted exactly once in the thread
// when nothing is lost or duplicated.
func answer(sid, turn string) string { return fmt.Sprintf("chaos answer %s %s done", sid, turn) }

// workload is the scripted side of the run: the model's answers, the users
// who type and approve, and what they saw. Its records are the suite's
// evidence: sandbot's own view is never consulted for a check.
type workload struct {
	cfg   Config
	flaps *modelFaults
	// cardDeleteGrace is how long a status card deleted as a duplicate may
	// have stood without counting as a second card (see check).
	cardDeleteGrace time.Duration

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
	// clickLog is, per call, what became of each click on its buttons
	// (acknowledged or not, the reply read after it), for the report of a
	// call whose approval is lost.
	clickLog map[string][]string
	// soak is the soak user's record (soak.go); load the load mode's
	// (load.go; nil in the other modes).
	soak soakState
	load *loadState
	// switches are the short and long modes' /backend docker
	// (dockerSession).
	switches []switchRecord
}

// clickAckWait is how long a user waits for Slack to confirm a click: its
// 3 s for the app's acknowledgement, and a little for the fake's record.
const clickAckWait = 3500 * time.Millisecond

// clickWait is an acknowledged click: the fake's position when it was
// made (chatFake.mark), its thread and its ID.
type clickWait struct {
	seq        int
	thread, id string
}

type turnRecord struct {
	Session, Turn string
	// Thread is the session's thread root (ts), to show what the user
	// saw when the turn did not end.
	Thread  string
	Calls   int
	Outcome string // answered, failed, lost
	Retries int
	// On is the backend the turn was to show it ran on ("": not checked).
	On string
	// Why says, for each attempt that did not end answered, what ended
	// it (the failed card the user saw, a send that did not go out, the
	// timeout), for the report of a lost turn.
	Why []string
	// Took is how long the answered attempt took, from the user's
	// message to the answer in the thread.
	Took time.Duration
}

func newWorkload(cfg Config) *workload {
	return &workload{cfg: cfg, flaps: &modelFaults{}, cardDeleteGrace: cardDeleteGrace, calls: map[string]bool{}, results: map[string]string{},
		verified: map[string]string{}, doneAt: map[string]time.Time{}, shown: map[string]bool{}, clicks: map[string]int{},
		approved: map[string]bool{}, awaiting: map[string]clickWait{}, clickLog: map[string][]string{},
		soak: soakState{memory: map[string][]MemSample{}}}
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
			sid, turn, on := m[1], m[2], m[4]
			n, _ := strconv.Atoi(m[3])
			if on != "" {
				if len(tools) == 0 {
					return fakeopenai.ToolCallStep(sid+turn+"w", "shell", shellArgs("pwd"))
				}
				tools = tools[1:]
			}
			if len(tools) >= n {
				return fakeopenai.FinalStep(answer(sid, turn))
			}
			id := fmt.Sprintf("%s%sc%d", sid, turn, len(tools)+1)
			w.mu.Lock()
			w.calls[id] = true
			w.mu.Unlock()
			return fakeopenai.ToolCallStep(id, "shell", shellArgs(markerCommand(id)))
		}
		if m := forkCheckRe.FindStringSubmatch(msgs[i].Content); m != nil {
			tok, parent := m[1], m[2]
			switch len(tools) {
			case 0:
				// Not "cat .m/<id>": the card check takes a call ID
				// after ".m/" on two status messages for a card posted
				// twice, and the parent's card names this one.
				return fakeopenai.ToolCallStep(tok+"c1", "shell", shellArgs("cd .m && cat "+parent))
			case 1:
				id := tok + "c2"
				w.mu.Lock()
				w.calls[id] = true
				w.mu.Unlock()
				return fakeopenai.ToolCallStep(id, "shell", shellArgs(markerCommand(id)))
			}
			return fakeopenai.FinalStep(forkCheckAnswer(tok))
		}
		if m := verifyRe.FindStringSubmatch(msgs[i].Content); m != nil {
			sid := m[1]
			reads := []string{"cat .m/*"}
			if upto, _ := strconv.Atoi(m[2]); upto > 0 {
				reads = nil
				for _, g := range markerGlobs(sid, upto) {
					reads = append(reads, "cat "+g)
				}
				reads = append(reads, forkMarkerRead)
			}
			// Only a read that ran to its end counts: a worker killed
			// during the cat reports the call interrupted, so the same
			// chunk is read again (five times more at most). Each read
			// as it first reached the model, when it was the newest tool
			// result: a full context elides older ones (head and tail
			// kept), which dropped the middle of every chunk.
			var done []string
			for _, t := range tools {
				w.mu.Lock()
				res := w.results[t.ToolCallID]
				w.mu.Unlock()
				if completedResult(res) {
					done = append(done, res)
				}
			}
			if len(done) < len(reads) && len(tools) < len(reads)+5 {
				return fakeopenai.ToolCallStep(verifyCallID(sid, m[3], len(tools)+1), "shell", shellArgs(reads[len(done)]))
			}
			if len(done) == len(reads) {
				w.mu.Lock()
				w.verified[sid] = strings.Join(done, "\n")
				w.mu.Unlock()
			}
			return fakeopenai.FinalStep("chaos verified " + sid)
		}
	}
	return fakeopenai.FinalStep("chaos: no task in this conversation")
}

// verifyCallID names a read-back's nth read. A read-back asked again
// (try, from its message) names its reads apart from the earlier tries':
// results are recorded by call ID as they first arrive, so a try that
// reused the IDs of one whose reads all failed was shown those failures
// again and could never complete (short runs counted sessions whose
// markers were never read back).
func verifyCallID(sid, try string, n int) string {
	if try == "" {
		return fmt.Sprintf("%sverify%d", sid, n)
	}
	return fmt.Sprintf("%sverify%s-%d", sid, try, n)
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

// driveSession is one user's conversation: Turns turns of approved
// calls, each message delivered 1–4 times (redeliveries out of order), and
// a last turn that reads the markers back.
func (w *workload) driveSession(ctx context.Context, s *stack, rng *rand.Rand, sid string) {
	var th chat.Thread
	for t := 1; t <= w.cfg.Turns && !w.load.over(sid); t++ {
		on := ""
		if t == 2 && w.dockerSession(s, sid) {
			// The rest of the session runs on docker, where the Docker
			// daemon fault hits it; the next turn's first call shows it.
			rec := w.askBackend(ctx, s, th, "docker", t)
			if switchStarted(rec.Reply) {
				on = "docker"
			}
			w.mu.Lock()
			w.switches = append(w.switches, rec)
			w.mu.Unlock()
		}
		if rec := w.runTurn(ctx, s, rng, &th, sid, t, on); rec.Outcome == "lost" || th.Thread == "" {
			return
		}
	}
	if th.Thread != "" { // "": the load mode's bound came before its first turn
		w.verifySession(ctx, s, rng, th, sid, 0)
	}
}

// dockerSession reports whether session sid of the short or long mode
// moves to the docker backend after its first turn: when the stack serves
// it (Config.Docker), every session but each third (s01, s04, ...).
func (w *workload) dockerSession(s *stack, sid string) bool {
	if s.docker == nil || w.cfg.Soak != nil || w.cfg.Load != nil {
		return false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(sid, "s"))
	return err == nil && (n-1)%3 != 0
}

// callRange is how many calls a turn makes, at least and at most.
func (c Config) callRange() (lo, hi int) {
	if c.Calls == [2]int{} {
		return 5, 10
	}
	return c.Calls[0], c.Calls[1]
}

// runTurn is turn t of session sid in *th (started by its first message):
// a task of calls in Config.Calls' range (on backend on, when set, which
// its first call shows), asked again when it fails visibly. It records the
// turn and returns the record.
func (w *workload) runTurn(ctx context.Context, s *stack, rng *rand.Rand, th *chat.Thread, sid string, t int, on string) turnRecord {
	turn := fmt.Sprintf("t%d", t)
	lo, hi := w.cfg.callRange()
	n := lo + rng.IntN(hi-lo+1)
	rec := turnRecord{Session: sid, Turn: turn, Calls: n, On: on}
	first := time.Now()
	for attempt := 0; ; attempt++ {
		tok := turn
		if attempt > 0 {
			tok = fmt.Sprintf("%sr%d", turn, attempt)
		}
		text := fmt.Sprintf("chaos task %s %s n=%d", sid, tok, n)
		if on != "" {
			text += " on=" + on
		}
		var since string
		var ok bool
		*th, since, ok = w.send(ctx, s, rng, *th, text)
		if !ok {
			rec.Outcome = "lost"
			rec.Why = append(rec.Why, tok+": the message could not be sent")
			break
		}
		rec.Thread = th.Thread
		sent := time.Now()
		out, why := w.await(ctx, s, *th, since, answer(sid, tok))
		switch out {
		case "answered":
			rec.Took = time.Since(sent)
		case "lost":
			rec.Why = append(rec.Why, fmt.Sprintf("%s (sent %s): %s; %s", tok, since, why, s.sessionNow(*th)))
		default:
			rec.Why = append(rec.Why, fmt.Sprintf("%s (sent %s): %s", tok, since, why))
		}
		if out == "failed" && time.Since(first) < w.cfg.TurnTimeout && ctx.Err() == nil {
			// A visible failure (the model's key was refused, a model
			// outage outlasted the call's retries): the user asks again,
			// as a person would, for as long as a turn may take. A fixed
			// number of tries counted a turn lost on a loaded machine
			// whose model 500 storms (25 failed requests in a minute,
			// each shown) failed it visibly seven times in a row.
			rec.Retries++
			continue
		}
		rec.Outcome = out
		break
	}
	w.mu.Lock()
	w.turns = append(w.turns, rec)
	w.mu.Unlock()
	return rec
}

// verifyAttempts is how many times a session's user asks for the marker
// read-back, 10 s apart, before the session counts as unverified: enough
// to outlast a Docker daemon restart and a model 500 storm together.
const verifyAttempts = 8

// verifySession is the last turn of a session: it reads the markers back
// (the first upto turns' in chunks, when upto is set), asking again when
// the read did not end.
func (w *workload) verifySession(ctx context.Context, s *stack, rng *rand.Rand, th chat.Thread, sid string, upto int) {
	text := "chaos verify " + sid
	if upto > 0 {
		text += fmt.Sprintf(" upto=%d", upto)
	}
	for attempt := 0; attempt < verifyAttempts && ctx.Err() == nil; attempt++ {
		var since string
		var ok bool
		asked := text
		if attempt > 0 {
			asked += fmt.Sprintf(" try=%d", attempt+1)
		}
		if th, since, ok = w.send(ctx, s, rng, th, asked); !ok {
			return
		}
		if out, _ := w.await(ctx, s, th, since, "chaos verified "+sid); out == "answered" {
			w.mu.Lock()
			_, read := w.verified[sid]
			w.mu.Unlock()
			if read {
				return
			}
		}
		// Answered without a complete read (every read failed, as when
		// the Docker daemon was down: a long run's read-back spent all
		// its reads in 0.4 s of an 18-second daemon restart), or failed
		// visibly (a model 500 storm): the user asks again a little
		// later. The faults go on meanwhile.
		sleep(ctx, 10*time.Second)
	}
}

// send posts text into th as the session's user (see chatFake.post) and
// delivers it again 0–3 more times, some of them later and so after the
// messages that follow. It returns the thread and the message's ref.
func (w *workload) send(ctx context.Context, s *stack, rng *rand.Rand, th chat.Thread, text string) (chat.Thread, string, bool) {
	before := time.Now()
	th, since, again, err := s.chat.post(ctx, th, text)
	if err != nil {
		return th, "", false
	}
	extra := rng.IntN(w.cfg.MaxDeliveries)
	for range extra {
		d := time.Duration(rng.IntN(3000)) * time.Millisecond
		go func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
			again(ctx)
		}()
	}
	// The first card: the first bot message in the thread after the
	// user's.
	go func() {
		wctx, cancel := context.WithTimeout(ctx, w.cfg.TurnTimeout)
		defer cancel()
		if s.chat.wait(wctx, func() bool { return len(s.chat.botMessages(th.Thread, since)) > 0 }) == nil {
			w.mu.Lock()
			w.firstCard = append(w.firstCard, time.Since(before))
			w.mu.Unlock()
		}
	}()
	return th, since, true
}

// botMessagesSince are the bot's messages in thread posted after the
// message with ts since (all of them when since is ""). A turn's card and
// answer come after the message that asked for it, so a long thread (the
// soak's thousands of messages) need not be read whole for every change.
func botMessagesSince(sn fakeslack.Snapshot, thread, since string) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range sn.Messages[channel] {
		if m.BotID != "" && (m.TS == thread || m.ThreadTS == thread) && (since == "" || tsLess(since, m.TS)) {
			out = append(out, m)
		}
	}
	return out
}

// tsLess orders Slack timestamps ("seconds.micros").
func tsLess(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	if len(as) != len(bs) {
		return len(as) < len(bs)
	}
	if as != bs {
		return as < bs
	}
	return af < bf
}

// showsFailure says a bot message tells the user a turn failed: its card
// shows "❌ Failed", or its answer says "⚠️ Turn N failed" (what the user
// reads when the card's last edit could not land, under a 429 storm: a
// short run's user waited 10 minutes for each of a read-back's tries on
// such a thread, the card still showing the turn running).
func showsFailure(text string) bool {
	return strings.Contains(text, "❌ Failed") || failedAnswerRe.MatchString(strings.TrimSpace(text))
}

var (
	failedAnswerRe = regexpMust(`^⚠️ Turn \d+ failed`)
	// turnRe finds the turns a bot message names: a card's footer ("Turn
	// 9 · local · …"), a failed turn's answer, a late answer's label, an
	// approval notice ("… of turn 9 waits …").
	turnRe = regexpMust(`(?i)\bturn (\d+)\b`)
)

// turnNamed is the highest turn text names, or 0.
func turnNamed(text string) int {
	n := 0
	for _, m := range turnRe.FindAllStringSubmatch(text, -1) {
		v, _ := strconv.Atoi(m[1])
		n = max(n, v)
	}
	return n
}

// ownFailure says text shows the failure of a turn after known, the
// highest turn named in the thread before the user's message (knownTurn):
// the failure of the turn that message started. A failure that names no
// turn is taken as its own.
func ownFailure(text string, known int) bool {
	if !showsFailure(text) {
		return false
	}
	n := turnNamed(text)
	return n == 0 || n > known
}

// knownTurn is the highest turn the bot's messages in thread named before
// the message since: the user's message after it starts a later one, so a
// failure that names that turn or an earlier one is not its own (an
// earlier turn's answer, posted after the message under a 429 storm or by
// the replica that finished it late: two short runs' users asked again
// while their turn ran, and the extra turn queued behind it counted lost).
func knownTurn(p chatFake, thread, since string) int {
	n := 0
	for _, m := range p.botMessages(thread, "") {
		if since != "" && !tsLess(m.Ref, since) {
			continue
		}
		n = max(n, turnNamed(m.Text))
	}
	return n
}

// await answers approvals in th until the answer is posted ("answered"), a
// turn failure shows ("failed") or the turn timeout passes ("lost"). It
// reads the bot's messages after the user's message since.
func (w *workload) await(ctx context.Context, s *stack, th chat.Thread, since, want string) (outcome, why string) {
	deadline := time.Now().Add(w.cfg.TurnTimeout)
	known := knownTurn(s.chat, th.Thread, since)
	// Failed cards of earlier attempts stay in the thread; only a new one
	// is this attempt's.
	failedBefore := map[string]bool{}
	for _, m := range s.chat.botMessages(th.Thread, since) {
		if showsFailure(m.Text) {
			failedBefore[m.Ref] = true
		}
	}
	for {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return "lost", fmt.Sprintf("no answer by %s", deadline.UTC().Format("15:04:05"))
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		var msg botMessage
		var btn *button
		var failedCard string
		_ = s.chat.wait(wctx, func() bool {
			btn, outcome = nil, ""
			w.readReplies(s.chat, th.Thread)
			msgs := s.chat.botMessages(th.Thread, since)
			for _, m := range msgs {
				if strings.Contains(m.Text, want) {
					outcome = "answered"
					return true
				}
				w.noteShownDone(m.Text)
				for _, b := range m.Buttons {
					if b.Action != chat.ActionApprove {
						continue
					}
					w.mu.Lock()
					clicked := w.clicks[b.Value]
					w.mu.Unlock()
					if clicked == 0 {
						msg, btn = m, &b
						return true
					}
				}
			}
			for _, m := range msgs {
				if ownFailure(m.Text, known) && !failedBefore[m.Ref] {
					outcome = "failed"
					failedCard = fmt.Sprintf("message %s shows the turn failed: %.160q", m.Ref, m.Text)
					return true
				}
			}
			return false
		})
		cancel()
		if outcome != "" {
			return outcome, failedCard
		}
		if btn == nil {
			continue
		}
		value := btn.Value
		w.mu.Lock()
		w.clicks[value]++
		w.mu.Unlock()
		seq := s.chat.mark()
		id, err := s.chat.click(ctx, msg, *btn)
		unacked := false
		if err == nil {
			// The platform tells the user an app that does not
			// acknowledge a click within 3 s did not respond (it never
			// sends the click again): the bot that got it died. They
			// click again.
			actx, cancel := context.WithTimeout(ctx, clickAckWait)
			err = s.chat.wait(actx, func() bool { return s.chat.acked(id) })
			cancel()
			unacked = err != nil
		}
		w.mu.Lock()
		w.clickTotal++
		if unacked {
			w.clickUnacked++
		}
		if _, call, derr := chat.DecodeApproval(value); derr == nil {
			w.clickLog[call] = append(w.clickLog[call], fmt.Sprintf("%s click %s: acknowledged %t, err %v", time.Now().UTC().Format("15:04:05.000"), id, err == nil, err))
		}
		if err == nil {
			if _, call, derr := chat.DecodeApproval(value); derr == nil {
				w.approved[call] = true
			}
			w.awaiting[value] = clickWait{seq: seq, thread: th.Thread, id: id}
		}
		if err != nil {
			// Not delivered (no connection for a minute) or not
			// acknowledged: the button is still there to click.
			w.clicks[value]--
		}
		w.mu.Unlock()
	}
}

// readReplies is the user of thread reading the private replies the
// platform showed them after their acknowledged clicks: a refusal
// ("already decided") ends the wait; any other reply says the click did
// not take (the session could not be reached), so the button may be
// clicked again, as a person would.
func (w *workload) readReplies(p chatFake, thread string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for value, cw := range w.awaiting {
		if cw.thread != thread {
			continue
		}
		text, ok := p.reply(cw)
		if !ok {
			continue
		}
		w.replies = append(w.replies, text)
		if _, call, derr := chat.DecodeApproval(value); derr == nil {
			w.clickLog[call] = append(w.clickLog[call], fmt.Sprintf("%s reply to click %s: %q", time.Now().UTC().Format("15:04:05.000"), cw.id, text))
		}
		delete(w.awaiting, value)
		if !strings.Contains(text, "already decided") {
			w.clicks[value]--
			w.clickRetried++
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
				// Done with: a soak's thousands of calls are not looked
				// for in every card again.
				delete(w.doneAt, id)
				break
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
