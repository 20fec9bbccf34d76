package integration

import (
	"fmt"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/server/api/adminservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/session"
)

// A session waiting for work between turns has at most one idle-suspend
// timer pending, however many turns it ran: the wait cancels its timer when
// a message comes first. Before, every turn left its timer pending (the
// SDK's AwaitWithTimeout does not cancel it), to fire half an hour later as
// a workflow task that did nothing.
func TestIdleTimersDoNotPileUp(t *testing.T) {
	const turns = 4
	s := newStack(t, func(c *config.Config) {
		c.Session.ApprovalMode = "never"
		c.Session.IdleSuspend = time.Hour
	})
	s.model.SetResponder(toolLoop(1)) // a tool call, so each turn has a sandbox to suspend
	th := s.thread("idle-timers")
	for i := 1; i <= turns; i++ {
		s.say(th, fmt.Sprintf("idle-%d", i), "go")
		s.waitState(th, fmt.Sprintf("turn %d", i), func(ts session.TurnState) bool { return ts.Turn == i && done(ts) })
	}
	cc, err := grpc.NewClient(srv.HostPort(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ms, err := adminservice.NewAdminServiceClient(cc).DescribeMutableState(s.ctx, &adminservice.DescribeMutableStateRequest{
		Namespace: s.cfg.Temporal.Namespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: th.ID()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ms.GetDatabaseMutableState().GetTimerInfos()); n > 1 {
		t.Fatalf("%d timers pending after %d turns; want at most the current wait's", n, turns)
	}
}
