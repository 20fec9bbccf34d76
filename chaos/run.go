// Package chaos runs sandbot's real parts together under load while faults
// hit them at random moments, and counts from the fakes' own records
// whether anything was lost or done twice.
//
// The stack is the one a team deploys, on one machine: the embedded
// Temporal server (restartable), several cmd/worker processes with host IDs
// of their own, two cmd/bot replicas on the Slack fake, the snapshot store
// on a shared directory and the OpenAI fake. A seeded schedule kills
// workers and bots with SIGKILL, restarts the Temporal server, drops every
// Socket Mode connection, answers chat.update and chat.postMessage with 429,
// and makes the model answer 500 or refuse its key; every user message is
// delivered up to four times, redeliveries out of order.
//
// The evidence is what the fakes saw: the messages in the Slack fake, the
// tool calls the model fake issued and the results it got back, and marker
// files each command appends to in its workspace, read back by a last turn
// of every session. Sandbot's own view of its sessions is not consulted.
//
// The load mode (load.go) runs the same users and checks on the Discord
// fake instead (discord.go): hundreds of sessions, each its own thread,
// started at a bounded pace and bounded in time, every call approved with
// a click that reaches both bot replicas as a gateway interaction. Slack's
// workspace-wide chat.update budget would bound such a load to about 25
// approved calls a minute; Discord's limits are per thread and per bot,
// which the Discord fake keeps (fakediscord.Budgets). The workload reads
// either fake through chatFake (platform.go), so both platforms share one
// user, one check and one report.
//
// Run it with `go test ./chaos -chaos` (the short mode), `-long`, `-soak`
// or `-load`, or `go run ./cmd/chaos` with the same flags; plain `go test
// ./chaos` runs the check tests and reports the modes as skipped.
// docs/RELIABILITY.md has the figures and how to reproduce them.
package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
	"go.temporal.io/api/workflowservice/v1"
)

// Config sizes a run.
type Config struct {
	// Seed draws everything random: the calls per turn, the redeliveries and
	// the faults. The report prints it; the same seed replays the same
	// schedule (the stack's own timing still varies).
	Seed uint64
	// Dir holds the run's state and logs; it must exist.
	Dir string
	// Sessions run at once, each Turns turns of 5–10 calls (Calls), every
	// call approved by the session's owner.
	Sessions, Turns int
	// Calls is the range of calls a turn makes, at least and at most
	// (5–10 when zero).
	Calls [2]int
	// ApprovalMode is the workers' SANDBOT_SESSION_APPROVAL_MODE
	// ("unless-readonly" when empty: every marker write waits for its
	// Approve click).
	ApprovalMode string
	// HistoryLimit is the workers' SANDBOT_SESSION_HISTORY_LIMIT in bytes
	// (their default when 0).
	HistoryLimit int
	// TranscriptLimit is the workers' SANDBOT_SESSION_TRANSCRIPT_LIMIT in
	// bytes (their default when 0).
	TranscriptLimit int
	// SessionCache is the workers' SANDBOT_SESSION_CACHE: the sessions
	// each keeps in memory between turns (their default when 0).
	SessionCache int
	// Docker adds the docker backend, on the local test image
	// (internal/testimage), to every worker and bot. A run whose faults
	// include FaultDockerRestart gets it, and in the short and long modes
	// every session but each third moves to docker after its first turn
	// (dockerSession).
	Docker bool
	// Cluster runs the stack on the Temporal server on PostgreSQL
	// (internal/pgtemporal, the production shape) instead of the embedded
	// server on SQLite; the program must call pgtemporal.ServeIfChild
	// first (the server is that program run again). WithCluster also adds
	// ClusterFaults to the run's faults.
	Cluster bool
	// Soak, when set, makes the run the soak: one session of Turns turns
	// with forks and backend switches along the way (soak.go).
	Soak *SoakConfig
	// Load, when set, makes the run the load mode: Sessions sessions
	// started at a bounded pace and bounded in time (load.go).
	Load *LoadConfig
	// Platform is the chat platform the bots are on: PlatformSlack (when
	// empty) or PlatformDiscord (discord.go).
	Platform string
	// Hosts and Bots are how many cmd/worker and cmd/bot processes run.
	Hosts, Bots int
	// Faults are the kinds injected (AllFaults by default; none by
	// default in the soak), one every FaultEvery on average.
	Faults     []string
	FaultEvery time.Duration
	// MaxDeliveries is the most times one Slack event is delivered (4).
	MaxDeliveries int
	// TurnTimeout is how long a turn may take before it counts as lost:
	// the suite stops waiting for its answer. It is well past SlowTurn,
	// so a turn that is slow under the faults is reported as slow, with
	// its time, and not as lost (the long mode's 8 sessions share the
	// workspace's 50 chat.update calls a minute, and every call of a turn
	// waits for a card edit that shows its Approve button).
	TurnTimeout time.Duration
	// Log receives the stack's and the faults' log lines.
	Log *slog.Logger
}

