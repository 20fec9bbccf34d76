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
// skipped. Symlinks are stored, never followed, so nothing outside the
// workspace ends up in a snapshot.
func (b *Backend) Export(ctx context.Context, h sandbox.Handle, w io.Writer) error {
	ws, _, err := b.workspace(h)
	if err != nil {
		return fmt.Errorf("local: export: %w", err)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		return fmt.Errorf("local: export: %w", err)
	}
	defer root.Close()

	bw := bufio.NewWriterSize(w, ioBuffer)
	tw := tar.NewWriter(bw)
	buf := make([]byte, ioBuffer)
	walkErr := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we walked
		}
		if err != nil {
			return err
		}
		return b.exportEntry(root, tw, name, fi, buf)
	})
	if walkErr != nil {
		return fmt.Errorf("local: export: %w", walkErr)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("local: export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("local: export: %w", err)
	}
	return nil
}

func (b *Backend) exportEntry(root *os.Root, tw *tar.Writer, name string, fi fs.FileInfo, buf []byte) error {
	hdr := &tar.Header{
		Name:    name,
		Mode:    int64(fi.Mode().Perm()),
		ModTime: fi.ModTime(),
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		hdr.Mode |= 0o1000
	}
	switch {
	case fi.Mode().IsRegular():
		hdr.Typeflag = tar.TypeReg
		hdr.Size = fi.Size()
	case fi.IsDir():
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := root.Readlink(name)
		if err != nil {
			return err
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
	default:
		return nil // sockets, FIFOs, devices: not workspace content
	}
	if hdr.Typeflag != tar.TypeReg {
		return tw.WriteHeader(hdr)
	}
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.CopyBuffer(tw, io.LimitReader(f, hdr.Size), buf)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if n < hdr.Size {
		// The file shrank while we read it; pad so the archive stays
		// well-formed. The next snapshot will carry the new content.
		b.log.Warn("local: file shrank during export", "file", name, "sandbox", root.Name())
		if _, err := io.CopyBuffer(tw, io.LimitReader(zeros{}, hdr.Size-n), buf); err != nil {
			return err
		}
	}
	return nil
}

// writerOnly hides an *os.File's ReaderFrom so io.CopyBuffer uses our
// buffer instead of allocating a small one per file.
type writerOnly struct{ io.Writer }

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

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

func extract(ctx context.Context, dir string, r io.Reader) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(bufio.NewReaderSize(r, ioBuffer))
	buf := make([]byte, ioBuffer)
	var dirs []dirMeta
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
		if err := extractEntry(root, tr, hdr, name, mode, buf); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirMeta{name, mode, hdr.ModTime})
		}
	}
	// Directory modes and times last, deepest first: a read-only directory
	// must not block its own children, and creating children changes the
	// parent's mtime.
	slices.SortFunc(dirs, func(a, b dirMeta) int { return len(b.name) - len(a.name) })
	for _, d := range dirs {
		if err := root.Chmod(d.name, d.mode); err != nil {
			return fmt.Errorf("entry %q: %w", d.name, err)
		}
		if err := root.Chtimes(d.name, d.mtime, d.mtime); err != nil {
			return fmt.Errorf("entry %q: %w", d.name, err)
		}
	}
	return nil
}

func extractEntry(root *os.Root, tr *tar.Reader, hdr *tar.Header, name string, mode fs.FileMode, buf []byte) error {
	if parent := path.Dir(name); parent != "." {
		if err := root.MkdirAll(parent, 0o700); err != nil {
			return err
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		err := root.Mkdir(name, 0o700)
		if errors.Is(err, fs.ErrExist) {
			if fi, serr := root.Lstat(name); serr == nil && fi.IsDir() {
				return nil
			}
		}
		return err
	case tar.TypeReg, tar.TypeRegA:
		if err := removeEntry(root, name); err != nil {
			return err
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.CopyBuffer(writerOnly{f}, tr, buf); err != nil {
			f.Close()
			return err
		}
		if err := f.Chmod(mode); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	case tar.TypeSymlink:
		if hdr.Linkname == "" {
			return fmt.Errorf("%w: symlink without a target", sandbox.ErrUnsafeArchive)
		}
		if err := removeEntry(root, name); err != nil {
			return err
		}
		if err := root.Symlink(hdr.Linkname, name); err != nil {
			return err
		}
		return lchtimes(root, name, hdr.ModTime)
	case tar.TypeLink:
		target, err := sandbox.CheckHardlinkTarget(hdr.Name, hdr.Linkname)
		if err != nil {
			return err
		}
		if err := removeEntry(root, name); err != nil {
			return err
		}
		return root.Link(target, name)
	default:
		return nil // devices, FIFOs, PAX globals: nothing to restore
	}
}

// removeEntry makes room for a file, link or symlink replacing an earlier
// entry of the same name (tar archives may repeat names).
func removeEntry(root *os.Root, name string) error {
	err := root.Remove(name)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
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
