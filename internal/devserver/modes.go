package devserver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Modes of the server's state. The database holds every session's history:
// the commands, their output, the transcripts and the approvals. Nobody but
// the user running the server may read it, in particular not another user
// on the host and not a sandbox whose commands run as another user.
const (
	stateFileMode fs.FileMode = 0o600
	stateDirMode  fs.FileMode = 0o700
)

// dbFiles are the suffixes of the files SQLite and lockDB keep beside the
// database.
var dbFiles = []string{"", "-wal", "-shm", "-journal", ".lock"}

// privateDB makes the database and the files beside it 0600, whatever
// the umask and whatever an older version created them with. SQLite gives
// the files it creates later (-wal, -shm, -journal) the mode of the
// database, so they follow. The directory is created 0700 (lockDB) but an
// existing one is left as it is: DBPath may sit in a directory the server
// does not own, and private files are enough to keep their contents.
func privateDB(path string) error {
	for _, s := range dbFiles {
		if err := os.Chmod(path+s, stateFileMode); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("devserver: make %s private: %w", path+s, err)
		}
	}
	return nil
}

// createPrivate creates an empty file that only its owner can read, for
// SQLite to fill (it takes an empty file for a new database).
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, stateFileMode)
	if err != nil {
		return err
	}
	if err := f.Chmod(stateFileMode); err != nil { // the umask may have taken bits away, never added
		_ = f.Close()
		return err
	}
	return f.Close()
}
