package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// Sweep kills this deployment's sandboxes whose session is gone: every
// running or paused sandbox with metadata sandbot.managed=true and
// sandbot.deployment=Options.Deployment, started more than
// sandbox.SweepGrace ago, whose sandbot.session the alive callback
// reports as ended. With no Deployment it removes nothing: without it two
// installations on one E2B team would sweep each other's sandboxes, whose
// sessions they cannot see. A sandbox is kept whenever alive fails for its
// session (an unsure answer must not destroy a workspace); those failures
// are joined into the returned error. It returns the IDs it killed.
func (b *Backend) Sweep(ctx context.Context, alive func(sessionID string) (bool, error)) (removed []string, err error) {
	if b.opts.Deployment == "" {
		return nil, nil
	}
	filter := url.Values{LabelManaged: {"true"}, LabelDeployment: {b.opts.Deployment}}.Encode()
	verdicts := sandbox.NewSessionVerdicts(alive)
	var errs []error
	next := ""
	for {
		q := url.Values{"state": {"running,paused"}, "metadata": {filter}, "limit": {"100"}}
		if next != "" {
			q.Set("nextToken", next)
		}
		resp, err := b.send(ctx, &request{op: "sweep: list", method: http.MethodGet, path: "/v2/sandboxes", query: q})
		if err != nil {
			return removed, err
		}
		var page []sandboxJSON
		derr := decodeJSON(resp, &page)
		next = resp.Header.Get("X-Next-Token")
		if derr != nil {
			return removed, fmt.Errorf("e2b: sweep: list: %w", derr)
		}
		for _, s := range page {
			if err := ctx.Err(); err != nil {
				return removed, fmt.Errorf("e2b: sweep: %w", err)
			}
			// The API filtered already; checking again costs nothing and
			// keeps a filter the API ignored from sweeping strangers.
			md := s.Metadata
			session := md[LabelSession]
			if md[LabelManaged] != "true" || md[LabelDeployment] != b.opts.Deployment || session == "" {
				continue
			}
			if s.StartedAt.IsZero() || time.Since(s.StartedAt) < sandbox.SweepGrace {
				continue
			}
			if !verdicts.Ended(session) {
				continue
			}
			if err := b.Destroy(ctx, sandbox.Handle{Backend: Name, ID: s.SandboxID}); err != nil {
				errs = append(errs, err)
				continue
			}
			b.log.Info("e2b: removed orphan sandbox", "sandbox", s.SandboxID, "workflow_id", session)
			removed = append(removed, s.SandboxID)
		}
		if next == "" || len(page) == 0 {
			break
		}
	}
	if errs = append(errs, verdicts.Errs...); len(errs) > 0 {
		return removed, fmt.Errorf("e2b: sweep: %w", errors.Join(errs...))
	}
	return removed, nil
}
