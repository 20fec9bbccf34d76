package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/discord"
	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// BenchmarkDiscordProgressLatency measures how long a tool call's
// completion takes to show in Discord: from the call's EndedAt in the
// workflow (ToolCallState.EndedAt, workflow time of the task that saw the
// exec activity complete) to the first status message edit (or post), as
// received by the Discord fake, whose card counts that call as completed.
// Both clocks are this machine's clock: the embedded Temporal server, the
// worker and the fake run in this process.
//
// Each run is 20 turns of 10 quick tool calls (`true`, approval mode
// never, instant model), 200 calls, after a warm-up turn, through the
// real adapter and core. It runs at the production edit pace (1 s, the
// default SANDBOT_DISCORD_EDIT_INTERVAL) and at the fastest the adapter
// accepts (250 ms), so the figures show what the pacing costs.
//
//	go test ./integration -run '^$' -bench DiscordProgressLatency -benchtime=1x
func BenchmarkDiscordProgressLatency(b *testing.B) {
	for _, iv := range []time.Duration{discord.DefaultEditInterval, 250 * time.Millisecond} {
		b.Run("edit="+iv.String(), func(b *testing.B) { discordProgressLatency(b, iv) })
	}
}

const (
	discordBenchTurns = 20
	discordBenchCalls = 10
)

func discordProgressLatency(b *testing.B, editInterval time.Duration) {
	e := newDiscordEnv(b, discordOptions{
		stack:   []stackOption{func(c *config.Config) { c.Session.ApprovalMode = "never" }},
		adapter: func(c *discord.Config) { c.EditInterval = editInterval },
	})
	e.s.model.SetResponder(discordToolLoop(discordBenchCalls))
	th := e.mention(discordAlice, "warm up")
	e.waitTurnEvery(th, 250*time.Millisecond, 1)

	for n := 0; n < b.N; n++ {
		var lat, pacing []time.Duration
		edits := 0
		for i := 0; i < discordBenchTurns; i++ {
			turn := e.s.state(th).Turn + 1
			sent := e.say(th, discordAlice, "go")
			ts := e.waitTurnEvery(th, 250*time.Millisecond, turn)
			if len(ts.ToolCalls) != discordBenchCalls {
				b.Fatalf("turn %d ran %d tool calls, want %d", turn, len(ts.ToolCalls), discordBenchCalls)
			}
			tl, ne := e.statusTimeline(th, ts.StatusRef, sent.Created)
			edits += ne
			for j, c := range ts.ToolCalls {
				if c.Status != session.CallCompleted || c.EndedAt.IsZero() {
					b.Fatalf("turn %d call %d: %s", turn, j, dump(c))
				}
				k := sort.Search(len(tl), func(k int) bool { return tl[k].completed > j })
				if k == len(tl) {
					b.Fatalf("turn %d: call %d never shown completed on status message %s", turn, j+1, ts.StatusRef)
				}
				lat = append(lat, tl[k].at.Sub(c.EndedAt))
				// The pace forbids an edit until editInterval after the
				// previous one: that part of the wait is pacing.
				var p time.Duration
				if k > 0 {
					p = max(tl[k-1].at.Add(editInterval).Sub(c.EndedAt), 0)
				}
				pacing = append(pacing, p)
			}
		}
		p50, p95, worst := discordQuantile(lat, 0.50), discordQuantile(lat, 0.95), discordQuantile(lat, 1)
		b.ReportMetric(discordMillis(p50), "p50-ms")
		b.ReportMetric(discordMillis(p95), "p95-ms")
		b.ReportMetric(discordMillis(worst), "max-ms")
		b.ReportMetric(discordMillis(discordQuantile(pacing, 0.50)), "pacing-p50-ms")
		b.ReportMetric(float64(edits)/discordBenchTurns, "edits/turn")
		b.ReportMetric(float64(len(lat)), "tool-calls")
		verdict := "meets"
		if p50 >= 400*time.Millisecond {
			verdict = "MISSES"
		}
		b.Logf("edit interval %v: %d tool calls over %d turns: progress latency p50 %v, p95 %v, max %v; pacing share p50 %v, p95 %v; %.1f edits/turn; %s the 400 ms p50 target",
			editInterval, len(lat), discordBenchTurns, p50.Round(time.Millisecond), p95.Round(time.Millisecond), worst.Round(time.Millisecond),
			discordQuantile(pacing, 0.5).Round(time.Millisecond), discordQuantile(pacing, 0.95).Round(time.Millisecond), float64(edits)/discordBenchTurns, verdict)
	}
}

