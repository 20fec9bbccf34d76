package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/session"
)

// BenchmarkTurnTimeline breaks one 10-call turn down by where the time
// goes, from the workflow's own history: activity dispatch (scheduled →
// started), activity run (started → completed) per activity type, and
// workflow-task time between an activity's completion and the next
// scheduling. Use -benchtime=1x.
//
//	go test ./integration -run '^$' -bench TurnTimeline -benchtime=1x
func BenchmarkTurnTimeline(b *testing.B) {
	s := newStack(b, func(c *config.Config) { c.Session.ApprovalMode = "never" })
	s.model.SetResponder(toolLoop(10))
	th := s.thread(fmt.Sprintf("timeline-%d", time.Now().UnixNano()))
	for n := 0; n < b.N; n++ {
		for i := 1; i <= 6; i++ {
			turn := i
			s.say(th, fmt.Sprintf("tl-%d-%d", n, i), "go")
			s.waitStateEvery(th, 500*time.Millisecond, "turn", func(ts session.TurnState) bool { return ts.Turn == turn && done(ts) })
		}
		type span struct {
			name              string
			sched, start, end time.Time
		}
		spans := map[int64]*span{}
		var order []int64
		var gaps []time.Duration
		var lastEnd time.Time
		iter := s.c.GetWorkflowHistory(s.ctx, th.ID(), "", false, 0)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				b.Fatal(err)
			}
			t := ev.GetEventTime().AsTime()
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				a := ev.GetActivityTaskScheduledEventAttributes()
				spans[ev.GetEventId()] = &span{name: a.GetActivityType().GetName(), sched: t}
				order = append(order, ev.GetEventId())
				if !lastEnd.IsZero() {
					gaps = append(gaps, t.Sub(lastEnd))
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				spans[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()].start = t
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				spans[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()].end = t
				lastEnd = t
			}
		}
		type agg struct {
			n             int
			dispatch, run time.Duration
		}
		by := map[string]*agg{}
		for _, id := range order {
			sp := spans[id]
			if sp.end.IsZero() {
				continue
			}
			a := by[sp.name]
			if a == nil {
				a = &agg{}
				by[sp.name] = a
			}
			a.n++
			a.dispatch += sp.start.Sub(sp.sched)
			a.run += sp.end.Sub(sp.start)
		}
		var lines []string
		for name, a := range by {
			lines = append(lines, fmt.Sprintf("%-12s n=%3d dispatch %6.1f ms  run %6.1f ms", name, a.n,
				float64(a.dispatch.Microseconds())/1000/float64(a.n), float64(a.run.Microseconds())/1000/float64(a.n)))
		}
		sort.Strings(lines)
		sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
		var sum time.Duration
		for _, g := range gaps {
			sum += g
		}
		b.Logf("per activity type (averages):\n%s\nworkflow-task gap (completion → next schedule): mean %.1f ms, median %.1f ms over %d",
			strings.Join(lines, "\n"), float64(sum.Microseconds())/1000/float64(len(gaps)), float64(gaps[len(gaps)/2].Microseconds())/1000, len(gaps))
	}
}
