package chaos

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// The soak: one session (one Slack thread) running turn after turn, a
// thousand by default, with forks and backend switches along the way, on
// the same stack and workload as the other modes. It answers what the
// short and long modes cannot: whether a session's history stays bounded
// through continue-as-new, whether the workers' and bots' memory stays
// flat, and whether anything is lost or done twice over a long life. The
// evidence is the fakes' again: the thread's messages, the model's calls
// and the tool results it was sent, and the marker files read back at the
// end (in chunks, see markerGlobs).

// SoakConfig is what the soak adds to a run.
type SoakConfig struct {
	// ForkEvery: a /fork before every this many turns; the fork's first
	// turn reads the marker of the parent's last completed call, and
	// writes one of its own, which must not appear in the parent.
	ForkEvery int
	// SwitchEvery: /backend docker and /backend local in turn, before
	// every this many turns (halfway between forks); the next turn's
	// first call is a pwd, which shows where it ran.
	SwitchEvery int
	// SampleEvery: every this many turns (and after the first), the
	// resident memory of every worker and bot process is sampled.
	SampleEvery int
	// Profiles: at every memory sample, each worker's and bot's live heap
	// (after a collection) and goroutine profiles are saved in the run's
	// directory, under profiles/ (<process>-turn-NNNN.heap, .goroutine),
	// for go tool pprof -diff_base; the goroutine counts join the report.
	Profiles bool
	// For bounds the soak in time: no turn starts after it has passed (nor
	// within soakReserve of the run's context deadline); the markers are
	// still read back and checked, and the report says how far it got.
	For time.Duration
}

// soakReserve is the time left, before the run's deadline, for the last
// turn to end, the read-back and the checks.
const soakReserve = 3 * time.Minute

// Soak is the soak mode: turns turns (1,000 is the issue's), forks and
// switches spread over them, no faults unless asked for.
//
// Pace: every call runs without approval (the workers' approval mode is
// "never"; the short and long modes click every call). An approved call
// needs edits of its own on the card, and the workspace's chat.update
// budget (about 50 a minute, which the Slack fake enforces) would then
// hold a turn of 2–4 calls to some 6 a minute: 1,000 turns would take
// three hours. Without approvals a turn costs the budget a card and a few
// edits, and 1,000 turns fit in about an hour.
func Soak(seed uint64, dir string, turns int) Config {
	c := Short(seed, dir)
	c.Sessions, c.Turns, c.Hosts, c.Bots = 1, turns, 2, 2
	c.Faults = nil
	c.Calls = [2]int{2, 4}
	c.ApprovalMode = "never"
	// The lowest limit sandbot accepts (1 MiB; its default is 20 MiB), so
	// continue-as-new comes every few dozen turns.
	c.HistoryLimit = 1 << 20
	// A quarter of the default transcript (1 MiB), so the transcript each
	// cached session holds reaches its bound within the first 300 turns
	// (a soak turn adds 1–2 KB): the second half, whose slope
	// judges the workers' memory, then measures a session whose bounds are
	// all reached. With the default, the transcript was still filling at
	// turn 1,000 (state carried 886 KB), and so was every copy of it a
	// worker holds (each cached session's state, its decoded input, the
	// stored transcript's cache), which the verdict could not tell from a
	// leak.
	c.TranscriptLimit = soakTranscriptLimit
	// A small session cache (the default is 1,000), so the workers reach
	// it within the soak: each keeps the main session and a few forks in
	// memory, and the idle forks are evicted as new ones come, as a
	// worker serving more sessions than its cache evicts idle ones.
	c.SessionCache = soakSessionCache
	c.Docker = true
	c.Soak = &SoakConfig{
		ForkEvery:   min(max(turns/20, 5), 50),
		SwitchEvery: min(max(turns/20, 4), 50),
		SampleEvery: min(max(turns/40, 1), 25),
		For:         75 * time.Minute,
	}
	return c
}

// soakSessionCache is the soak's SANDBOT_SESSION_CACHE.
const soakSessionCache = 4

// soakTranscriptLimit is the soak's SANDBOT_SESSION_TRANSCRIPT_LIMIT.
const soakTranscriptLimit = 256 << 10

