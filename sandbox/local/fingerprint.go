package local

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbot/sandbot/sandbox"
)

// racyWindow: a file whose timestamps fall this close to the fingerprint
// walk could change again without changing its timestamps (file systems
// stamp times from a coarse clock), so such a fingerprint is never trusted
// to equal a later one. Git's "racy clean" problem, solved the same way.
const racyWindow = 100 * time.Millisecond

// Fingerprint digests the workspace's metadata: for every entry in sorted
// order its path, type, size, permission bits, modification and change
// times (nanoseconds), inode and, for symlinks, the target. It reads no
// file contents, so it is cheap even for large workspaces. The change time
// and inode catch a rewrite that restores the old size and mtime.
//
// When an entry changed within racyWindow of the walk, the result carries
// a unique suffix so it equals no other fingerprint, and the next snapshot
// is written rather than wrongly skipped.
func (b *Backend) Fingerprint(ctx context.Context, h sandbox.Handle) (string, error) {
	ws, _, err := b.workspace(h)
	if err != nil {
		return "", fmt.Errorf("local: fingerprint: %w", err)
	}
	started := time.Now()
	racyAfter := started.Add(-racyWindow).UnixNano()
	racy := false
	sum := sha256.New()
	var rec [8 * 5]byte
	err = sandbox.WalkTree(ws, func(rel string, dirfd int, name string, st *unix.Stat_t) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		mtime, ctime := st.Mtim.Nano(), st.Ctim.Nano()
		if mtime >= racyAfter || ctime >= racyAfter {
			racy = true
		}
		sum.Write([]byte(rel))
		sum.Write([]byte{0})
		binary.LittleEndian.PutUint64(rec[0:], uint64(st.Mode))
		binary.LittleEndian.PutUint64(rec[8:], uint64(st.Size))
		binary.LittleEndian.PutUint64(rec[16:], uint64(mtime))
		binary.LittleEndian.PutUint64(rec[24:], uint64(ctime))
		binary.LittleEndian.PutUint64(rec[32:], st.Ino)
		sum.Write(rec[:])
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			target, err := sandbox.ReadlinkAt(dirfd, name, st.Size)
			if err != nil && !errors.Is(err, syscall.ENOENT) {
				return err
			}
			sum.Write([]byte(target))
			sum.Write([]byte{0})
		}
		return nil
	}, func(rel string, err error) {
		// Unreadable directories are skipped by Export too; their
		// contents cannot change the snapshot.
		sum.Write([]byte(rel + "\x00denied\x00"))
	})
	if err != nil {
		return "", fmt.Errorf("local: fingerprint: %w", err)
	}
	fp := "v1:" + hex.EncodeToString(sum.Sum(nil)[:20])
	if racy {
		fp += ":racy:" + strconv.FormatInt(started.UnixNano(), 36) + ":" + randomSuffix()
	}
	return fp, nil
}