// ShortFaults are the short mode's faults: all of them.
var ShortFaults = AllFaults

// Short is the CI mode: a few minutes on two cores.
func Short(seed uint64, dir string) Config {
	return Config{Seed: seed, Dir: dir, Sessions: 3, Turns: 3, Hosts: 3, Bots: 2, Faults: ShortFaults,
		FaultEvery: 6 * time.Second, MaxDeliveries: 4, TurnTimeout: 10 * time.Minute}
}

// SlowTurn is the turn time the report counts turns past: a figure, not a
// failure (see Config.TurnTimeout).
const SlowTurn = 5 * time.Minute

// WithCluster puts c on the cluster shape (Config.Cluster) and adds the
// faults only that shape has to c's own.
func WithCluster(c Config) Config {
	c.Cluster = true
	if len(c.Faults) > 0 {
		c.Faults = append(slices.Clone(c.Faults), ClusterFaults...)
	}
	return c
}

// Long is the local mode whose figures docs/RELIABILITY.md reports.
func Long(seed uint64, dir string) Config {
	// Sized to end within the test's hour: every call waits for an
	// approval and its own card edits, and the workspace's chat.update
	// budget (50 a minute) is shared by every session.
	c := Short(seed, dir)
	c.Sessions, c.Turns = 8, 6
	c.Faults = AllFaults
	c.FaultEvery = 5 * time.Second
	return c
}

// Report is what a run found. The "must be zero" counts are failures.
type Report struct {
	Seed     uint64
	Config   string
	Duration time.Duration
	// Platform is the chat platform the run's bots were on.
	Platform string

	Turns         int
	Answered      int
	FailedVisibly int // a turn failure shown on its card; the user asked again
	Retries       int
	// TurnsLost: the expected answer never posted (must be 0).
	TurnsLost int
	// AnswersTwice: an answer posted more than once (must be 0).
	AnswersTwice int
	// CommandsTwice: a command whose marker has more than one line (must be 0).
	CommandsTwice int
	// ChangesLost: a call whose result reached the model as completed, in a
	// completed turn, whose marker is missing at the end (must be 0).
	ChangesLost int
	// PostedTwice: two bot messages in one thread with the same text
	// (must be 0); a status card deleted as a duplicate counts if it stood
	// longer than cardDeleteGrace.
	PostedTwice int
	// CardsDeleted counts status cards the bots deleted as duplicates (a
	// replica that found another card recorded for the turn deletes its
	// own), and CardDeletedLongest is the longest any of them stood.
	CardsDeleted       int
	CardDeletedLongest time.Duration
	// RateViolations are the chat fake's budget violations (must be 0).
	RateViolations int
	// SessionsUnverified: sessions whose final marker read never came back
	// (must be 0).
	SessionsUnverified int
	// ApprovalsLost: a call whose Approve click a bot acknowledged, whose
	// line on its status card shows no decision; ApprovalsTwice: a call
	// line showing more than one (both must be 0). Calls whose line a card
	// no longer shows are not counted (a lost one stalls its turn, which
	// counts as lost).
	ApprovalsLost, ApprovalsTwice int
	// ApprovalsChecked is how many acknowledged approvals had their call's
	// line on a card to check.
	ApprovalsChecked int

	Calls, Approvals int
	// EventsResent are the events Slack (the fake) sent again because no
	// bot acknowledged them: delivered to a bot that died before handing
	// them on. ClicksUnacked are clicks no bot acknowledged, which the
	// user made again.
	EventsResent, ClicksUnacked int
	// ClicksRetried are acknowledged clicks whose private reply said they
	// failed, made again; Replies are the private replies the user read.
	ClicksRetried int
	Replies       []string
	FirstCard     [2]time.Duration // p50, p95
	ToolCard      [2]time.Duration
	// TurnTime is the answered turns' time from message to answer: p50,
	// p95 and the longest; SlowTurns is how many took longer than
	// SlowTurn.
	TurnTime     [3]time.Duration
	SlowTurns    int
	Faults       map[string]int
	FaultErrors  []string
	WorkerRSS    int64 // the largest resident size seen, bytes
	BotRSS       int64
	HistoryBytes int64 // the largest current-run history of a session
	Problems     []string
	// DockerSwitches are the sessions that asked to move to docker
	// (dockerSession), DockerStarted those the bot said it moves, and
	// DockerConfirmed those whose next turn's pwd showed the docker
	// workspace: the sessions the Docker daemon fault can hit.
	DockerSwitches, DockerStarted, DockerConfirmed int
	// Soak is the soak's own findings (nil in the other modes).
	Soak *SoakReport
	// Load is how far the load mode got (nil in the other modes).
	Load *LoadReport
}