func (sc *SoakConfig) describe(cfg Config) string {
	faults := "no faults"
	if len(cfg.Faults) > 0 {
		faults = fmt.Sprintf("a fault every ~%s (%s)", cfg.FaultEvery, strings.Join(cfg.Faults, ", "))
	}
	return fmt.Sprintf("soak: 1 session × %d turns of %d–%d calls (approval mode %s), a /fork every %d turns, a backend switch every %d, memory sampled every %d; history limit %d KB, transcript limit %d KB, session cache %d; %d worker hosts, %d bot replicas; %s",
		cfg.Turns, cfg.Calls[0], cfg.Calls[1], cfg.ApprovalMode, sc.ForkEvery, sc.SwitchEvery, sc.SampleEvery, cfg.HistoryLimit>>10, cfg.TranscriptLimit>>10, cfg.SessionCache, cfg.Hosts, cfg.Bots, faults)
}

// stopAt is when the soak stops starting turns.
func (sc *SoakConfig) stopAt(ctx context.Context, start time.Time) time.Time {
	stop := start.Add(sc.For)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-soakReserve).Before(stop) {
		stop = dl.Add(-soakReserve)
	}
	return stop
}

// soakState is the soak user's record, under workload.mu.
type soakState struct {
	sid      string
	thread   string
	done     int    // turns run
	stopped  string // why the soak ended before its last turn ("" if it did not)
	forks    []forkRecord
	switches []switchRecord
	memory   map[string][]MemSample
}

// forkRecord is one /fork and the check turn in its thread.
type forkRecord struct {
	ID      string // f01, f02, ...
	Marker  string // the parent's marker the fork must have
	Asked   string // ts of the /fork message
	Thread  string // the fork's thread root ("" if none showed)
	Token   string // the check's last attempt (f01, f01r1, ...)
	Outcome string
}

// switchRecord is one /backend.
type switchRecord struct {
	To    string
	Turn  int // the turn that was to run there
	Asked string
	Reply string
}

// MemSample is a process's resident set size after a turn, and its
// goroutine count when SoakConfig.Profiles took one (0 otherwise).
type MemSample struct {
	Turn  int
	Bytes int64
	// Anon and File split Bytes: the process's own memory, and the pages
	// of files it maps (its binary).
	Anon, File int64
	// Live is the Go heap the process still uses: HeapAlloc right after a
	// collection it was asked for (0 if unread). Resident size follows it
	// with a lag and a factor (the collector lets the heap grow to twice
	// the live heap before it collects, and returns freed pages to the
	// system minutes later), so a leak shows in Live first and cleanly.
	Live       int64
	Goroutines int
}

// driveSoak is the soak's user: turn after turn in one thread until
// Config.Turns or stop, a /fork and a /backend every so often, memory
// sampled along the way, and a last turn that reads every marker back.
func (w *workload) driveSoak(ctx context.Context, s *stack, rng *rand.Rand, sid string, stop time.Time) {
	sc := w.cfg.Soak
	w.mu.Lock()
	w.soak.sid = sid
	w.mu.Unlock()
	var th chat.Thread
	backend, on := "local", ""
	last := "" // the newest completed call's marker: what a fork must have
	done, sampled := 0, 0
	for t := 1; t <= w.cfg.Turns; t++ {
		if ctx.Err() != nil || time.Now().After(stop) {
			w.soakStopped(fmt.Sprintf("out of time (-soak-for, or the test's -timeout) after %d of %d turns", done, w.cfg.Turns))
			break
		}
		if t > 1 && sc.ForkEvery > 0 && (t-1)%sc.ForkEvery == 0 && last != "" {
			w.soakFork(ctx, s, rng, th, last)
		}
		if t > 1 && sc.SwitchEvery > 0 && (t-1+sc.SwitchEvery/2)%sc.SwitchEvery == 0 {
			to := map[string]string{"local": "docker", "docker": "local"}[backend]
			if w.soakSwitch(ctx, s, th, to, t) {
				backend, on = to, to
			}
		}
		rec := w.runTurn(ctx, s, rng, &th, sid, t, on)
		on = ""
		done = t
		w.mu.Lock()
		w.soak.thread, w.soak.done = th.Thread, t
		if m := w.lastCompleted(rec); m != "" {
			last = m
		}
		w.mu.Unlock()
		if t == 1 || t%sc.SampleEvery == 0 {
			w.sampleMemory(s, t)
			sampled = t
		}
		if rec.Outcome == "lost" || th.Thread == "" {
			// As in the other modes: a session that lost a turn is not
			// read back (the failure is counted either way).
			w.soakStopped(fmt.Sprintf("turn %d was lost", t))
			return
		}
	}
	if done > sampled {
		w.sampleMemory(s, done)
	}
	if done > 0 {
		w.verifySession(ctx, s, rng, th, sid, done)
	}
}

