package integration

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat/slack"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

// BenchmarkSlackProgressLatency measures how long a tool call's completion
// takes to show in Slack: from the call's EndedAt in the workflow
// (ToolCallState.EndedAt, the workflow time of the task that saw its exec
// activity complete) to the first version of the status message, as the
// Slack fake received it (its recorded chat.postMessage / chat.update call
// times), that shows the call completed. Both clocks are this machine's:
// the embedded Temporal server, the worker and the fake run in this
// process.
//
// Each run is 20 turns of 10 quick tool calls (`true`, approval mode
// never, instant model), 200 calls, after a warm-up turn, through the real
// adapter (Socket Mode and Web API over slack-go) and core. It runs at the
// production edit interval (1.5 s, SANDBOT_SLACK_EDIT_INTERVAL) and at
// 250 ms, each with the adapter's per-message burst (slack.DefaultEditBurst),
// with the fake checking every chat.update against the same per-message
// pace and Slack's workspace budget (50 a minute), so the figures show what
// the pacing costs and whether any budget was broken.
//
//	go test ./integration -run '^$' -bench SlackProgressLatency -benchtime=1x
func BenchmarkSlackProgressLatency(b *testing.B) {
	for _, iv := range []time.Duration{slack.DefaultEditInterval, 250 * time.Millisecond} {
		b.Run("edit="+iv.String(), func(b *testing.B) { slackProgressLatency(b, iv) })
	}
}

const (
	slackBenchTurns = 20
	slackBenchCalls = 10
)

func slackProgressLatency(b *testing.B, editInterval time.Duration) {
	e := newSlackEnv(b, slackOptions{
		stack: []stackOption{slackNoApprovals},
		fake:  fakeslack.Options{MinUpdateInterval: editInterval, UpdateBurst: slack.DefaultEditBurst},
	})
	if got := e.bot.Slack.Budget(); got.MinEditInterval != editInterval || got.EditBurst != slack.DefaultEditBurst {
		b.Fatalf("adapter paces edits every %v in bursts of %d, want %v and %d", got.MinEditInterval, got.EditBurst, editInterval, slack.DefaultEditBurst)
	}
	e.s.model.SetResponder(toolLoop(slackBenchCalls))
	th, _ := e.mention(slackAlice, "warm up")
	e.waitTurnEvery(th, 250*time.Millisecond, "warm-up turn", slackFinished(1))

	for n := 0; n < b.N; n++ {
		var lat, pacing []time.Duration
		edits := 0
		start := time.Now()
		for i := 0; i < slackBenchTurns; i++ {
			turn := e.state(th).Turn + 1
			e.reply(th, slackAlice, "go")
			ts := e.waitTurnEvery(th, 250*time.Millisecond, fmt.Sprintf("turn %d", turn), slackFinished(turn))
			if len(ts.ToolCalls) != slackBenchCalls || ts.StatusRef == "" {
				b.Fatalf("turn %d ran %d tool calls (status message %q), want %d", turn, len(ts.ToolCalls), ts.StatusRef, slackBenchCalls)
			}
			snap := e.f.Snapshot()
			tl := slackTimeline(b, snap, ts.StatusRef, editInterval, slack.DefaultEditBurst)
			edits += len(tl) - 1
			for j, c := range ts.ToolCalls {
				if c.Status != session.CallCompleted || c.EndedAt.IsZero() {
					b.Fatalf("turn %d call %d: %s", turn, j, dump(c))
				}
				k := sort.Search(len(tl), func(k int) bool { return tl[k].completed > j })
				if k == len(tl) {
					b.Fatalf("turn %d: call %d never shown completed on status message %s", turn, j+1, ts.StatusRef)
				}
				lat = append(lat, tl[k].at.Sub(c.EndedAt))
				// The per-message pace forbade the version before tl[k].paced:
				// that part of the wait is pacing.
				pacing = append(pacing, max(tl[k].paced.Sub(c.EndedAt), 0))
			}
		}
		elapsed := time.Since(start)
		snap := e.f.Snapshot()
		p50, p95, worst := slackQuantile(lat, 0.50), slackQuantile(lat, 0.95), slackQuantile(lat, 1)
		b.ReportMetric(slackMillis(p50), "p50-ms")
		b.ReportMetric(slackMillis(p95), "p95-ms")
		b.ReportMetric(slackMillis(worst), "max-ms")
		b.ReportMetric(slackMillis(slackQuantile(pacing, 0.50)), "pacing-p50-ms")
		b.ReportMetric(float64(edits)/slackBenchTurns, "edits/turn")
		b.ReportMetric(float64(len(lat)), "tool-calls")
		b.ReportMetric(float64(len(snap.Violations)), "violations")
		verdict := "meets"
		if p50 >= 400*time.Millisecond {
			verdict = "MISSES"
		}
		b.Logf("edit interval %v: %d tool calls over %d turns in %v: progress latency p50 %v, p95 %v, max %v; pacing share p50 %v, p95 %v; %.1f edits/turn, %d chat.update calls in all; %d budget violations; %s the 400 ms p50 target",
			editInterval, len(lat), slackBenchTurns, elapsed.Round(time.Millisecond), p50.Round(time.Millisecond), p95.Round(time.Millisecond), worst.Round(time.Millisecond),
			slackQuantile(pacing, 0.5).Round(time.Millisecond), slackQuantile(pacing, 0.95).Round(time.Millisecond),
			float64(edits)/slackBenchTurns, len(snap.CallsTo("chat.update")), len(snap.Violations), verdict)
		for _, v := range snap.Violations {
			b.Logf("violation (%s) on %s: %s", v.Kind, v.TS, v.Detail)
		}
	}
}

