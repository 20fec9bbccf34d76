package devserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// saReadyTimeout bounds the wait for newly added search attributes to become usable, in case
// the caller's ctx has no deadline. The server's namespace cache refreshes every 2 s.
const saReadyTimeout = 30 * time.Second

// registerSearchAttributes makes sure every wanted search attribute exists in the namespace
// with the wanted type. On a new namespace they were created with it; on an existing one the
// missing ones are added through the operator API and Start waits until queries accept them.
func (s *Server) registerSearchAttributes(ctx context.Context, want map[string]enumspb.IndexedValueType) error {
	if len(want) == 0 {
		return nil
	}
	c, err := s.NewClient(ctx, client.Options{})
	if err != nil {
		return err
	}
	defer c.Close()

	op := c.OperatorService()
	list, err := op.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.namespace})
	if err != nil {
		return fmt.Errorf("devserver: list search attributes: %w", err)
	}
	have := list.GetCustomAttributes()
	missing := make(map[string]enumspb.IndexedValueType)
	for _, name := range sortedKeys(want) {
		typ := want[name]
		got, exists := have[name]
		switch {
		case !exists:
			missing[name] = typ
		case got != typ:
			return fmt.Errorf("devserver: search attribute %s already exists in namespace %s as %s, not %s: a type cannot change in place; use a new name",
				name, s.namespace, got, typ)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := op.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        s.namespace,
		SearchAttributes: missing,
	}); err != nil {
		return fmt.Errorf("devserver: add search attributes %v: %w", sortedKeys(missing), err)
	}
	return s.awaitSearchAttributes(ctx, c, sortedKeys(missing))
}

// awaitSearchAttributes polls a visibility query naming every new attribute until the
// frontend accepts it: the frontend resolves names through its namespace cache, which learns
// about the added attributes on its next refresh.
func (s *Server) awaitSearchAttributes(ctx context.Context, c client.Client, names []string) error {
	ctx, cancel := context.WithTimeout(ctx, saReadyTimeout)
	defer cancel()
	query := strings.Join(names, " IS NULL AND ") + " IS NULL"
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := c.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: s.namespace,
			Query:     query,
		})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devserver: search attributes %v not usable yet (last error: %v): %w", names, err, ctx.Err())
		case <-tick.C:
		}
	}
}