func (w *workload) soakStopped(why string) {
	w.mu.Lock()
	w.soak.stopped = why
	w.mu.Unlock()
}

// lastCompleted is the marker of rec's last call whose result reached the
// model as completed, or "" (called with w.mu held).
func (w *workload) lastCompleted(rec turnRecord) string {
	if rec.Outcome != "answered" {
		return ""
	}
	tok := rec.Turn
	if rec.Retries > 0 {
		tok = fmt.Sprintf("%sr%d", rec.Turn, rec.Retries)
	}
	for c := rec.Calls; c >= 1; c-- {
		id := fmt.Sprintf("%s%sc%d", rec.Session, tok, c)
		if completedResult(w.results[id]) {
			return id
		}
	}
	return ""
}

// sampleMemory records every worker's and bot's resident size and live
// heap after turn (and, with SoakConfig.Profiles, saves their profiles:
// after the resident size, since the heap profile's collection would
// lower it).
func (w *workload) sampleMemory(s *stack, turn int) {
	var samples []MemSample
	procs := slices.Concat(s.hosts, s.bots)
	for _, p := range procs {
		m := p.memory()
		samples = append(samples, MemSample{Turn: turn, Bytes: m.RSS, Anon: m.Anon, File: m.File})
	}
	if w.cfg.Soak.Profiles {
		dir := filepath.Join(s.dir, "profiles")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			w.cfg.Log.Warn("soak: profiles", "err", err)
		}
		for i, p := range procs {
			if samples[i].Bytes == 0 {
				continue
			}
			n, err := p.saveProfiles(dir, fmt.Sprintf("turn-%04d", turn))
			if err != nil {
				w.cfg.Log.Warn("soak: profiles", "process", p.name, "turn", turn, "err", err)
			}
			samples[i].Goroutines = max(n, 0)
		}
	}
	// After the profiles, whose runtime account is read before any
	// collection is asked for.
	for i, p := range procs {
		if samples[i].Bytes == 0 {
			continue
		}
		live, err := p.liveHeap()
		if err != nil {
			w.cfg.Log.Warn("soak: live heap", "process", p.name, "turn", turn, "err", err)
		}
		samples[i].Live = live
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, p := range procs {
		if samples[i].Bytes > 0 {
			w.soak.memory[p.name] = append(w.soak.memory[p.name], samples[i])
		}
	}
}

// soakFork asks for a fork in parent (one delivery: a command is not
// deduplicated like a message, and a second delivery would be a second
// fork), finds the fork's thread and runs its check turn there.
func (w *workload) soakFork(ctx context.Context, s *stack, rng *rand.Rand, parent chat.Thread, marker string) {
	w.mu.Lock()
	rec := forkRecord{ID: fmt.Sprintf("f%02d", len(w.soak.forks)+1), Marker: marker}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.soak.forks = append(w.soak.forks, rec)
		w.mu.Unlock()
	}()
	_, asked, _, err := s.chat.post(ctx, parent, "/fork")
	if err != nil {
		rec.Outcome = "the /fork message was not delivered"
		return
	}
	rec.Asked = asked
	// The fork's thread: a new top-level bot message after the command,
	// whose thread the bot opened with "Forked from".
	wctx, cancel := context.WithTimeout(ctx, w.cfg.TurnTimeout)
	_, err = s.slack.WaitFor(wctx, func(sn fakeslack.Snapshot) bool {
		for _, root := range forkRoots(sn, rec.Asked) {
			for _, m := range botMessagesSince(sn, root, "") {
				if strings.Contains(messageText(m), "Forked from") {
					rec.Thread = root
					return true
				}
			}
		}
		return false
	})
	cancel()
	if err != nil {
		rec.Outcome = "no fork thread appeared"
		return
	}
	th := chat.Thread{Platform: slack.Platform, Workspace: s.slack.Options().TeamID, Channel: channel, Thread: rec.Thread}
	// A check that fails visibly is asked again for as long as a turn may
	// take, as runTurn's turns are: four tries at once counted a fork
	// without its parent's change when all four met one 401 window of
	// under two seconds (the soak under faults of 2026-12-07, fork f16:
	// four failures in 1.1 s).
	first := time.Now()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		rec.Token = rec.ID
		if attempt > 0 {
			rec.Token = fmt.Sprintf("%sr%d", rec.ID, attempt)
		}
		var since string
		var ok bool
		if th, since, ok = w.send(ctx, s, rng, th, fmt.Sprintf("chaos forkcheck %s reads %s", rec.Token, marker)); !ok {
			rec.Outcome = "lost"
			return
		}
		rec.Outcome, _ = w.await(ctx, s, th, since, forkCheckAnswer(rec.Token))
		if rec.Outcome != "failed" || time.Since(first) >= w.cfg.TurnTimeout {
			return
		}
	}
}

