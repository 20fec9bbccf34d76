package sandbox

import (
	"errors"
	"os"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// WalkFunc is called for every entry below the workspace root, parents
// before children and siblings in byte order of their names. rel is the
// slash-separated path from the root; dirfd and name address the entry
// relative to its (already opened) parent directory, so callers open and
// stat it with one syscall and without resolving the path again. Returning
// ErrSkipDir for a directory skips its contents.
type WalkFunc func(rel string, dirfd int, name string, st *unix.Stat_t) error

// ErrSkipDir, returned by a WalkFunc for a directory, skips its contents.
var ErrSkipDir = errors.New("skip directory")

// WalkTree visits the tree under dir. It is the snapshot hot path, so it costs
// one getdents per directory and one fstatat per entry, and never follows
// a symlink: directories are entered with O_NOFOLLOW relative to their
// parent's descriptor, which also keeps the walk inside the workspace if
// a command swaps a directory for a link while we walk. Entries that
// vanish meanwhile are skipped; a directory that cannot be read is
// reported to fn's caller through onDenied and skipped.
func WalkTree(dir string, fn WalkFunc, onDenied func(rel string, err error)) error {
	// The parallel walk with one worker reads every directory inline, in
	// order; nothing is kept.
	_, err := WalkTreeParallel(dir, 1, func(rel string, dirfd int, name string, st *unix.Stat_t) (struct{}, bool, error) {
		return struct{}{}, false, fn(rel, dirfd, name, st)
	}, onDenied)
	return err
}

// Openat opens name relative to dirfd (close-on-exec), retrying on EINTR.
func Openat(dirfd int, name string, flags int) (int, error) {
	var fd int
	err := RetryEINTR(func() error {
		var err error
		fd, err = unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, 0)
		return err
	})
	return fd, err
}

// RetryEINTR calls fn until it fails with something other than EINTR.
func RetryEINTR(fn func() error) error {
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

// WalkTreeParallel is WalkTree with up to workers directories read at
// once: on a tree of thousands of files the time goes into one stat per
// entry, and those of different directories need not wait for each other.
// fn may be called concurrently (each call's dirfd is open for the call
// only); what it keeps (ok true) comes back in WalkTree's order, so the
// result does not depend on the scheduling. Returning ErrSkipDir with ok
// true keeps the directory's value and skips its contents.
func WalkTreeParallel[T any](dir string, workers int, fn func(rel string, dirfd int, name string, st *unix.Stat_t) (T, bool, error), onDenied func(rel string, err error)) ([]T, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	w := &parallelWalk[T]{fn: fn, onDenied: onDenied, sem: make(chan struct{}, max(workers-1, 0))}
	var out []T
	if err := w.dir(fd, "", &out); err != nil {
		return nil, err
	}
	return out, nil
}

type parallelWalk[T any] struct {
	fn       func(rel string, dirfd int, name string, st *unix.Stat_t) (T, bool, error)
	onDenied func(string, error)
	sem      chan struct{}
	mu       sync.Mutex // serialises onDenied
}

// dir walks the directory open as fd (and closes it), appending to out.
func (w *parallelWalk[T]) dir(fd int, rel string, out *[]T) error {
	f := os.NewFile(uintptr(fd), rel)
	names, err := f.Readdirnames(-1)
	if err != nil {
		f.Close()
		return &os.PathError{Op: "readdir", Path: rel, Err: err}
	}
	defer f.Close()
	slices.Sort(names)
	type pending struct {
		at   int // where in *out the subtree goes
		done chan error
		got  []T
	}
	var subs []*pending
	var mine []T // this directory's entries and the subtrees walked inline
	for _, name := range names {
		var st unix.Stat_t
		if err := RetryEINTR(func() error { return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) }); err != nil {
			if errors.Is(err, syscall.ENOENT) {
				continue
			}
			return &os.PathError{Op: "stat", Path: join(rel, name), Err: err}
		}
		child := join(rel, name)
		v, keep, err := w.fn(child, fd, name, &st)
		if keep {
			mine = append(mine, v)
		}
		if err == ErrSkipDir {
			continue
		}
		if err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		switch {
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
			continue // replaced or removed while we walked
		case errors.Is(err, syscall.EACCES):
			w.mu.Lock()
			w.onDenied(child, err)
			w.mu.Unlock()
			continue
		case err != nil:
			return &os.PathError{Op: "open", Path: child, Err: err}
		}
		select {
		case w.sem <- struct{}{}:
			p := &pending{at: len(mine), done: make(chan error, 1)}
			subs = append(subs, p)
			go func() {
				defer func() { <-w.sem }()
				p.done <- w.dir(sub, child, &p.got)
			}()
		default:
			if err := w.dir(sub, child, &mine); err != nil {
				for _, p := range subs {
					<-p.done
				}
				return err
			}
		}
	}
	var first error
	for _, p := range subs {
		if err := <-p.done; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	// The subtrees go where they were met.
	at := 0
	for _, p := range subs {
		*out = append(*out, mine[at:p.at]...)
		*out = append(*out, p.got...)
		at = p.at
	}
	*out = append(*out, mine[at:]...)
	return nil
}
