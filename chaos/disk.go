package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// snapFSBytes is the size of the tmpfs the snapshot store lives on when
// the disk-full fault is in the run: room for every session's snapshots
// many times over, small enough to fill in a moment.
const snapFSBytes = 256 << 20

// snapshotFS puts the snapshot store on a tmpfs of its own under dir, so
// the disk-full fault can fill it without touching the machine's disk. It
// needs to mount (root, or CAP_SYS_ADMIN), as CI and this machine have.
// It returns the store's directory.
func snapshotFS(dir string) (mount, store string, err error) {
	mount = filepath.Join(dir, "snapfs")
	if err := os.MkdirAll(mount, 0o700); err != nil {
		return "", "", err
	}
	if err := unix.Mount("tmpfs", mount, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", snapFSBytes)); err != nil {
		return "", "", fmt.Errorf("chaos: the %s fault puts the snapshot store on a tmpfs, and mounting one failed (it needs root or CAP_SYS_ADMIN; leave the fault out with -faults): %w", FaultDiskFull, err)
	}
	store = filepath.Join(mount, "store")
	if err := os.MkdirAll(store, 0o700); err != nil {
		_ = unix.Unmount(mount, unix.MNT_DETACH)
		return "", "", err
	}
	return mount, store, nil
}

// fillDisk writes a file beside the store until the tmpfs is full, holds
// it for hold, and deletes it: snapshot writes in that window fail with
// ENOSPC and must be retried, never lost or restored half-written.
func fillDisk(ctx context.Context, mount string, hold time.Duration) error {
	path := filepath.Join(mount, "fill")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				return fmt.Errorf("chaos: fill the snapshot store: %w", err)
			}
			break
		}
	}
	// Whatever a snapshot freed meanwhile is taken too, in smaller pieces.
	for _, n := range []int{64 << 10, 4 << 10, 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
	sleep(ctx, hold)
	return nil
}