// forkRoots are the top-level bot messages posted after ts: the roots of
// fork threads (the soak's only top-level message is otherwise its
// user's first).
func forkRoots(sn fakeslack.Snapshot, after string) []string {
	var out []string
	for _, m := range sn.Messages[channel] {
		if m.BotID != "" && (m.ThreadTS == "" || m.ThreadTS == m.TS) && tsLess(after, m.TS) {
			out = append(out, m.TS)
		}
	}
	return out
}

// soakSwitch asks for a backend switch between turns (one delivery, as
// for /fork) and reports whether the bot said it is under way.
func (w *workload) soakSwitch(ctx context.Context, s *stack, th chat.Thread, to string, turn int) bool {
	rec := w.askBackend(ctx, s, th, to, turn)
	w.mu.Lock()
	w.soak.switches = append(w.soak.switches, rec)
	w.mu.Unlock()
	return switchStarted(rec.Reply)
}

// askBackend sends /backend to in th (one delivery) and waits for the
// bot's reply naming the backend.
func (w *workload) askBackend(ctx context.Context, s *stack, th chat.Thread, to string, turn int) (rec switchRecord) {
	rec = switchRecord{To: to, Turn: turn}
	_, asked, _, err := s.chat.post(ctx, th, "/backend "+to)
	if err != nil {
		rec.Reply = "(the /backend message was not delivered)"
		return rec
	}
	rec.Asked = asked
	// Its reply names the backend (a refusal too); anything else the bot
	// posts after the command is a late message of the turn before.
	wctx, cancel := context.WithTimeout(ctx, w.cfg.TurnTimeout)
	defer cancel()
	sn, err := s.slack.WaitFor(wctx, func(sn fakeslack.Snapshot) bool {
		for _, m := range botMessagesSince(sn, th.Thread, rec.Asked) {
			if text := messageText(m); strings.Contains(strings.ToLower(text), "backend") {
				rec.Reply = text
				return true
			}
		}
		return false
	})
	if err != nil {
		rec.Reply = "(no reply naming the backend)"
		if msgs := botMessagesSince(sn, th.Thread, rec.Asked); len(msgs) > 0 {
			rec.Reply += "; the bot said " + messageText(msgs[0])
		}
	}
	return rec
}

// refusedShown reports whether a bot message in thread after the /backend
// of sw says the switch could not be made (the workflow's notice, carried
// to the next turn's card).
func refusedShown(sn fakeslack.Snapshot, thread string, sw switchRecord) bool {
	if sw.Asked == "" {
		return false
	}
	for _, m := range botMessagesSince(sn, thread, sw.Asked) {
		if strings.Contains(messageText(m), "before switching to "+sw.To) {
			return true
		}
	}
	return false
}

// switchStarted reports whether a /backend reply says the switch is under
// way (now, or at the end of a running turn).
func switchStarted(reply string) bool {
	return strings.Contains(reply, "Switching backend from") || strings.Contains(reply, "Backend switches from")
}

// markerGlobs are shell globs that together match the marker files of
// session sid's turns 1..upto, each about a hundred turns' worth (a few
// KB of `cat` output, well inside a tool result's 16 KB), disjoint, and
// each matching at least one turn's markers: turns 1–99, then 100–199,
// 200–299, ... A marker is <sid>t<turn>[r<retry>]c<call>.
func markerGlobs(sid string, upto int) []string {
	if upto < 1 {
		return nil
	}
	// Digits, not "?": a retry's r must not stand in for one.
	const d = "[0-9]"
	first := ".m/" + sid + "t" + d + "[cr]*"
	if upto >= 10 {
		first += " .m/" + sid + "t" + d + d + "[cr]*"
	}
	out := []string{first}
	for h := 1; h <= upto/100; h++ {
		out = append(out, ".m/"+sid+"t"+strconv.Itoa(h)+d+d+"[cr]*")
	}
	return out
}

// forkMarkerRead lists the fork checks' markers in a workspace: in the
// parent's there must be none (find exits 0 either way).
const forkMarkerRead = "find .m -name 'f*'"

