package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// racyWindow: an entry whose timestamps fall this close to the fingerprint
// could change again without changing them (file systems stamp times from
// a coarse clock), so such a fingerprint is never trusted to equal a later
// one. The local backend does the same.
const racyWindow = 100 * time.Millisecond

// Fingerprint digests the workspace's metadata (paths, types, sizes,
// modes, modification and change times, inodes, symlink targets) with one
// exec; no file contents are read. It is only comparable with fingerprints
// of the same backend: names containing newlines make the listing
// ambiguous, which at worst makes two different workspaces look alike in
// those names. When an entry changed within racyWindow of the call (by the
// worker's clock), the result carries a unique suffix so that it equals no
// other fingerprint and the next snapshot is written.
func (b *Backend) Fingerprint(ctx context.Context, h sandbox.Handle) (string, error) {
	id, workdir, err := b.container(h)
	if err != nil {
		return "", fmt.Errorf("docker: fingerprint: %w", err)
	}
	started := time.Now()
	digest := sandbox.NewListingDigest(started.Add(-racyWindow))
	var stderr strings.Builder
	code, err := b.run(ctx, "fingerprint", id, []string{"/bin/sh", "-c", sandbox.FingerprintScript, "sandbot-fingerprint", workdir},
		digest, &stderr)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("docker: fingerprint: exit status %d: %s", code, strings.TrimSpace(stderr.String()))
	}
	return digest.Fingerprint(), nil
}
