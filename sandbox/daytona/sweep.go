package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// clockSkew is how far the sandbox's clock may be ahead of the worker's:
// the fingerprint's racy cut-off is moved back by as much, on top of the
// file system's coarse timestamps.
const clockSkew = 2 * time.Second

// Fingerprint digests the workspace's metadata (paths, types, sizes,
// modes, modification and change times, inodes, symlink targets) with
// sandbox.FingerprintScript; no file contents are read. The listing goes
// to a file in the sandbox and is streamed into the digest, so a large
// workspace costs no memory. An entry stamped within clockSkew of the
// call makes the fingerprint unique (racy), so the next snapshot is
// written.
func (b *Backend) Fingerprint(ctx context.Context, h sandbox.Handle) (string, error) {
	started := time.Now()
	digest := sandbox.NewListingDigest(started.Add(-clockSkew))
	listing := "/tmp/sandbot-fp-" + sandbox.RandomHex(8)
	defer b.removeFile(ctx, h, listing)
	code, out, err := b.sh(ctx, h, "fingerprint", archiveTimeout,
		`/bin/sh -c "$1" sandbot-fingerprint "$2" >"$3" 2>&1`, sandbox.FingerprintScript, b.workdir(h), listing)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("daytona: fingerprint: exit status %d: %s", code, strings.TrimSpace(out))
	}
	if err := b.download(ctx, h, "fingerprint: read listing", listing, digest, -1); err != nil {
		return "", err
	}
	return digest.Fingerprint(), nil
}

// Sweep removes this deployment's sandboxes whose session is gone: every
// sandbox labelled sandbot.managed=true and sandbot.deployment=<the
// backend's Deployment>, older than sandbox.SweepGrace, whose
// sandbot.session the alive callback reports as ended. Without a
// Deployment it removes nothing: it could not tell this installation's
// sandboxes from another's in the same organization. A sandbox is kept
// whenever alive fails for its session; those failures are joined into
// the returned error after the other sandboxes were handled. It returns
// the ids of the removed sandboxes.
func (b *Backend) Sweep(ctx context.Context, alive func(sessionID string) (bool, error)) (removed []string, err error) {
	if b.opts.Deployment == "" {
		return nil, nil
	}
	filter, _ := json.Marshal(map[string]string{LabelManaged: "true", LabelDeployment: b.opts.Deployment})
	verdicts := sandbox.NewSessionVerdicts(alive)
	var errs []error
	cursor := ""
	for {
		req := b.api("sweep: list sandboxes", http.MethodGet, "/sandbox")
		req.query = url.Values{"labels": {string(filter)}, "limit": {"100"}}
		if cursor != "" {
			req.query.Set("cursor", cursor)
		}
		var page struct {
			Items      []dto   `json:"items"`
			NextCursor *string `json:"nextCursor"`
		}
		if err := b.call(ctx, req, &page); err != nil {
			return removed, err
		}
		for _, sb := range page.Items {
			if err := ctx.Err(); err != nil {
				return removed, fmt.Errorf("daytona: sweep: %w", err)
			}
			session := sb.Labels[LabelSession]
			if session == "" || sb.State == "destroying" || sb.State == "destroyed" || sb.Labels[LabelDeployment] != b.opts.Deployment || time.Since(sb.CreatedAt) < sandbox.SweepGrace {
				continue
			}
			if !verdicts.Ended(session) {
				continue
			}
			if err := b.Destroy(ctx, sandbox.Handle{ID: sb.ID}); err != nil {
				errs = append(errs, err)
				continue
			}
			b.log.Info("daytona: removed orphan sandbox", "sandbox", sb.ID, "workflow_id", session)
			removed = append(removed, sb.ID)
		}
		if page.NextCursor == nil || *page.NextCursor == "" || len(page.Items) == 0 {
			break
		}
		cursor = *page.NextCursor
	}
	if errs = append(errs, verdicts.Errs...); len(errs) > 0 {
		return removed, fmt.Errorf("daytona: sweep: %w", errors.Join(errs...))
	}
	return removed, nil
}
