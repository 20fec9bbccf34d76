//go:build unix

package blobstore

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandbot/sandbot/sandbox"
)

// TestFileStoreIsPrivate: snapshots (written and copied) are 0600 and the
// directories the store creates 0700, even under a umask that allows
// everything.
func TestFileStoreIsPrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "snapshots")
	s, err := Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := sandbox.SnapshotKey("session/console/it/c/a", 1)
	if _, err := s.Put(ctx, key, strings.NewReader("tar")); err != nil {
		t.Fatal(err)
	}
	if err := s.Copy(ctx, key, sandbox.SnapshotKey("session/console/it/c/fork", 1)); err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		want := FileMode
		if d.IsDir() {
			want = 0o700
		} else {
			files++
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s has mode %#o, want %#o", path, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != 2 {
		t.Errorf("found %d snapshots, want the original and its copy", files)
	}
}
