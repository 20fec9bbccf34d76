package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/sandbox"
)

// keptMode is what a snapshot keeps of a mode: permission and sticky bits.
// Set-user-ID and set-group-ID bits are dropped, as in the local backend.
const keptMode = 0o1777

// ioBuffer sizes the buffered reader and writer around archive streams.
const ioBuffer = 1 << 20

// Export writes the workspace as a tar stream with names relative to the
// workspace root, in the local backend's format: directories (with a
// trailing "/"), regular files, symlinks and hard links, with permission
// bits and modification times, without owners. Other file types are
// skipped. A stopped container is read without being started.
func (b *Backend) Export(ctx context.Context, h sandbox.Handle, w io.Writer) error {
	id, workdir, err := b.container(h)
	if err != nil {
		return fmt.Errorf("docker: export: %w", err)
	}
	res, err := b.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: workdir})
	if err != nil {
		return b.classify("export", err)
	}
	defer res.Content.Close()
	// Docker names entries after the copied directory ("workspace/a.txt").
	prefix := path.Base(workdir) + "/"
	if res.Stat.Name != "" {
		prefix = res.Stat.Name + "/"
	}
	bw := bufio.NewWriterSize(w, ioBuffer)
	if err := reroot(tar.NewReader(bufio.NewReaderSize(res.Content, ioBuffer)), tar.NewWriter(bw), prefix); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("docker: export: %w", ctx.Err())
		}
		return b.classify("export", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("docker: export: %w", err)
	}
	return nil
}

// reroot copies Docker's archive of the workspace to tw with prefix
// stripped from names and hard-link targets and with only the metadata a
// snapshot keeps.
func reroot(tr *tar.Reader, tw *tar.Writer, prefix string) error {
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("read container archive: %w", err)
		}
		name, ok := strings.CutPrefix(strings.TrimPrefix(hdr.Name, "./"), prefix)
		if !ok || strings.Trim(name, "/") == "" {
			continue // the workspace root itself
		}
		out := &tar.Header{Name: name, Mode: hdr.Mode & keptMode, ModTime: hdr.ModTime, Typeflag: hdr.Typeflag}
		switch hdr.Typeflag {
		case tar.TypeDir:
			out.Name = strings.TrimSuffix(name, "/") + "/"
		case tar.TypeReg:
			out.Typeflag, out.Size = tar.TypeReg, hdr.Size
		case tar.TypeSymlink:
			out.Linkname = hdr.Linkname
		case tar.TypeLink:
			target, ok := strings.CutPrefix(strings.TrimPrefix(hdr.Linkname, "./"), prefix)
			if !ok {
				return fmt.Errorf("hard link %q points outside the workspace (%q)", hdr.Name, hdr.Linkname)
			}
			out.Linkname = target
		default:
			continue // devices, FIFOs, sockets: not workspace content
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		if out.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, tr); err != nil {
				return err
			}
		}
	}
}