// Failures lists the must-be-zero counts that are not.
func (r Report) Failures() []string {
	var out []string
	check := func(name string, n int) {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s: %d", name, n))
		}
	}
	check("turns lost", r.TurnsLost)
	check("answers posted twice", r.AnswersTwice)
	check("commands run twice", r.CommandsTwice)
	check("workspace changes lost", r.ChangesLost)
	check("chat messages posted twice", r.PostedTwice)
	check("rate-limit violations", r.RateViolations)
	check("sessions whose markers could not be read back", r.SessionsUnverified)
	check("approvals lost", r.ApprovalsLost)
	check("approvals decided twice", r.ApprovalsTwice)
	check("fault injections that failed", len(r.FaultErrors))
	if r.Soak != nil {
		out = append(out, r.Soak.failures()...)
	}
	return out
}

// Run builds the stack, runs the workload under faults and checks the
// fakes' records.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if len(cfg.Faults) == 0 && cfg.Soak == nil && cfg.Load == nil {
		cfg.Faults = AllFaults
	}
	if slices.Contains(cfg.Faults, FaultDockerRestart) {
		cfg.Docker = true
	}
	rep := Report{Seed: cfg.Seed, Config: fmt.Sprintf("%d sessions × %d turns, %d worker hosts, %d bot replicas, a fault every ~%s",
		cfg.Sessions, cfg.Turns, cfg.Hosts, cfg.Bots, cfg.FaultEvery)}
	if cfg.Cluster {
		rep.Config += "; Temporal server on PostgreSQL"
	}
	if cfg.Soak != nil {
		rep.Config = cfg.Soak.describe(cfg)
	}
	if cfg.Load != nil {
		rep.Config = cfg.Load.describe(cfg)
	}
	start := time.Now()
	w := newWorkload(cfg)
	s, err := startStack(ctx, cfg, w, cfg.Log)
	if err != nil {
		return rep, err
	}
	defer s.close()

	rctx, stopFaults := context.WithCancel(ctx)
	in := &injector{s: s, w: w, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 1)), counts: map[string]int{}}
	var faultsDone sync.WaitGroup
	if len(cfg.Faults) > 0 {
		faultsDone.Go(func() { in.run(rctx) })
	}
	var memDone sync.WaitGroup
	memDone.Go(func() {
		for {
			for _, h := range s.hosts {
				rep.WorkerRSS = max(rep.WorkerRSS, h.rssBytes())
			}
			for _, b := range s.bots {
				rep.BotRSS = max(rep.BotRSS, b.rssBytes())
			}
			select {
			case <-rctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	})

	var users sync.WaitGroup
	if cfg.Soak != nil {
		rng := rand.New(rand.NewPCG(cfg.Seed, 2))
		stop := cfg.Soak.stopAt(ctx, start)
		users.Go(func() { w.driveSoak(ctx, s, rng, "s01", stop) })
	} else if cfg.Load != nil {
		users.Go(func() { w.driveLoad(ctx, s, start) })
	} else {
		for i := range cfg.Sessions {
			sid := fmt.Sprintf("s%02d", i+1)
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)+2))
			users.Go(func() { w.driveSession(ctx, s, rng, sid) })
		}
	}
	users.Wait()
	stopFaults()
	faultsDone.Wait()
	memDone.Wait()
	rep.Duration = time.Since(start)
	w.check(s, &rep)
	rep.Faults, rep.FaultErrors = in.counts, in.errs
	rep.HistoryBytes = s.largestHistory(ctx)
	if cfg.Soak != nil {
		w.soakHistory(ctx, s, rep.Soak)
	}
	if cfg.Load != nil {
		rep.Load = w.loadReport()
	}
	return rep, nil
}

