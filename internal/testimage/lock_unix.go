//go:build unix

package testimage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockFile takes an exclusive lock shared by every process on the host,
// so parallel test binaries import the image once. It polls rather than
// blocks so that ctx can end the wait.
func lockFile(ctx context.Context) (unlock func(), err error) {
	name := filepath.Join(os.TempDir(), "sandbot-testimage.lock")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("testimage: lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("testimage: lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("testimage: waiting for %s: %w", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
