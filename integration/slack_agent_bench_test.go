package integration

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat/slack"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// BenchmarkSlackAgentSurfacesCost runs BenchmarkSlackProgressLatency's
// workload (20 turns of 10 quick tool calls, production edit pace) with
// Slack's agent surfaces on (the thread status and the agent session, as
// an agent app gets them) and off (an app Slack refuses both to), back to
// back on the same machine, so what the surfaces cost the card's progress
// latency shows under the same load. It also reports their calls a turn.
//
//	go test ./integration -run '^$' -bench SlackAgentSurfacesCost -benchtime=1x
func BenchmarkSlackAgentSurfacesCost(b *testing.B) {
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("surfaces=%v", on), func(b *testing.B) {
			e := newSlackEnv(b, slackOptions{
				stack:    []stackOption{slackNoApprovals},
				fake:     fakeslack.Options{MinUpdateInterval: slack.DefaultEditInterval, UpdateBurst: slack.DefaultEditBurst},
				notAgent: !on,
			})
			if !on {
				e.f.InjectFault("assistant.threads.setStatus", 1<<20, fakeslack.Fault{Error: "not_allowed"})
			}
			e.s.model.SetResponder(toolLoop(slackBenchCalls))
			th, _ := e.mention(slackAlice, "warm up")
			e.waitTurnEvery(th, 250*time.Millisecond, "warm-up turn", slackFinished(1))
			for n := 0; n < b.N; n++ {
				before := e.f.Snapshot()
				var lat []time.Duration
				for i := 0; i < slackBenchTurns; i++ {
					turn := e.state(th).Turn + 1
					e.reply(th, slackAlice, "go")
					ts := e.waitTurnEvery(th, 250*time.Millisecond, fmt.Sprintf("turn %d", turn), slackFinished(turn))
					tl := slackTimeline(b, e.f.Snapshot(), ts.StatusRef, slack.DefaultEditInterval, slack.DefaultEditBurst)
					for j, c := range ts.ToolCalls {
						k := sort.Search(len(tl), func(k int) bool { return tl[k].completed > j })
						if k == len(tl) {
							b.Fatalf("turn %d: call %d never shown completed", turn, j+1)
						}
						lat = append(lat, tl[k].at.Sub(c.EndedAt))
					}
				}
				after := e.f.Snapshot()
				calls := func(m string) float64 {
					return float64(len(after.AllCallsTo(m))-len(before.AllCallsTo(m))) / slackBenchTurns
				}
				b.ReportMetric(slackMillis(slackQuantile(lat, 0.50)), "p50-ms")
				b.ReportMetric(slackMillis(slackQuantile(lat, 0.95)), "p95-ms")
				b.ReportMetric(calls("assistant.threads.setStatus"), "status-calls/turn")
				b.ReportMetric(calls("agents.sessions.setStatus"), "session-calls/turn")
				b.ReportMetric(float64(len(after.Violations)), "violations")
			}
		})
	}
}