// cardDeleteGrace is how long a status card deleted as a duplicate may have
// stood and still count as taken out, not as shown twice: a bot refused the
// record of its card deletes it at once (a record, then a delete: well under
// a second on an idle machine, a few seconds under the suite's faults), so
// it flickers into the thread and out. One that stood longer was read as a
// second card; the report counts it as posted twice, and gives the longest
// any deleted card stood either way.
const cardDeleteGrace = 10 * time.Second

// check counts what the fakes recorded.
func (w *workload) check(s *stack, rep *Report) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rec := s.chatFake().records()
	rep.Platform = rec.Platform
	rep.RateViolations = len(rec.Violations)
	for _, v := range rec.Violations {
		rep.Problems = append(rep.Problems, "rate: "+v)
	}
	rep.Calls = len(w.calls)
	rep.Approvals, rep.ClicksUnacked, rep.ClicksRetried = w.clickTotal, w.clickUnacked, w.clickRetried
	rep.Replies = slices.Clone(w.replies)
	rep.EventsResent = rec.Resent
	rep.FirstCard = [2]time.Duration{percentile(w.firstCard, 0.5), percentile(w.firstCard, 0.95)}
	rep.ToolCard = [2]time.Duration{percentile(w.toolCard, 0.5), percentile(w.toolCard, 0.95)}

	// Bot messages that can exist once only: a turn's answer, a turn's
	// card (the one message naming its calls' marker files) and a turn's
	// approval notice (its text names the turn). Failure notices and the
	// like repeat legitimately across turns, so exact text is not enough.
	answers := map[string]int{}
	cards := map[string]map[string]bool{} // call ID → messages showing it
	notices := map[string]int{}
	for _, m := range rec.Bot {
		root, text := m.Thread, m.Text
		if am := answerRe.FindStringSubmatch(text); am != nil {
			answers[am[1]+" "+am[2]]++
		}
		if fm := forkAnswerRe.FindStringSubmatch(text); fm != nil {
			answers["fork check "+fm[1]]++
		}
		for _, id := range cardRe.FindAllStringSubmatch(text, -1) {
			if cards[id[1]] == nil {
				cards[id[1]] = map[string]bool{}
			}
			cards[id[1]][m.Ref] = true
		}
		if strings.HasPrefix(text, "✋ A command of turn ") {
			notices[root+" "+text]++
		}
	}
	// Each acknowledged approval's call, on the card that shows it: the
	// text from its marker name to the next call's is its line. (Approval
	// notices name commands too, and show no decisions.)
	decisions := map[string]int{}
	seenCall := map[string]bool{}
	callLines := map[string]string{} // a call's line on the card that shows it, for the report
	for _, m := range rec.Bot {
		text := m.Text
		if strings.HasPrefix(text, "✋ ") {
			continue
		}
		locs := cardRe.FindAllStringSubmatchIndex(text, -1)
		for i, l := range locs {
			id := text[l[2]:l[3]]
			end := len(text)
			if i+1 < len(locs) {
				end = locs[i+1][0]
			}
			seg := text[l[0]:end]
			seenCall[id] = true
			callLines[id] = seg
			n := strings.Count(seg, "approved by") + strings.Count(seg, "approved always by") + strings.Count(seg, "rejected by")
			decisions[id] = max(decisions[id], n)
		}
	}
	for id := range w.approved {
		if !seenCall[id] {
			continue
		}
		rep.ApprovalsChecked++
		switch n := decisions[id]; {
		case n == 0:
			rep.ApprovalsLost++
			rep.Problems = append(rep.Problems, fmt.Sprintf("call %s: its approval was acknowledged and its card shows no decision; its line: %q; its clicks: %s", id, callLines[id], strings.Join(w.clickLog[id], "; ")))
		case n > 1:
			rep.ApprovalsTwice++
			rep.Problems = append(rep.Problems, fmt.Sprintf("call %s: its card shows %d decisions", id, n))
		}
	}
	for k, n := range answers {
		if n > 1 {
			rep.AnswersTwice += n - 1
			rep.Problems = append(rep.Problems, fmt.Sprintf("answer %s posted %d times", k, n))
		}
	}
	// Status cards the bots deleted as duplicates. People could read each
	// as a second card for as long as it stood: one deleted within
	// cardDeleteGrace of its post is counted apart (CardsDeleted), one that
	// stood longer showed its calls twice and counts as a message posted
	// twice. (An extra card a bot could not delete is edited into a pointer
	// that names no call; the fake keeps no earlier text, so how long it
	// showed calls is not counted.)
	for _, m := range rec.Deleted {
		ids := cardRe.FindAllStringSubmatch(m.Text, -1)
		if len(ids) == 0 || strings.HasPrefix(m.Text, "✋ ") {
			continue
		}
		up := m.Deleted.Sub(m.Posted)
		rep.CardsDeleted++
		rep.CardDeletedLongest = max(rep.CardDeletedLongest, up)
		if up <= w.cardDeleteGrace {
			continue
		}
		rep.Problems = append(rep.Problems, fmt.Sprintf("status card %s stood %s before it was deleted as a duplicate", m.Ref, up.Round(time.Millisecond)))
		for _, id := range ids {
			if cards[id[1]] == nil {
				cards[id[1]] = map[string]bool{}
			}
			cards[id[1]][m.Ref] = true
		}
	}
	for id, msgs := range cards {
		if len(msgs) > 1 {
			rep.PostedTwice += len(msgs) - 1
			refs := slices.Sorted(maps.Keys(msgs))
			rep.Problems = append(rep.Problems, fmt.Sprintf("call %s shown on %d status messages (%s)", id, len(msgs), strings.Join(refs, ", ")))
		}
	}
	for k, n := range notices {
		if n > 1 {
			rep.PostedTwice += n - 1
			rep.Problems = append(rep.Problems, fmt.Sprintf("approval notice posted %d times: %.200q", n, k))
		}
	}

	// Markers, as the last turn of each session read them.
	lines := map[string]int{}
	verified := map[string]bool{}
	for sid, out := range w.verified {
		verified[sid] = true
		for l := range strings.SplitSeq(out, "\n") {
			l = strings.TrimSpace(l)
			if markerRe.MatchString(l) {
				lines[l]++
			}
		}
	}
	for id, n := range lines {
		if n > 1 {
			rep.CommandsTwice++
			rep.Problems = append(rep.Problems, fmt.Sprintf("command %s ran %d times", id, n))
		}
	}
	sessions := map[string]bool{}
	var took []time.Duration
	for _, t := range w.turns {
		if t.Outcome == "answered" {
			took = append(took, t.Took)
			if t.Took > SlowTurn {
				rep.SlowTurns++
			}
		}
	}
	rep.TurnTime = [3]time.Duration{percentile(took, 0.5), percentile(took, 0.95), percentile(took, 1)}
	for _, t := range w.turns {
		sessions[t.Session] = true
		rep.Turns++
		rep.Retries += t.Retries
		rep.FailedVisibly += t.Retries
		switch t.Outcome {
		case "answered":
			rep.Answered++
		default:
			rep.TurnsLost++
			rep.Problems = append(rep.Problems, fmt.Sprintf("turn %s %s: %s after %d attempts (%s); %s", t.Session, t.Turn, t.Outcome, t.Retries+1, strings.Join(t.Why, "; "), lastSeen(s.chatFake(), t.Thread)))
		}
	}
	for sid := range sessions {
		if !verified[sid] {
			rep.SessionsUnverified++
			rep.Problems = append(rep.Problems, "session "+sid+": the markers were never read back")
		}
	}
	// A completed call of an answered turn left its marker.
	for _, t := range w.turns {
		if t.Outcome != "answered" || !verified[t.Session] {
			continue
		}
		tok := t.Turn
		if t.Retries > 0 {
			tok = fmt.Sprintf("%sr%d", t.Turn, t.Retries)
		}
		for c := 1; c <= t.Calls; c++ {
			id := fmt.Sprintf("%s%sc%d", t.Session, tok, c)
			res, ok := w.results[id]
			if !ok || !completedResult(res) {
				continue
			}
			if lines[id] == 0 {
				rep.ChangesLost++
				rep.Problems = append(rep.Problems, fmt.Sprintf("call %s completed but its marker is gone (result %.200q)", id, res))
			}
		}
	}
	for _, sw := range w.switches {
		rep.DockerSwitches++
		if !switchStarted(sw.Reply) {
			rep.Problems = append(rep.Problems, fmt.Sprintf("/backend docker before turn %d: the reply was %.200q (not counted as a failure)", sw.Turn, sw.Reply))
			continue
		}
		rep.DockerStarted++
	}
	for _, t := range w.turns {
		if t.On != "docker" {
			continue
		}
		tok := t.Turn
		if t.Retries > 0 {
			tok = fmt.Sprintf("%sr%d", t.Turn, t.Retries)
		}
		if res := w.results[t.Session+tok+"w"]; ranOn(res, "docker", s.dir) {
			rep.DockerConfirmed++
		} else {
			// A pwd that met the daemon down, say: not a failure.
			rep.Problems = append(rep.Problems, fmt.Sprintf("turn %s %s, after /backend docker: its pwd read %.200q (not counted as a failure)", t.Session, tok, res))
		}
	}
	if w.cfg.Soak != nil {
		rep.Soak = w.checkSoak(s, s.slack.Snapshot())
		rep.Problems = append(rep.Problems, rep.Soak.problems...)
	}
	sort.Strings(rep.Problems)
}

