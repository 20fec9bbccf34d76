//go:build unix

package devserver

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestStateFilesArePrivate: the database, the files SQLite and the lock
// keep beside it, and a directory the server creates are readable by the
// owner only, even under a umask that would allow everything, and a lock
// file an older version left world-readable is tightened.
func TestStateFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	dir := filepath.Join(t.TempDir(), "state")
	db := filepath.Join(dir, "dev.db")
	s := startServer(t, Options{DBPath: db, SearchAttributes: sessionAttributes(false), Logger: testLogger(t)})
	// Have the server write (a namespace and a workflow), so SQLite's side
	// files exist when they are checked.
	c := newClient(t, s)
	stop := startWorker(t, c, waitForFinish)
	defer stop()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, dir)

	// An older version's files: loose modes are tightened at the next start.
	for _, sfx := range dbFiles {
		_ = os.Chmod(db+sfx, 0o644)
	}
	s = startServer(t, Options{DBPath: db, SearchAttributes: sessionAttributes(false), Logger: testLogger(t)})
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, dir)
}

func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		want := stateFileMode
		if d.IsDir() {
			want = stateDirMode
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
	if files < 2 {
		t.Fatalf("found %d files in %s, want the database and its lock at least", files, dir)
	}
}