// slackFinished: turn n has ended and the bot is done with it (last edit
// made, answer posted and recorded).
func slackFinished(n int) func(session.TurnState) bool {
	return func(ts session.TurnState) bool { return ts.Turn == n && done(ts) && ts.FinalRef != "" }
}

// slackVersion is one version of a status message as Slack received it.
type slackVersion struct {
	at        time.Time
	completed int // tool calls it shows as completed
	// paced is the earliest time the per-message pace (bursts of burst,
	// one more per interval, counting the post) allowed this version.
	paced time.Time
}

var slackEarlierCalls = regexp.MustCompile(`\+(\d+) earlier tool call`)

// slackCompletedShown counts the tool calls a status message shows as
// completed: the listed ones with ✅ plus those folded into "+N earlier"
// (calls run one after another, so earlier ones are done).
func slackCompletedShown(text string) int {
	n := strings.Count(text, "✅ `true`")
	if m := slackEarlierCalls.FindStringSubmatch(text); m != nil {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n
}

// slackTimeline is every version of status message ref (its post, then its
// accepted edits) in order, with how many completed calls each showed and
// when the per-message pace allowed it.
func slackTimeline(b *testing.B, s fakeslack.Snapshot, ref string, interval time.Duration, burst int) []slackVersion {
	b.Helper()
	vs := versions(s, ref)
	if len(vs) == 0 {
		b.Fatalf("no chat.postMessage made status message %s", ref)
	}
	tl := make([]slackVersion, len(vs))
	var full time.Time // when the message's bucket is full again
	for i, v := range vs {
		tl[i] = slackVersion{at: v.at, completed: slackCompletedShown(v.text)}
		if i > 0 {
			tl[i].paced = full.Add(-time.Duration(burst-1) * interval)
		}
		if full.Before(v.at) {
			full = v.at
		}
		full = full.Add(interval)
		// Counts only grow; a version that shows fewer would make the
		// search for the first version showing a call wrong.
		if i > 0 && tl[i].completed < tl[i-1].completed {
			b.Fatalf("status message %s went from %d to %d completed calls", ref, tl[i-1].completed, tl[i].completed)
		}
	}
	return tl
}

func slackQuantile(d []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func slackMillis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
