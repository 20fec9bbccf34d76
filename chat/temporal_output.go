package chat

import (
	"context"
	"errors"
	"strings"

	"go.temporal.io/api/serviceerror"

	"github.com/sandbot/sandbot/session"
)

// ToolOutput answers QueryToolOutput: a turn's calls, or one call with its
// output. A run of a worker build older than that query answers it with
// "unknown queryType"; the same answer is then computed from QueryHistory.
func (t *TemporalSessions) ToolOutput(ctx context.Context, id string, req session.ToolOutputRequest) (session.ToolOutputResponse, error) {
	var r session.ToolOutputResponse
	v, err := t.client.QueryWorkflow(ctx, id, "", session.QueryToolOutput, req)
	if err == nil {
		err = v.Get(&r)
	}
	if err == nil {
		return r, nil
	}
	if !unknownQuery(err) {
		return r, translate(session.QueryToolOutput, id, err)
	}
	h, err := t.History(ctx, id, session.HistoryRequest{})
	if err != nil {
		return r, err
	}
	return session.ToolOutputs(h, req), nil
}

// unknownQuery reports whether a query failed because the workflow has
// no handler for it.
func unknownQuery(err error) bool {
	var qf *serviceerror.QueryFailed
	return errors.As(err, &qf) && strings.Contains(qf.Error(), "unknown queryType")
}
