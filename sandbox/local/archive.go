package local

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbot/sandbot/sandbox"
)

// ioBuffer is the copy buffer size for archive I/O: large enough that a
// big file costs few read/write calls.
const ioBuffer = 1 << 20

// keptMode is what a snapshot preserves of a file's mode. Set-user-ID and
// set-group-ID bits are dropped: a restored workspace must not gain
// privileged executables.
const keptMode = fs.ModePerm | fs.ModeSticky

// Export writes the workspace as a tar stream with names relative to the
// workspace root: directories, regular files (hard links are stored as
// copies) and symlinks, with their permission bits and modification times
// (to the second, the tar default). Sockets, FIFOs and devices are
// skipped, and so are entries a command made unreadable to the worker
// (with a warning), so one chmod cannot stop every later snapshot.
// Symlinks are stored, never followed, so nothing outside the workspace
// ends up in a snapshot.
func (b *Backend) Export(ctx context.Context, h sandbox.Handle, w io.Writer) error {
	ws, _, err := b.workspace(h)
	if err != nil {
		return fmt.Errorf("local: export: %w", err)
	}
	bw := bufio.NewWriterSize(w, ioBuffer)
	x := exporter{tw: tar.NewWriter(bw), buf: make([]byte, ioBuffer), b: b, id: h.ID}
	err = sandbox.WalkTree(ws, func(rel string, dirfd int, name string, st *unix.Stat_t) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return x.entry(rel, dirfd, name, st)
	}, x.denied)
	if err != nil {
		return fmt.Errorf("local: export: %w", err)
	}
	if err := x.tw.Close(); err != nil {
		return fmt.Errorf("local: export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("local: export: %w", err)
	}
	return nil
}

type exporter struct {
	tw  *tar.Writer
	buf []byte
	b   *Backend
	id  string
}

func (x *exporter) denied(rel string, err error) {
	x.b.log.Warn("local: export: skipping unreadable entry", "entry", rel, "sandbox", x.id, "error", err)
}

func (x *exporter) entry(rel string, dirfd int, name string, st *unix.Stat_t) error {
	hdr := &tar.Header{
		Name:    rel,
		Mode:    int64(st.Mode & 0o777),
		ModTime: time.Unix(st.Mtim.Unix()),
	}
	if st.Mode&unix.S_ISVTX != 0 {
		hdr.Mode |= 0o1000
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
		return x.tw.WriteHeader(hdr)
	case unix.S_IFLNK:
		target, err := sandbox.ReadlinkAt(dirfd, name, st.Size)
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EINVAL) {
			return nil // replaced or removed while we walked
		}
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
		return x.tw.WriteHeader(hdr)
	case unix.S_IFREG:
		return x.file(hdr, dirfd, name, st.Size)
	}
	return nil // sockets, FIFOs, devices: not workspace content
}

func (x *exporter) file(hdr *tar.Header, dirfd int, name string, size int64) error {
	fd, err := sandbox.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOCTTY)
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ELOOP):
		return nil // replaced or removed while we walked
	case errors.Is(err, syscall.EACCES):
		x.denied(hdr.Name, err)
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	defer unix.Close(fd)
	hdr.Typeflag = tar.TypeReg
	hdr.Size = size
	if err := x.tw.WriteHeader(hdr); err != nil {
		return err
	}
	for left := size; left > 0; {
		var n int
		err := sandbox.RetryEINTR(func() error {
			var err error
			n, err = unix.Read(fd, x.buf[:min(int64(len(x.buf)), left)])
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		if n == 0 {
			// The file shrank while we read it; pad so the archive stays
			// well-formed. The next snapshot carries the new content.
			x.b.log.Warn("local: file shrank during export", "file", hdr.Name, "sandbox", x.id)
			clear(x.buf)
			for left > 0 {
				k := min(int64(len(x.buf)), left)
				if _, err := x.tw.Write(x.buf[:k]); err != nil {
					return err
				}
				left -= k
			}
			return nil
		}
		if _, err := x.tw.Write(x.buf[:n]); err != nil {
			return err
		}
		left -= int64(n)
	}
	return nil
}

// writerOnly hides an *os.File's ReaderFrom so io.CopyBuffer uses our
// buffer instead of allocating a small one per file.
type writerOnly struct{ io.Writer }

// Import replaces the workspace with the archive's contents. It extracts
// into a fresh directory beside the workspace and swaps it in only when
// the whole archive was read and accepted, so a bad or truncated archive
// leaves the workspace as it was. Entries that would land outside the
// workspace are refused (see sandbox.CheckArchiveName); extraction goes
// through os.Root, so a symlink from an earlier entry cannot redirect a
// later write outside either.
func (b *Backend) Import(ctx context.Context, h sandbox.Handle, r io.Reader) error {
	ws, _, err := b.workspace(h)
	if err != nil {
		return fmt.Errorf("local: import: %w", err)
	}
	staging := filepath.Join(b.root, ".import-"+h.ID+"-"+randomSuffix())
	if err := os.Mkdir(staging, 0o700); err != nil {
		return fmt.Errorf("local: import: %w", err)
	}
	defer removeAll(staging)
	if err := extract(ctx, staging, r); err != nil {
		return fmt.Errorf("local: import: %w", err)
	}
	trash := filepath.Join(b.root, ".trash-"+h.ID+"-"+randomSuffix())
	if err := os.Rename(ws, trash); err != nil {
		return fmt.Errorf("local: import: %w", err)
	}
	if err := os.Rename(staging, ws); err != nil {
		_ = os.Rename(trash, ws)
		return fmt.Errorf("local: import: %w", err)
	}
	if err := removeAll(trash); err != nil {
		b.log.Warn("local: cannot remove replaced workspace", "dir", trash, "error", err)
	}
	return nil
}

type dirMeta struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
}