// forkMarkerRe is a fork check's marker as forkMarkerRead prints it.
var forkMarkerRe = regexp.MustCompile(`\.m/(f\d+(?:r\d+)?c\d+)`)

// ranOn reports whether a pwd's tool result shows the docker backend's
// workdir (docker) or a directory under the stack's local roots (local).
func ranOn(result, backend, localRoot string) bool {
	if !completedResult(result) {
		return false
	}
	for line := range strings.SplitSeq(result, "\n") {
		line = strings.TrimSpace(line)
		switch backend {
		case "docker":
			if line == "/workspace" {
				return true
			}
		case "local":
			if localRoot != "" && strings.HasPrefix(line, localRoot+"/") {
				return true
			}
		}
	}
	return false
}

// SoakReport is what the soak found besides the other modes' counts.
type SoakReport struct {
	// Turns is how many turns were asked for, Done how many ran; Stopped
	// says why the soak ended early ("" if it did not).
	Turns, Done int
	Stopped     string
	// Forks were asked for; ForksChecked saw the parent's last completed
	// change in their workspace. ForksMissing did not (must be 0);
	// ForkLeaks are fork markers found in the parent's workspace at the
	// end (must be 0).
	Forks, ForksChecked, ForksMissing, ForkLeaks int
	// Switches were asked for; SwitchesConfirmed were followed by a turn
	// whose pwd showed the new backend. SwitchesRefused could not be made
	// at the turn boundary and a card in the thread says so ("Could not
	// save the workspace before switching to …"). SwitchesMissed were
	// refused, or their next turn ran elsewhere with nothing saying why
	// (must be 0).
	Switches, SwitchesConfirmed, SwitchesRefused, SwitchesMissed int
	// CommandsTwice: a /fork or /backend carried out more than once: more
	// fork threads, or more replies saying so, than were asked for
	// (must be 0).
	CommandsTwice int
	// HistoryRuns is each run of the session, oldest first (each
	// continue-as-new starts a run); HistoryLimit the workers' limit. A
	// run whose own events pass the limit by more than the turn that
	// crossed it is unbounded (must not happen): see runHistory.
	HistoryRuns  []runHistory
	HistoryLimit int64
	HistoryErr   string
	// Memory is each worker and bot process's resident size, sampled
	// every SampleEvery turns.
	Memory      map[string][]MemSample
	SampleEvery int

	problems []string
}

// memGrowthLimit is the growth, in MB per 100 turns over the second half
// of the soak, above which a process's memory counts as growing, when the
// rise it adds up to over that half also passes memRiseLimit (a Go
// process's resident size moves by a few MB with every collection, so a
// short soak's slope alone is noise).
const (
	memGrowthLimit = 2.0
	memRiseLimit   = 8.0
)

// MemoryTrend summarises one measure of a process's samples: first, last
// and largest (bytes), and the least-squares slope of the second half of
// the samples in MB per 100 turns. Verdict is "stable", "growing", or "too
// few samples" (fewer than 4 in the second half).
type MemoryTrend struct {
	First, Last, Max int64
	Slope            float64
	Verdict          string
}

// memoryTrend is the trend of the samples' resident size.
func memoryTrend(samples []MemSample) MemoryTrend {
	return trendOf(samples, func(s MemSample) int64 { return s.Bytes })
}

// liveTrend is the trend of the samples' live heap, with ok false when a
// sample lacks it (the process's debug listener could not be read).
func liveTrend(samples []MemSample) (t MemoryTrend, ok bool) {
	for _, s := range samples {
		if s.Live <= 0 {
			return t, false
		}
	}
	return trendOf(samples, func(s MemSample) int64 { return s.Live }), len(samples) > 0
}

// memoryVerdict judges a process by its live heap where every sample has
// it: what it keeps is what would grow without bound in a leak, while its
// resident size also holds garbage not yet collected and freed pages not
// yet returned (the 1,000-turn soak of the sixth session: live heaps
// holding at 54–64 MB from turn 500 while resident sizes rose 9–12 MB per
// 100 turns). The resident trend is reported beside it either way.
func memoryVerdict(samples []MemSample) string {
	if t, ok := liveTrend(samples); ok {
		return t.Verdict
	}
	return memoryTrend(samples).Verdict
}

