package pgtemporal

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// namespaceAPI is what creating a namespace needs of a client.
type namespaceAPI interface {
	WorkflowService() workflowservice.WorkflowServiceClient
	OperatorService() operatorservice.OperatorServiceClient
}

// createNamespace registers ns, adds attrs to it and waits until a
// visibility query on all of them is answered: a new namespace is unknown
// to the frontend until its next cache refresh, and sandbot's workflows
// fail on search attributes that are not there yet.
func createNamespace(ctx context.Context, cl namespaceAPI, ns string, attrs map[string]enumspb.IndexedValueType) error {
	_, err := cl.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", ns, err)
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	query := ""
	if len(names) > 0 {
		query = strings.Join(names, " IS NULL AND ") + " IS NULL"
	}
	added := len(attrs) == 0
	var last error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if !added {
			_, last = cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: attrs})
			var already *serviceerror.AlreadyExists
			if last != nil && !errors.As(last, &already) {
				continue // the namespace is not known to the frontend yet
			}
			added = true
		}
		if _, last = cl.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: ns, Query: query}); last == nil {
			return nil
		}
	}
	return fmt.Errorf("namespace %s with search attributes not usable after two minutes: %w", ns, last)
}
