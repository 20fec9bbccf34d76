package app

import (
	"context"
	"fmt"

	"github.com/sandbot/sandbot/session"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// ServedBackends returns which of the candidate backends have a worker
// polling their task queue right now.
func ServedBackends(ctx context.Context, c client.Client, taskQueue string, candidates []string) ([]string, error) {
	var served []string
	for _, name := range candidates {
		resp, err := c.DescribeTaskQueue(ctx, session.BackendQueue(taskQueue, name), enumspb.TASK_QUEUE_TYPE_ACTIVITY)
		if err != nil {
			return nil, fmt.Errorf("describe task queue of backend %s: %w", name, err)
		}
		if len(resp.GetPollers()) > 0 {
			served = append(served, name)
		}
	}
	return served, nil
}
