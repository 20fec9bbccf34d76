package docker

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/sandbox"
)

// Sweep removes sandbot containers on this daemon whose session is gone:
// every container labelled sandbot.managed=true (and with all of the
// backend's Options.Labels) whose sandbot.session the
// alive callback reports as ended. A container is kept whenever alive
// fails for its session (an unsure answer must not destroy a workspace);
// those failures are joined into the returned error, after the other
// containers were handled. It returns the IDs of the removed containers.
//
// alive is called at most once per session and may be slow (a Temporal
// describe call, for example); Sweep checks ctx between containers.
func (b *Backend) Sweep(ctx context.Context, alive func(sessionID string) (bool, error)) (removed []string, err error) {
	// Only this deployment's containers: the backend's own labels (the
	// worker sets one naming its Temporal namespace and task queue) keep two
	// sandbot installations on one Docker host from sweeping each other's
	// sandboxes, whose sessions the other cannot see.
	filters := make(client.Filters).Add("label", LabelManaged+"=true")
	for k, v := range b.opts.Labels {
		filters = filters.Add("label", k+"="+v)
	}
	list, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filters})
	if err != nil {
		return nil, b.classify("sweep: list containers", err)
	}
	verdicts := sandbox.NewSessionVerdicts(alive)
	var errs []error
	for _, c := range list.Items {
		if err := ctx.Err(); err != nil {
			return removed, fmt.Errorf("docker: sweep: %w", err)
		}
		session := c.Labels[LabelSession]
		if session == "" {
			continue // not one of our session containers; leave it alone
		}
		if !verdicts.Ended(session) {
			continue
		}
		_, rerr := b.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if cerrdefs.IsConflict(rerr) {
			continue // a removal is already under way
		}
		if rerr != nil && !cerrdefs.IsNotFound(rerr) {
			errs = append(errs, b.classify("sweep: remove "+c.ID, rerr))
			continue
		}
		b.log.Info("docker: removed orphan sandbox", "sandbox", c.ID, "workflow_id", session)
		removed = append(removed, c.ID)
	}
	if errs = append(errs, verdicts.Errs...); len(errs) > 0 {
		return removed, fmt.Errorf("docker: sweep: %w", errors.Join(errs...))
	}
	return removed, nil
}