func trendOf(samples []MemSample, value func(MemSample) int64) MemoryTrend {
	var t MemoryTrend
	if len(samples) == 0 {
		t.Verdict = "no samples"
		return t
	}
	t.First, t.Last = value(samples[0]), value(samples[len(samples)-1])
	for _, s := range samples {
		t.Max = max(t.Max, value(s))
	}
	half := samples[len(samples)/2:]
	if len(half) < 4 {
		t.Verdict = "too few samples"
		return t
	}
	var sx, sy, sxx, sxy float64
	for _, s := range half {
		x, y := float64(s.Turn), float64(value(s))/(1<<20)
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(half))
	den := n*sxx - sx*sx
	if den == 0 {
		t.Verdict = "too few samples"
		return t
	}
	t.Slope = (n*sxy - sx*sy) / den * 100
	span := float64(half[len(half)-1].Turn - half[0].Turn)
	t.Verdict = "stable"
	if t.Slope > memGrowthLimit && t.Slope*span/100 > memRiseLimit {
		t.Verdict = "growing"
	}
	return t
}

// runHistory is one run of a session's workflow: its history's size as
// the server counts it, and the events in it that carry the session's
// state whole (transcript included): its first (the state it started
// from), its last when it continued as new (the state it handed on), and
// the start of each fork's workflow (the fork's copy of the transcript).
type runHistory struct {
	Size, In, Out, Forks int64
}

// own is what the run added besides the state it carried.
func (r runHistory) own() int64 { return r.Size - r.In - r.Out - r.Forks }

// historyOver counts the runs whose own events passed the limit by more
// than a quarter of it. The workflow checks the limit between turns, with
// the state it would carry out counted, so a run's own events end within
// the limit plus the turn that crossed it (the soak's turns add tens of
// KB); what it carries in, out and into forks is the transcript, capped by
// its own setting, and is left out (docs/ARCHITECTURE.md, "Long life": a
// run of a state that fills most of the limit is about twice the state).
func historyOver(runs []runHistory, limit int64) int {
	n := 0
	for _, r := range runs {
		if limit > 0 && r.own() > limit+limit/4 {
			n++
		}
	}
	return n
}

// checkSoak counts the soak's findings from the fakes' records: the
// thread's messages and the tool results the model was sent (called by
// check, with w.mu held).
func (w *workload) checkSoak(s *stack, sn fakeslack.Snapshot) *SoakReport {
	st := w.soak
	r := &SoakReport{Turns: w.cfg.Turns, Done: st.done, Stopped: st.stopped, SampleEvery: w.cfg.Soak.SampleEvery,
		HistoryLimit: int64(w.cfg.HistoryLimit), Memory: st.memory}
	bad := func(format string, args ...any) { r.problems = append(r.problems, fmt.Sprintf(format, args...)) }

	// Forks: each check's cat of the parent's marker.
	r.Forks = len(st.forks)
	for _, f := range st.forks {
		res := w.results[f.Token+"c1"]
		if f.Outcome == "answered" && completedResult(res) && hasLine(res, f.Marker) {
			r.ForksChecked++
			continue
		}
		r.ForksMissing++
		bad("fork %s (thread %s): its check %s was %q; the parent's marker %s read %.200q", f.ID, f.Thread, f.Token, f.Outcome, f.Marker, res)
	}
	if out, ok := w.verified[st.sid]; ok {
		for _, m := range forkMarkerRe.FindAllStringSubmatch(out, -1) {
			r.ForkLeaks++
			bad("fork marker %s is in the parent's workspace", m[1])
		}
	}

	// Switches: the reply, then the pwd of the turn after it.
	r.Switches = len(st.switches)
	for _, sw := range st.switches {
		if !switchStarted(sw.Reply) {
			r.SwitchesMissed++
			bad("/backend %s before turn %d: the reply was %.200q", sw.To, sw.Turn, sw.Reply)
			continue
		}
		var res string
		for _, t := range w.turns {
			if t.Session == st.sid && t.Turn == fmt.Sprintf("t%d", sw.Turn) && t.On == sw.To {
				tok := t.Turn
				if t.Retries > 0 {
					tok = fmt.Sprintf("%sr%d", t.Turn, t.Retries)
				}
				res = w.results[st.sid+tok+"w"]
			}
		}
		if ranOn(res, sw.To, s.dir) {
			r.SwitchesConfirmed++
			continue
		}
		if refusedShown(sn, st.thread, sw) {
			// The switch could not be made (the workspace could not be
			// saved: the snapshot store full) and the thread says so: the
			// session stays where its workspace is, as it must.
			r.SwitchesRefused++
			continue
		}
		r.SwitchesMissed++
		bad("/backend %s before turn %d: that turn's pwd read %.200q", sw.To, sw.Turn, res)
	}

	// Commands carried out twice: fork threads and replies beyond those
	// asked for.
	asked := map[string]int{}
	for _, f := range st.forks {
		if f.Asked != "" {
			asked["fork"]++
		}
	}
	for _, sw := range st.switches {
		if sw.Asked != "" {
			asked[sw.To]++
		}
	}
	replies := map[string]int{}
	for _, m := range botMessagesSince(sn, st.thread, "") {
		text := messageText(m)
		switch {
		case strings.Contains(text, "Forked at turn"):
			replies["fork"]++
		case strings.Contains(text, "already is"):
			replies["again"]++
		case switchStarted(text) && strings.Contains(text, "to **docker**"), switchStarted(text) && strings.Contains(text, "to *docker*"):
			replies["docker"]++
		case switchStarted(text):
			replies["local"]++
		}
	}
	roots := 0
	if st.thread != "" {
		roots = len(forkRoots(sn, st.thread))
	}
	extra := max(roots-asked["fork"], replies["fork"]-asked["fork"], 0) +
		max(replies["docker"]-asked["docker"], 0) + max(replies["local"]-asked["local"], 0) + replies["again"]
	if extra > 0 {
		r.CommandsTwice = extra
		bad("commands carried out more often than asked: %d fork threads and %d fork replies for %d /fork, %d and %d switch replies for %d /backend docker and %d /backend local, %d \"already is\" replies",
			roots, replies["fork"], asked["fork"], replies["docker"], replies["local"], asked["docker"], asked["local"], replies["again"])
	}
	return r
}

