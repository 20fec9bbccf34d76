package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/session"
)

// BenchmarkTurnTimeline breaks 10-call turns down by where the time goes,
// from the workflow's own history: activity dispatch (scheduled →
// started), activity run (started → completed) per activity type, and
// workflow-task time between an activity's completion and the next
// scheduling. The real-work floor of BenchmarkTurnOverhead is broken down
// the same way beside it, so the two can be compared line by line. Use
// -benchtime=1x.
//
//	go test ./integration -run '^$' -bench TurnTimeline -benchtime=1x
func BenchmarkTurnTimeline(b *testing.B) { byLayout(b, turnTimeline) }

func turnTimeline(b *testing.B, singleHost bool) {
	s := newStack(b, func(c *config.Config) {
		c.Session.ApprovalMode = "never"
		c.Sandbox.SingleHost = singleHost
	})
	s.model.SetResponder(toolLoop(10))
	workQueue, floorHostQueue, floor := startWorkFloor(b, s)
	if singleHost {
		floorHostQueue = "" // the floor routes as the layout does
	}
	th := s.thread(fmt.Sprintf("timeline-%v-%d", singleHost, time.Now().UnixNano()))
	for n := 0; n < b.N; n++ {
		var floors []string
		for i := 1; i <= 6; i++ {
			turn := n*6 + i
			before := len(s.model.Requests())
			s.say(th, fmt.Sprintf("tl-%d-%d", n, i), "go")
			s.waitStateEvery(th, 500*time.Millisecond, "turn", func(ts session.TurnState) bool { return ts.Turn == turn && done(ts) })
			floor.replay(s.model.Requests()[before:])
			run, err := s.c.ExecuteWorkflow(s.ctx, client.StartWorkflowOptions{TaskQueue: workQueue}, workFloorWorkflow, 10, false, floorHostQueue)
			if err != nil {
				b.Fatal(err)
			}
			if err := run.Get(s.ctx, nil); err != nil {
				b.Fatal(err)
			}
			floors = append(floors, run.GetID())
		}
		b.Logf("session, 6 turns:\n%s", timeline(b, s, th.ID()))
		b.Logf("real-work floor, 6 runs:\n%s", timeline(b, s, floors...))
	}
}

// timeline summarises the histories of the given workflows (latest runs).
func timeline(b *testing.B, s *stack, ids ...string) string {
	type span struct {
		name              string
		sched, start, end time.Time
	}
	type agg struct {
		n             int
		dispatch, run time.Duration
	}
	by := map[string]*agg{}
	kinds := map[string]int{} // events by type, over all the runs
	var gaps, tasks []time.Duration
	for _, id := range ids {
		spans := map[int64]*span{}
		var order []int64
		var lastEnd, taskSched time.Time
		iter := s.c.GetWorkflowHistory(s.ctx, id, "", false, 0)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				b.Fatal(err)
			}
			t := ev.GetEventTime().AsTime()
			kinds[strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")]++
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
				taskSched = t
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				tasks = append(tasks, t.Sub(taskSched))
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
	}
	var lines []string
	for name, a := range by {
		lines = append(lines, fmt.Sprintf("%-16s n=%3d dispatch %6.1f ms  run %6.1f ms", name, a.n,
			float64(a.dispatch.Microseconds())/1000/float64(a.n), float64(a.run.Microseconds())/1000/float64(a.n)))
	}
	sort.Strings(lines)
	var counts []string
	for k, n := range kinds {
		counts = append(counts, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(counts)
	return fmt.Sprintf("%s\n%s\n%s\nevents: %s", strings.Join(lines, "\n"),
		stat("activity completion → next schedule", gaps), stat("workflow task scheduled → completed", tasks), strings.Join(counts, " "))
}

func stat(what string, d []time.Duration) string {
	if len(d) == 0 {
		return what + ": none"
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
	return fmt.Sprintf("%s: n=%d mean %.1f ms, median %.1f ms, p90 %.1f ms", what, len(d), ms(sum/time.Duration(len(d))), ms(d[len(d)/2]), ms(d[len(d)*9/10]))
}
