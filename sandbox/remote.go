package sandbox

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Shell scripts and helpers for backends that drive a shell they cannot
// signal directly: a container through the Docker Engine API, a cloud
// sandbox through its provider's API. Such a backend runs the user's
// command through GroupWrapper, kills it with GroupKill, and digests the
// workspace with FingerprintScript, so every one of them kills whole
// process trees and fingerprints the same way.

// GroupWrapper runs the user's command ($2) in a new session, hence its
// own process group, records that group in the pid file $1 for GroupKill,
// and kills the group once the command's shell returns, so background jobs
// do not outlive the command that started them (as in the local backend).
// The wrapper itself stays outside the group, so it survives the kill and
// reports the exit status: 128+9 = 137 for a killed command. Without
// setsid in the image the command still runs, but only its shell can be
// killed. Run it as: /bin/sh -c GroupWrapper sandbot-exec PIDFILE COMMAND.
const GroupWrapper = `if command -v setsid >/dev/null 2>&1; then setsid /bin/sh -c "$2" & else /bin/sh -c "$2" & fi
p=$!
{ echo "$p" >"$1"; } 2>/dev/null
wait "$p"
rc=$?
kill -KILL -"$p" 2>/dev/null
rm -f "$1"
exit "$rc"`

// GroupKill kills the process group recorded in the pid file $1, waiting
// a little for the file when the command is only just starting. It exits
// 3 when the file never appears. Run it as:
// /bin/sh -c GroupKill sandbot-kill PIDFILE.
const GroupKill = `i=0
while [ ! -s "$1" ]; do
	i=$((i+1)); [ "$i" -gt 100 ] && exit 3
	sleep 0.05 2>/dev/null || sleep 1
done
p=$(cat "$1")
kill -KILL -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
exit 0`

// FingerprintScript lists every entry below the workspace root $1 with its
// mode, size, modification and change times (nanoseconds), inode and name
// (with the target, for symlinks), sorted. Both busybox and GNU stat
// support these formats; find errors (an unreadable directory) become part
// of the listing, so they too are stable. Feed its stdout to a
// ListingDigest. Run it as: /bin/sh -c FingerprintScript sandbot-fingerprint WORKDIR.
const FingerprintScript = `cd "$1" || exit 2
find . -mindepth 1 -exec stat -c '%f	%s	%y	%z	%i	%N' {} + 2>&1 | LC_ALL=C sort`

// maxListingLine bounds one line of a listing a ListingDigest buffers.
const maxListingLine = 64 << 10

// statTime is the layout of stat's %y and %z in busybox and GNU coreutils.
const statTime = "2006-01-02 15:04:05.999999999 -0700"

// ListingDigest digests FingerprintScript's output and watches it line by
// line for timestamps after a cut-off: an entry that changed that recently
// could change again without changing its timestamps (file systems stamp
// times from a coarse clock), so such a fingerprint must never be trusted
// to equal a later one.
type ListingDigest struct {
	sum     hashWriter
	after   time.Time
	partial []byte
	racy    bool
}

type hashWriter interface {
	Write(p []byte) (int, error)
	Sum(b []byte) []byte
}

// NewListingDigest digests a listing whose entries count as racy when
// stamped after the cut-off (the fingerprint's start minus the clock's
// granularity, plus any skew between the worker's and the sandbox's clock).
func NewListingDigest(after time.Time) *ListingDigest {
	return &ListingDigest{sum: sha256.New(), after: after}
}

func (d *ListingDigest) Write(p []byte) (int, error) {
	n := len(p)
	_, _ = d.sum.Write(p)
	if d.racy {
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			d.partial = append(d.partial, p...)
			if len(d.partial) > maxListingLine {
				// No entry's line is this long (a path is at most a few
				// KiB): the sandbox's tools print something else. The
				// fingerprint then matches nothing, and the line is not
				// kept in memory.
				d.racy, d.partial = true, nil
			}
			break
		}
		line := append(d.partial, p[:i]...)
		d.partial = d.partial[:0]
		p = p[i+1:]
		d.check(string(line))
	}
	return n, nil
}

func (d *ListingDigest) check(line string) {
	f := strings.SplitN(line, "\t", 6)
	if len(f) < 6 {
		return // a find error line
	}
	for _, ts := range f[2:4] {
		t, err := time.Parse(statTime, ts)
		if err != nil || !t.Before(d.after) {
			d.racy = true
			return
		}
	}
}

// Racy reports whether an entry was stamped after the cut-off.
func (d *ListingDigest) Racy() bool { return d.racy }

// Fingerprint is the digest in hex. When the listing was racy it carries a
// unique suffix, so that it equals no other fingerprint and the next
// snapshot is written.
func (d *ListingDigest) Fingerprint() string {
	fp := hex.EncodeToString(d.sum.Sum(nil))
	if d.racy {
		fp += "-racy-" + RandomHex(8)
	}
	return fp
}

// RandomHex returns n random bytes in hex, for names of temporary files
// and pid files inside sandboxes.
func RandomHex(n int) string {
	p := make([]byte, n)
	_, _ = rand.Read(p)
	return hex.EncodeToString(p)
}

// ShellQuote quotes s as one word for /bin/sh.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
