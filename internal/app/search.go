package app

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/sandbot/sandbot/session"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
)

// EnsureSearchAttributes registers sandbot's custom search attributes on the
// namespace if they are missing. On a cluster where this client may not
// change the namespace, the error says exactly what an operator must run.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string, log *slog.Logger) error {
	missing, err := MissingSearchAttributes(ctx, c, namespace)
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	want := session.SearchAttributeTypes()
	add := map[string]enumsType{}
	for _, n := range missing {
		add[n] = want[n]
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: namespace, SearchAttributes: add})
	if err != nil {
		var cmds []string
		for _, n := range missing {
			cmds = append(cmds, fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type %s", namespace, n, typeName(want[n])))
		}
		return fmt.Errorf("register search attributes %s: %w; ask an operator to run:\n  %s", strings.Join(missing, ", "), err, strings.Join(cmds, "\n  "))
	}
	log.Info("registered search attributes", "namespace", namespace, "names", strings.Join(missing, ","))
	return nil
}

// MissingSearchAttributes lists sandbot's search attributes the namespace
// lacks.
func MissingSearchAttributes(ctx context.Context, c client.Client, namespace string) ([]string, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return nil, fmt.Errorf("list search attributes of %s: %w", namespace, err)
	}
	var missing []string
	for name := range session.SearchAttributeTypes() {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return missing, nil
}

func typeName(t enumsType) string {
	s := strings.TrimPrefix(t.String(), "INDEXED_VALUE_TYPE_")
	return strings.ToUpper(s[:1]) + strings.ToLower(s[1:])
}
