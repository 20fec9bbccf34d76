package local

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
	"time"

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
	root, err := os.OpenRoot(ws)
	if err != nil {
		return "", fmt.Errorf("local: fingerprint: %w", err)
	}
	defer root.Close()

	started := time.Now()
	racyAfter := started.Add(-racyWindow).UnixNano()
	racy := false
	sum := sha256.New()
	var rec [8 * 5]byte
	err = fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		sum.Write([]byte(name))
		sum.Write([]byte{0})
		st, _ := fi.Sys().(*syscall.Stat_t)
		var ctime, ino int64
		if st != nil {
			ctime, ino = st.Ctim.Nano(), int64(st.Ino)
		}
		mtime := fi.ModTime().UnixNano()
		if name != "." && (mtime >= racyAfter || ctime >= racyAfter) {
			racy = true
		}
		binary.LittleEndian.PutUint64(rec[0:], uint64(fi.Mode()))
		binary.LittleEndian.PutUint64(rec[8:], uint64(fi.Size()))
		binary.LittleEndian.PutUint64(rec[16:], uint64(mtime))
		binary.LittleEndian.PutUint64(rec[24:], uint64(ctime))
		binary.LittleEndian.PutUint64(rec[32:], uint64(ino))
		sum.Write(rec[:])
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := root.Readlink(name)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			sum.Write([]byte(target))
			sum.Write([]byte{0})
		}
		return nil
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
