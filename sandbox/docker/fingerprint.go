package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// racyWindow: an entry whose timestamps fall this close to the fingerprint
// could change again without changing them (file systems stamp times from
// a coarse clock), so such a fingerprint is never trusted to equal a later
// one. The local backend does the same.
const racyWindow = 100 * time.Millisecond

// fingerprintScript lists every entry below the workspace root $1 with its
// mode, size, modification and change times (nanoseconds), inode and name
// (with the target, for symlinks), sorted. Both busybox and GNU stat
// support these formats; find errors (an unreadable directory) become part
// of the listing, so they too are stable.
const fingerprintScript = `cd "$1" || exit 2
find . -mindepth 1 -exec stat -c '%f	%s	%y	%z	%i	%N' {} + 2>&1 | LC_ALL=C sort`

// statTime is the layout of stat's %y and %z in busybox and GNU coreutils.
const statTime = "2006-01-02 15:04:05.999999999 -0700"

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
	sum := sha256.New()
	racy := &racyScan{after: started.Add(-racyWindow)}
	var stderr strings.Builder
	code, err := b.run(ctx, "fingerprint", id, []string{"/bin/sh", "-c", fingerprintScript, "sandbot-fingerprint", workdir},
		io.MultiWriter(sum, racy), &stderr)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("docker: fingerprint: exit status %d: %s", code, strings.TrimSpace(stderr.String()))
	}
	fp := hex.EncodeToString(sum.Sum(nil))
	if racy.found {
		fp += "-racy-" + randomHex(8)
	}
	return fp, nil
}

// racyScan watches the listing line by line for recent timestamps.
type racyScan struct {
	after   time.Time
	partial []byte
	found   bool
}

func (r *racyScan) Write(p []byte) (int, error) {
	n := len(p)
	if r.found {
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.partial = append(r.partial, p...)
			break
		}
		line := append(r.partial, p[:i]...)
		r.partial = r.partial[:0]
		p = p[i+1:]
		r.check(string(line))
	}
	return n, nil
}

func (r *racyScan) check(line string) {
	f := strings.SplitN(line, "\t", 6)
	if len(f) < 6 {
		return // a find error line
	}
	for _, ts := range f[2:4] {
		t, err := time.Parse(statTime, ts)
		if err != nil || !t.Before(r.after) {
			r.found = true
			return
		}
	}
}
