package local

import (
	"errors"
	"os"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// walkFn is called for every entry below the workspace root, parents
// before children and siblings in byte order of their names. rel is the
// slash-separated path from the root; dirfd and name address the entry
// relative to its (already opened) parent directory, so callers open and
// stat it with one syscall and without resolving the path again. Returning
// errSkip for a directory skips its contents.
type walkFn func(rel string, dirfd int, name string, st *unix.Stat_t) error

var errSkip = errors.New("skip directory")

// walk visits the tree under dir. It is the snapshot hot path, so it costs
// one getdents per directory and one fstatat per entry, and never follows
// a symlink: directories are entered with O_NOFOLLOW relative to their
// parent's descriptor, which also keeps the walk inside the workspace if
// a command swaps a directory for a link while we walk. Entries that
// vanish meanwhile are skipped; a directory that cannot be read is
// reported to fn's caller through onDenied and skipped.
func walk(dir string, fn walkFn, onDenied func(rel string, err error)) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return walkDir(fd, "", fn, onDenied)
}

// walkDir walks the directory open as fd (and closes it).
func walkDir(fd int, rel string, fn walkFn, onDenied func(string, error)) error {
	f := os.NewFile(uintptr(fd), rel)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return &os.PathError{Op: "readdir", Path: rel, Err: err}
	}
	defer f.Close()
	slices.Sort(names)
	for _, name := range names {
		var st unix.Stat_t
		if err := ignoringEINTR(func() error { return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
			if errors.Is(err, syscall.ENOENT) {
				continue
			}
			return &os.PathError{Op: "stat", Path: join(rel, name), Err: err}
		}
		child := join(rel, name)
		err := fn(child, fd, name, &st)
		if err == errSkip {
			continue
		}
		if err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		switch {
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
			continue // replaced or removed while we walked
		case errors.Is(err, syscall.EACCES):
			onDenied(child, err)
			continue
		case err != nil:
			return &os.PathError{Op: "open", Path: child, Err: err}
		}
		if err := walkDir(sub, child, fn, onDenied); err != nil {
			return err
		}
	}
	return nil
}

func openat(dirfd int, name string, flags int) (int, error) {
	var fd int
	err := ignoringEINTR(func() error {
		var err error
		fd, err = unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

func ignoringEINTR(fn func() error) error {
	for {
		if err := fn(); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