var (
	answerRe = regexpMust(`chaos answer (s\d+) (t\d+(?:r\d+)?) done`)
	// forkAnswerRe is a soak fork check's answer (forkCheckAnswer).
	forkAnswerRe = regexpMust(`chaos forkcheck (f\d+(?:r\d+)?) done`)
	markerRe     = regexpMust(`^s\d+t\d+(?:r\d+)?c\d+$`)
	cardRe       = regexpMust(`\.m/(s\d+t\d+(?:r\d+)?c\d+)`)
)

// completedResult reports whether a tool result says the command ran to
// its end with status 0.
func completedResult(res string) bool {
	return strings.Contains(res, "exit code: 0") && !strings.Contains(res, "interrupted")
}

// largestHistory is the largest history of a session's current run.
func (s *stack) largestHistory(ctx context.Context) int64 {
	var biggest int64
	resp, err := s.cl.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: s.ns, PageSize: 1000})
	if err != nil {
		return -1
	}
	for _, e := range resp.Executions {
		d, err := s.cl.DescribeWorkflowExecution(ctx, e.GetExecution().GetWorkflowId(), "")
		if err != nil {
			continue
		}
		biggest = max(biggest, d.GetWorkflowExecutionInfo().GetHistorySizeBytes())
	}
	return biggest
}