// hasLine reports whether text has a line that is exactly want.
func hasLine(text, want string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
}

// soakHistory reads the size of every run of the session's history from
// the server: each continue-as-new closes a run and starts the next.
func (w *workload) soakHistory(ctx context.Context, s *stack, r *SoakReport) {
	if r == nil {
		return
	}
	w.mu.Lock()
	thread := w.soak.thread
	w.mu.Unlock()
	if thread == "" {
		r.HistoryErr = "the session never started"
		return
	}
	id := chat.Thread{Platform: slack.Platform, Workspace: s.slack.Options().TeamID, Channel: channel, Thread: thread}.ID()
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	runs, err := s.runHistories(hctx, id)
	if err != nil {
		r.HistoryErr = err.Error()
		return
	}
	r.HistoryRuns = runs
}

// runHistories reads every run of workflow id, oldest first: its size and
// the events that carry the state (runHistory).
func (s *stack) runHistories(ctx context.Context, id string) ([]runHistory, error) {
	type run struct {
		start time.Time
		h     runHistory
	}
	var runs []run
	var token []byte
	for {
		resp, err := s.cl.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.ns, PageSize: 1000, NextPageToken: token, Query: fmt.Sprintf("WorkflowId = '%s'", id)})
		if err != nil {
			return nil, fmt.Errorf("list the runs of %s: %w", id, err)
		}
		for _, e := range resp.Executions {
			runID := e.GetExecution().GetRunId()
			d, err := s.cl.DescribeWorkflowExecution(ctx, id, runID)
			if err != nil {
				return nil, fmt.Errorf("describe run %s of %s: %w", runID, id, err)
			}
			h := runHistory{Size: d.GetWorkflowExecutionInfo().GetHistorySizeBytes()}
			it := s.cl.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for first := true; it.HasNext(); first = false {
				ev, err := it.Next()
				if err != nil {
					return nil, fmt.Errorf("read run %s of %s: %w", runID, id, err)
				}
				switch n := int64(proto.Size(ev)); {
				case first:
					h.In = n
				case ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
					h.Out = n
				case ev.GetEventType() == enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
					h.Forks += n
				}
			}
			runs = append(runs, run{e.GetStartTime().AsTime(), h})
		}
		if token = resp.NextPageToken; len(token) == 0 {
			break
		}
	}
	slices.SortFunc(runs, func(a, b run) int { return a.start.Compare(b.start) })
	out := make([]runHistory, len(runs))
	for i, r := range runs {
		out[i] = r.h
	}
	return out, nil
}