// discordToolLoop answers with one `true` shell call per model request
// until the current turn has n tool results, then with a final answer.
func discordToolLoop(n int) fakeopenai.Responder {
	return func(req fakeopenai.RecordedRequest) fakeopenai.Step {
		results := 0
		for i := len(req.Body.Messages) - 1; i >= 0 && req.Body.Messages[i].Role != "user"; i-- {
			if req.Body.Messages[i].Role == "tool" {
				results++
			}
		}
		if results >= n {
			return fakeopenai.FinalStep("done")
		}
		return fakeopenai.ToolCallStep(fmt.Sprintf("call_%d_%d", req.Seq, results), "shell", shell("true"))
	}
}

// waitTurnEvery waits, polling gently, until turn n has ended and the bot
// has finished with it (last edit made, answer posted and recorded).
func (e *discordEnv) waitTurnEvery(th chat.Thread, every time.Duration, n int) session.TurnState {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		v, err := e.s.c.QueryWorkflow(e.s.ctx, th.ID(), "", session.QueryTurnState)
		if err == nil {
			var ts session.TurnState
			if v.Get(&ts) == nil && ts.Turn == n && done(ts) && ts.FinalRef != "" {
				return ts
			}
		}
		time.Sleep(every)
	}
	e.t.Fatalf("turn %d did not finish", n)
	return session.TurnState{}
}

// discordShown is one version of a status message as Discord received it.
type discordShown struct {
	at        time.Time
	completed int // tool calls the card shows as completed
}

var discordEarlierCalls = regexp.MustCompile(`\+(\d+) earlier tool call`)

// discordCompletedShown counts the tool calls a card's embed text shows as
// completed: the listed ones with ✅ plus those folded into "+N earlier"
// (calls run one after another, so earlier ones are done).
func discordCompletedShown(text string) int {
	n := strings.Count(text, "✅ `true`")
	if m := discordEarlierCalls.FindStringSubmatch(text); m != nil {
		k, _ := strconv.Atoi(m[1])
		n += k
	}
	return n
}

// statusTimeline is every version of status message ref: its post (the
// bot's first message with an embed in the thread since the user's
// message) and its edits, in order, with how many completed calls each
// showed. It also returns the number of edits.
func (e *discordEnv) statusTimeline(th chat.Thread, ref string, since time.Time) ([]discordShown, int) {
	e.t.Helper()
	var tl []discordShown
	post := "/api/v9/channels/" + th.Thread + "/messages"
	for _, r := range e.f.Requests() {
		if r.Method != "POST" || r.Path != post || r.Status != 200 || r.At.Before(since) {
			continue
		}
		var body struct {
			Embeds []struct {
				Description string `json:"description"`
			} `json:"embeds"`
		}
		if json.Unmarshal(r.Body, &body) != nil || len(body.Embeds) == 0 {
			continue
		}
		tl = append(tl, discordShown{at: r.At, completed: discordCompletedShown(body.Embeds[0].Description)})
		break
	}
	if len(tl) == 0 {
		e.t.Fatalf("no status message post found for %s", ref)
	}
	if m, ok := e.f.Message(ref); !ok || m.Created.Before(tl[0].at) {
		e.t.Fatalf("the status post found does not precede message %s", ref)
	}
	edits := 0
	for _, ed := range e.f.Edits() {
		if ed.MessageID == ref {
			edits++
			tl = append(tl, discordShown{at: ed.At, completed: discordCompletedShown(ed.EmbedText())})
		}
	}
	// Counts only grow; a card that shows fewer than before would make
	// the search below wrong, so check it.
	for i := 1; i < len(tl); i++ {
		if tl[i].completed < tl[i-1].completed {
			e.t.Fatalf("status message %s went from %d to %d completed calls", ref, tl[i-1].completed, tl[i].completed)
		}
	}
	return tl, edits
}

func discordQuantile(d []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func discordMillis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
