//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package devserver

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDB only creates the parent directory here: this platform has no flock, so nothing stops
// two servers from sharing a database file. Do not do that.
func lockDB(path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), stateDirMode); err != nil {
		return nil, fmt.Errorf("devserver: create directory for DBPath: %w", err)
	}
	return func() {}, nil
}
