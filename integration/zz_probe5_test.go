package integration

import (
	"context"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
)

func TestZZProbeCarry(t *testing.T) {
	c, err := srv.NewClient(context.Background(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer c.Close()
		iter := c.GetWorkflowHistory(context.Background(), "session/console//w5-TestZZProbeCarry/carry", "", false, 0)
		for iter.HasNext() {
			ev, err := iter.Next()
			if err != nil {
				t.Log(err)
				return
			}
			s := ev.String()
			if strings.Contains(s, "UPDATE_ACCEPTED") || strings.Contains(s, "activity_type") || strings.Contains(s, "TASK_FAILED") || strings.Contains(s, "TIMED_OUT") {
				if i := strings.Index(s, "name:"); i > 0 {
					s = s[i:]
				}
				if len(s) > 250 {
					s = s[:250]
				}
				t.Logf("%3d %s %s %s", ev.GetEventId(), ev.GetEventTime().AsTime().Format("05.000"), ev.GetEventType(), s)
			}
		}
	})
	TestBackendSwitchCarriesWorkspace(t)
}