func (r *SoakReport) failures() []string {
	var out []string
	check := func(name string, n int) {
		if n != 0 {
			out = append(out, fmt.Sprintf("%s: %d", name, n))
		}
	}
	check("forks without the parent's last change", r.ForksMissing)
	check("fork changes in the parent's workspace", r.ForkLeaks)
	check("backend switches not in effect", r.SwitchesMissed)
	check("commands carried out twice", r.CommandsTwice)
	check("session runs whose own events passed the limit by more than a turn", historyOver(r.HistoryRuns, r.HistoryLimit))
	if r.HistoryErr != "" {
		out = append(out, "history sizes unread: "+r.HistoryErr)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Memory)) {
		if memoryVerdict(r.Memory[name]) == "growing" {
			out = append(out, name+": memory growing")
		}
	}
	return out
}

// markdown renders the soak's own rows and its memory table.
func (r *SoakReport) markdown(b *strings.Builder) {
	row := func(k string, v any) { fmt.Fprintf(b, "| %s | %v |\n", k, v) }
	done := fmt.Sprintf("%d of %d", r.Done, r.Turns)
	if r.Stopped != "" {
		done += " (" + r.Stopped + ")"
	}
	row("soak: turns run", done)
	row("forks (asked / saw the parent's last change)", fmt.Sprintf("%d / %d", r.Forks, r.ForksChecked))
	row("forks without the parent's change / fork changes in the parent (must be 0)", fmt.Sprintf("%d / %d", r.ForksMissing, r.ForkLeaks))
	row("backend switches (asked / the next turn ran there)", fmt.Sprintf("%d / %d", r.Switches, r.SwitchesConfirmed))
	row("switches refused at the turn boundary, shown in the thread", r.SwitchesRefused)
	row("switches not in effect (must be 0)", r.SwitchesMissed)
	row("/fork or /backend carried out twice (must be 0)", r.CommandsTwice)
	if r.HistoryErr != "" {
		row("session runs", "unread: "+r.HistoryErr)
	} else {
		var biggest, sum, ownMost, carryMost int64
		for _, h := range r.HistoryRuns {
			biggest, sum = max(biggest, h.Size), sum+h.Size
			ownMost, carryMost = max(ownMost, h.own()), max(carryMost, h.In, h.Out)
		}
		row("session runs (continue-as-new) / largest run's history / limit", fmt.Sprintf("%d / %d KB / %d KB (all runs together: %d KB)",
			len(r.HistoryRuns), biggest>>10, r.HistoryLimit>>10, sum>>10))
		row("largest run's own events / largest state carried in or out", fmt.Sprintf("%d KB / %d KB", ownMost>>10, carryMost>>10))
		row("runs whose own events passed the limit by more than a quarter (must be 0)", historyOver(r.HistoryRuns, r.HistoryLimit))
	}
	fmt.Fprintf(b, "\nMemory, sampled every %d turns (growth: the least-squares slope of the second half of the samples; the verdict is the live heap's where it was read, else the resident size's):\n\n", r.SampleEvery)
	fmt.Fprintf(b, "| process | samples | resident: first | last (anon + file) | max | growth, MB per 100 turns | live heap: first | last | max | growth | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range slices.Sorted(maps.Keys(r.Memory)) {
		s := r.Memory[name]
		t := memoryTrend(s)
		var last MemSample
		if len(s) > 0 {
			last = s[len(s)-1]
		}
		live := "| unread | | | "
		if l, ok := liveTrend(s); ok {
			live = fmt.Sprintf("| %.1f MB | %.1f MB | %.1f MB | %+.2f ", mb(l.First), mb(l.Last), mb(l.Max), l.Slope)
		}
		fmt.Fprintf(b, "| %s | %d | %.1f MB | %.1f MB (%.1f + %.1f) | %.1f MB | %+.2f %s| %s |\n", name, len(s), mb(t.First), mb(t.Last), mb(last.Anon), mb(last.File), mb(t.Max), t.Slope, live, memoryVerdict(s))
	}
	var gs []string
	for _, name := range slices.Sorted(maps.Keys(r.Memory)) {
		s := r.Memory[name]
		if len(s) > 0 && s[len(s)-1].Goroutines > 0 {
			gs = append(gs, fmt.Sprintf("%s %d → %d", name, s[0].Goroutines, s[len(s)-1].Goroutines))
		}
	}
	if len(gs) > 0 {
		fmt.Fprintf(b, "\nGoroutines, first → last sample (profiles in the run's profiles/): %s.\n", strings.Join(gs, ", "))
	}
}

func mb(n int64) float64 { return math.Round(float64(n)/(1<<20)*10) / 10 }