// extractor unpacks one archive into a directory through os.Root.
type extractor struct {
	root  *os.Root
	buf   []byte
	made  map[string]bool // directories known to exist, to skip MkdirAll
	dirs  []dirMeta       // modes and times to apply at the end
	times []unix.Timeval  // scratch for futimes
}

func extract(ctx context.Context, dir string, r io.Reader) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extractor{root: root, buf: make([]byte, ioBuffer), made: map[string]bool{}, times: make([]unix.Timeval, 2)}
	tr := tar.NewReader(bufio.NewReaderSize(r, ioBuffer))
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		name, err := sandbox.CheckArchiveName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue // the workspace root keeps its own mode
		}
		mode := fs.FileMode(hdr.Mode) & keptMode
		if hdr.Mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		if err := x.entry(tr, hdr, name, mode); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	// Directory modes and times last, deepest first: a read-only directory
	// must not block its own children, and creating children changes the
	// parent's mtime.
	slices.SortFunc(x.dirs, func(a, b dirMeta) int { return len(b.name) - len(a.name) })
	for _, d := range x.dirs {
		if err := root.Chmod(d.name, d.mode); err != nil {
			return fmt.Errorf("entry %q: %w", d.name, err)
		}
		if err := root.Chtimes(d.name, d.mtime, d.mtime); err != nil {
			return fmt.Errorf("entry %q: %w", d.name, err)
		}
	}
	return nil
}

// mkdirAll makes dir and its parents, remembering what exists so a
// directory of many files costs one MkdirAll rather than one per file.
// (The cache is only a shortcut: every open still goes through os.Root,
// which refuses paths that leave the root.)
func (x *extractor) mkdirAll(dir string) error {
	if dir == "." || x.made[dir] {
		return nil
	}
	if err := x.root.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for d := dir; d != "." && !x.made[d]; d = path.Dir(d) {
		x.made[d] = true
	}
	return nil
}

func (x *extractor) entry(tr *tar.Reader, hdr *tar.Header, name string, mode fs.FileMode) error {
	if err := x.mkdirAll(path.Dir(name)); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		x.dirs = append(x.dirs, dirMeta{name, mode, hdr.ModTime})
		if x.made[name] {
			return nil
		}
		err := x.root.Mkdir(name, 0o700)
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := x.root.Lstat(name); serr == nil && fi.IsDir() {
				err = nil
			}
		}
		if err == nil {
			x.made[name] = true
		}
		return err
	case tar.TypeReg:
		return x.file(tr, hdr, name, mode)
	case tar.TypeSymlink:
		if hdr.Linkname == "" {
			return fmt.Errorf("%w: symlink without a target", sandbox.ErrUnsafeArchive)
		}
		if err := x.remove(name); err != nil {
			return err
		}
		if err := x.root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
		return lchtimes(x.root, name, hdr.ModTime)
	case tar.TypeLink:
		target, err := sandbox.CheckHardlinkTarget(hdr.Name, hdr.Linkname)
		if err != nil {
			return err
		}
		if err := x.remove(name); err != nil {
			return err
		}
		return x.root.Link(target, name)
	default:
		return nil // devices, FIFOs, PAX globals: nothing to restore
	}
}

func (x *extractor) file(tr *tar.Reader, hdr *tar.Header, name string, mode fs.FileMode) error {
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := x.root.OpenFile(name, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// A repeated name: the later entry wins, as with tar(1).
		if err := x.remove(name); err != nil {
			return err
		}
		f, err = x.root.OpenFile(name, flags, 0o600)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyBuffer(writerOnly{f}, tr, x.buf); err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	mtime := hdr.ModTime.UnixNano()
	x.times[0], x.times[1] = unix.NsecToTimeval(mtime), unix.NsecToTimeval(mtime)
	if err := unix.Futimes(int(f.Fd()), x.times); err != nil {
		return err
	}
	return f.Close()
}

// remove makes room for an entry replacing an earlier one of the same name
// (tar archives may repeat names). A non-empty directory is not removed.
func (x *extractor) remove(name string) error {
	err := x.root.Remove(name)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		delete(x.made, name)
		return nil
	}
	return err
}

// lchtimes sets a symlink's own modification time. os.Root has no
// Lchtimes, so the parent is opened through the root (which keeps it
// inside) and the link is addressed relative to it without following it.
func lchtimes(root *os.Root, name string, mtime time.Time) error {
	parent, err := root.Open(path.Dir(name))
	if err != nil {
		return err
	}
	defer parent.Close()
	ts := []unix.Timespec{unix.NsecToTimespec(mtime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	return unix.UtimesNanoAt(int(parent.Fd()), path.Base(name), ts, unix.AT_SYMLINK_NOFOLLOW)
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