// sessionNow is what th's session says of its turn as a turn is counted
// lost: whether the turn started, what it waits for, who watches it and
// how the turn before it ended. The fakes alone cannot tell a turn that
// never started from one nobody drew (the CI run of seed
// 1796648807632877242 lost a turn queued behind another, and its report
// could not say which).
func (s *stack) sessionNow(th chat.Thread) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := s.cl.QueryWorkflow(ctx, th.ID(), "", session.QueryTurnState)
	if err != nil {
		return "the session's turn state could not be read: " + err.Error()
	}
	var ts session.TurnState
	if err := v.Get(&ts); err != nil {
		return "the session's turn state could not be decoded: " + err.Error()
	}
	pending := "none"
	if ts.Pending != nil {
		pending = fmt.Sprintf("%s, asked %s", ts.Pending.CallID, ts.Pending.AskedAt.UTC().Format("15:04:05"))
	}
	prev := "none"
	if p := ts.Previous; p != nil {
		prev = fmt.Sprintf("turn %d %s, answer claimed by %q, posted as %q", p.Turn, p.Status, p.FinalClaim, p.FinalRef)
	}
	return fmt.Sprintf("the session now: turn %d %s (messages %v, %d queued), waiting approval: %s, watched by %q until %s, card %q, answer claimed by %q, posted as %q, awaiting post %t; the turn before: %s",
		ts.Turn, ts.Status, ts.MessageRefs, ts.Queued, pending, ts.Watcher, ts.WatchUntil.UTC().Format("15:04:05"), ts.StatusRef, ts.FinalClaim, ts.FinalRef, ts.AwaitingPost, prev)
}