// Import replaces the workspace with the archive's contents, owned by the
// sandbox user. The archive is checked and rewritten into a temporary file
// on the worker first, so a bad or truncated archive is refused before the
// workspace is touched: entries outside the workspace (absolute, "..",
// through a symlink of the archive, hard links to anything but an earlier
// file of the archive) fail with sandbox.ErrUnsafeArchive. Only an error
// from the daemon while extracting can leave the workspace partly filled.
func (b *Backend) Import(ctx context.Context, h sandbox.Handle, r io.Reader) error {
	id, workdir, err := b.container(h)
	if err != nil {
		return fmt.Errorf("docker: import: %w", err)
	}
	// Fail fast on a sandbox that is gone, before spooling the archive.
	if err := b.ensureRunning(ctx, "import", id); err != nil {
		return err
	}
	spool, err := os.CreateTemp("", "sandbot-docker-import-*.tar")
	if err != nil {
		return fmt.Errorf("docker: import: spool: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	bw := bufio.NewWriterSize(spool, ioBuffer)
	rw := &importRewriter{uid: b.uid, gid: b.gid, dirs: map[string]bool{}, files: map[string]bool{}, symlinks: map[string]bool{}}
	if err := rw.rewrite(ctx, bufio.NewReaderSize(r, ioBuffer), tar.NewWriter(bw)); err != nil {
		return fmt.Errorf("docker: import: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("docker: import: spool: %w", err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("docker: import: spool: %w", err)
	}
	if err := b.clear(ctx, id, workdir); err != nil {
		return err
	}
	_, err = b.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{
		DestinationPath: workdir,
		Content:         bufio.NewReaderSize(spool, ioBuffer),
	})
	if err != nil {
		return b.classify("import: extract", err)
	}
	return nil
}

// clearScript empties the directory $1. A command may have left read-only
// directories behind; the owner can make them writable again.
const clearScript = `cd "$1" || exit 2
find . -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null && exit 0
chmod -R u+rwX . 2>/dev/null
find . -mindepth 1 -maxdepth 1 -exec rm -rf {} +`

// clear empties the workspace, as the sandbox user.
func (b *Backend) clear(ctx context.Context, id, workdir string) error {
	var stderr bytes.Buffer
	code, err := b.run(ctx, "import: clear workspace", id, []string{"/bin/sh", "-c", clearScript, "sandbot-clear", workdir}, io.Discard, &limitedBuffer{buf: &stderr, n: 4096})
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("docker: import: clear workspace: exit status %d: %s", code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// importRewriter vets and rewrites an incoming archive. It remembers what
// the archive created, because the workspace starts empty: a later entry
// may only go through directories the archive made, never through its
// symlinks, and a hard link may only point at a file it wrote.
type importRewriter struct {
	uid, gid int
	dirs     map[string]bool
	files    map[string]bool
	symlinks map[string]bool
}

func (rw *importRewriter) rewrite(ctx context.Context, r io.Reader, tw *tar.Writer) error {
	zr := &zeroTail{r: r}
	tr := tar.NewReader(zr)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Bodies are read in full, so what Next reads is padding and the
		// next header or the end-of-archive marker.
		zr.zeros = 0
		hdr, err := tr.Next()
		if err == io.EOF {
			// Go's tar reader also ends cleanly when the input stops at a
			// member boundary; only the end-of-archive marker (two zero
			// blocks) tells a whole archive from a truncated one.
			if zr.zeros < 2*512 {
				return errors.New("read archive: it ends without the end-of-archive marker (truncated?)")
			}
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		name, err := sandbox.CheckArchiveName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue // the workspace root keeps its own owner and mode
		}
		out := &tar.Header{
			Name:     name,
			Mode:     hdr.Mode & keptMode,
			ModTime:  hdr.ModTime,
			Uid:      rw.uid,
			Gid:      rw.gid,
			Typeflag: hdr.Typeflag,
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			out.Name += "/"
		case tar.TypeReg:
			out.Typeflag, out.Size = tar.TypeReg, hdr.Size
		case tar.TypeSymlink:
			if hdr.Linkname == "" {
				return fmt.Errorf("%w: symlink %q without a target", sandbox.ErrUnsafeArchive, hdr.Name)
			}
			out.Linkname = hdr.Linkname
		case tar.TypeLink:
			target, err := sandbox.CheckHardlinkTarget(hdr.Name, hdr.Linkname)
			if err != nil {
				return err
			}
			if !rw.files[target] {
				return fmt.Errorf("%w: hard link %q points at %q, which is not a file earlier in the archive", sandbox.ErrUnsafeArchive, hdr.Name, hdr.Linkname)
			}
			out.Linkname = target
		default:
			continue // devices, FIFOs, PAX globals: nothing to restore
		}
		if err := rw.parents(tw, name, hdr.ModTime); err != nil {
			return err
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		delete(rw.symlinks, name)
		delete(rw.files, name)
		switch out.Typeflag {
		case tar.TypeDir:
			rw.dirs[name] = true
		case tar.TypeSymlink:
			delete(rw.dirs, name)
			rw.symlinks[name] = true
		case tar.TypeReg:
			delete(rw.dirs, name)
			rw.files[name] = true
			if _, err := io.Copy(tw, tr); err != nil {
				return fmt.Errorf("read archive: %q: %w", hdr.Name, err)
			}
		case tar.TypeLink:
			delete(rw.dirs, name)
			rw.files[name] = true
		}
	}
}

// parents refuses a name below one of the archive's symlinks and adds the
// directories above name that the archive has not made yet: left to the
// daemon they would be created owned by root, and the sandbox user could
// not write in them.
func (rw *importRewriter) parents(tw *tar.Writer, name string, mtime time.Time) error {
	var missing []string
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if rw.symlinks[dir] {
			return fmt.Errorf("%w: %q would be written through the symlink %q", sandbox.ErrUnsafeArchive, name, dir)
		}
		if rw.files[dir] {
			return fmt.Errorf("%w: %q is below %q, which the archive made a file", sandbox.ErrUnsafeArchive, name, dir)
		}
		if !rw.dirs[dir] {
			missing = append(missing, dir)
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: missing[i] + "/", Mode: 0o755, Uid: rw.uid, Gid: rw.gid, ModTime: mtime})
		if err != nil {
			return err
		}
		rw.dirs[missing[i]] = true
	}
	return nil
}

// zeroTail counts the zero bytes at the end of what has been read.
type zeroTail struct {
	r     io.Reader
	zeros int
}

func (z *zeroTail) Read(p []byte) (int, error) {
	n, err := z.r.Read(p)
	i := n
	for i > 0 && p[i-1] == 0 {
		i--
	}
	if i == 0 {
		z.zeros += n
	} else {
		z.zeros = n - i
	}
	return n, err
}

// limitedBuffer keeps the first n bytes written to it and drops the rest.
type limitedBuffer struct {
	buf *bytes.Buffer
	n   int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