// Markdown renders the report as docs/RELIABILITY.md's table.
func (r Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Seed %d; %s; ran %s.\n\n", r.Seed, r.Config, r.Duration.Round(time.Second))
	fmt.Fprintf(&b, "| measure | value |\n|---|---|\n")
	row := func(k string, v any) { fmt.Fprintf(&b, "| %s | %v |\n", k, v) }
	row("turns (answered / failed visibly, asked again)", fmt.Sprintf("%d (%d / %d)", r.Turns, r.Answered, r.FailedVisibly))
	row("tool calls issued / approvals clicked", fmt.Sprintf("%d / %d", r.Calls, r.Approvals))
	row("events resent unacknowledged / clicks unacknowledged, made again", fmt.Sprintf("%d / %d", r.EventsResent, r.ClicksUnacked))
	row("clicks a private reply said failed, made again", r.ClicksRetried)
	row("turns lost (must be 0)", r.TurnsLost)
	row("answers posted twice (must be 0)", r.AnswersTwice)
	row("commands run twice (must be 0)", r.CommandsTwice)
	row("workspace changes lost from completed turns (must be 0)", r.ChangesLost)
	row("chat messages posted twice (must be 0)", r.PostedTwice)
	row("duplicate status cards deleted (longest stood)", fmt.Sprintf("%d (%s)", r.CardsDeleted, r.CardDeletedLongest.Round(time.Millisecond)))
	row(r.Platform+" rate-limit violations (must be 0)", r.RateViolations)
	row("approvals lost / decided twice (must be 0), of those checked on their card", fmt.Sprintf("%d / %d of %d", r.ApprovalsLost, r.ApprovalsTwice, r.ApprovalsChecked))
	row("message → first status card, p50 / p95", fmt.Sprintf("%s / %s", r.FirstCard[0].Round(time.Millisecond), r.FirstCard[1].Round(time.Millisecond)))
	row("tool done → card shows it, p50 / p95", fmt.Sprintf("%s / %s", r.ToolCard[0].Round(time.Millisecond), r.ToolCard[1].Round(time.Millisecond)))
	row(fmt.Sprintf("turn time, message → answer, p50 / p95 / longest (over %s)", SlowTurn), fmt.Sprintf("%s / %s / %s (%d)", r.TurnTime[0].Round(time.Second), r.TurnTime[1].Round(time.Second), r.TurnTime[2].Round(time.Second), r.SlowTurns))
	row("largest session history (current run)", fmt.Sprintf("%d KB", r.HistoryBytes/1024))
	row("worker / bot resident memory, max", fmt.Sprintf("%d MB / %d MB", r.WorkerRSS>>20, r.BotRSS>>20))
	if r.DockerSwitches > 0 {
		row("sessions moved to docker (asked / under way / next turn ran there)", fmt.Sprintf("%d / %d / %d", r.DockerSwitches, r.DockerStarted, r.DockerConfirmed))
	}
	var kinds []string
	for k, n := range r.Faults {
		kinds = append(kinds, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(kinds)
	row("faults injected", strings.Join(kinds, ", "))
	if r.Soak != nil {
		r.Soak.markdown(&b)
	}
	if r.Load != nil {
		r.Load.markdown(&b, r)
	}
	return b.String()
}
