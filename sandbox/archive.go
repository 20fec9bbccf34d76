package sandbox

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// ErrUnsafeArchive is returned (wrapped) by Import for an archive entry
// that would be written outside the workspace.
var ErrUnsafeArchive = errors.New("unsafe archive entry")

// CheckArchiveName validates a tar entry name for extraction into a
// workspace and returns it cleaned and relative ("a/b"; "." for the root
// itself). Absolute names and names with ".." components are refused,
// whether or not they would end up inside after cleaning: a snapshot made
// by Export never contains them, so their presence means a crafted archive.
// Backends that extract on their own (Docker's archive API, a provider's
// upload) use it to vet entries first.
func CheckArchiveName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrUnsafeArchive)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: %q is absolute; names must be relative to the workspace root", ErrUnsafeArchive, name)
	}
	if strings.ContainsRune(name, 0) || strings.Contains(name, `\`) {
		return "", fmt.Errorf("%w: %q contains a NUL or backslash", ErrUnsafeArchive, name)
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q has a \"..\" component; names must stay inside the workspace root", ErrUnsafeArchive, name)
		}
	}
	return path.Clean(name), nil
}

// CheckHardlinkTarget validates the target of a hard-link entry the same
// way as a name: hard links must point at another entry of the archive.
func CheckHardlinkTarget(name, target string) (string, error) {
	clean, err := CheckArchiveName(target)
	if err != nil {
		return "", fmt.Errorf("hard link %q: %w", name, err)
	}
	if clean == "." {
		return "", fmt.Errorf("%w: hard link %q points at the workspace root", ErrUnsafeArchive, name)
	}
	return clean, nil
}

// KeptMode is what a snapshot keeps of a file mode: permission and sticky
// bits. Set-user-ID and set-group-ID bits are dropped by every backend.
const KeptMode = 0o1777

// Owner is the numeric owner VetArchive gives every entry it writes.
type Owner struct{ UID, GID int }

// VetArchive checks an incoming snapshot archive and rewrites it to tw in
// the form backends extract: clean relative names, only directories,
// regular files, symlinks and hard links, KeptMode bits, owner o, and the
// directories above each entry that the archive did not make itself. It
// closes tw when the archive is whole.
//
// It remembers what the archive created, because the workspace it fills
// starts empty: a later entry may only go through directories the archive
// made, never through its symlinks, and a hard link may only point at a
// file it wrote. Anything else, and absolute names or ".." components,
// fail with ErrUnsafeArchive; an archive without its end-of-archive marker
// (truncated) fails too. Backends that hand the archive to something that
// extracts on its own (Docker's archive API, tar inside a cloud sandbox)
// spool VetArchive's output first, so a bad archive is refused before the
// workspace is touched.
func VetArchive(ctx context.Context, r io.Reader, tw *tar.Writer, o Owner) error {
	v := &archiveVetter{owner: o, dirs: map[string]bool{}, files: map[string]bool{}, symlinks: map[string]bool{}}
	return v.rewrite(ctx, r, tw)
}

type archiveVetter struct {
	owner    Owner
	dirs     map[string]bool
	files    map[string]bool
	symlinks map[string]bool
}

func (v *archiveVetter) rewrite(ctx context.Context, r io.Reader, tw *tar.Writer) error {
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
		name, err := CheckArchiveName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue // the workspace root keeps its own owner and mode
		}
		out := &tar.Header{
			Name:     name,
			Mode:     hdr.Mode & KeptMode,
			ModTime:  hdr.ModTime,
			Uid:      v.owner.UID,
			Gid:      v.owner.GID,
			Typeflag: hdr.Typeflag,
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			out.Name += "/"
		case tar.TypeReg:
			out.Typeflag, out.Size = tar.TypeReg, hdr.Size
		case tar.TypeSymlink:
			if hdr.Linkname == "" {
				return fmt.Errorf("%w: symlink %q without a target", ErrUnsafeArchive, hdr.Name)
			}
			out.Linkname = hdr.Linkname
		case tar.TypeLink:
			target, err := CheckHardlinkTarget(hdr.Name, hdr.Linkname)
			if err != nil {
				return err
			}
			if !v.files[target] {
				return fmt.Errorf("%w: hard link %q points at %q, which is not a file earlier in the archive", ErrUnsafeArchive, hdr.Name, hdr.Linkname)
			}
			out.Linkname = target
		default:
			continue // devices, FIFOs, PAX globals: nothing to restore
		}
		if err := v.parents(tw, name, hdr.ModTime); err != nil {
			return err
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		delete(v.symlinks, name)
		delete(v.files, name)
		switch out.Typeflag {
		case tar.TypeDir:
			v.dirs[name] = true
		case tar.TypeSymlink:
			delete(v.dirs, name)
			v.symlinks[name] = true
		case tar.TypeReg:
			delete(v.dirs, name)
			v.files[name] = true
			if _, err := io.Copy(tw, tr); err != nil {
				return fmt.Errorf("read archive: %q: %w", hdr.Name, err)
			}
		case tar.TypeLink:
			delete(v.dirs, name)
			v.files[name] = true
		}
	}
}

// parents refuses a name below one of the archive's symlinks and adds the
// directories above name that the archive has not made yet: left to the
// extractor they would be created owned by whoever extracts (root, for
// Docker), and the sandbox user could not write in them.
func (v *archiveVetter) parents(tw *tar.Writer, name string, mtime time.Time) error {
	var missing []string
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if v.symlinks[dir] {
			return fmt.Errorf("%w: %q would be written through the symlink %q", ErrUnsafeArchive, name, dir)
		}
		if v.files[dir] {
			return fmt.Errorf("%w: %q is below %q, which the archive made a file", ErrUnsafeArchive, name, dir)
		}
		if !v.dirs[dir] {
			missing = append(missing, dir)
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: missing[i] + "/", Mode: 0o755, Uid: v.owner.UID, Gid: v.owner.GID, ModTime: mtime})
		if err != nil {
			return err
		}
		v.dirs[missing[i]] = true
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

// RerootArchive copies an archive a tool made of the workspace (Docker's
// archive API names entries "workspace/a", `tar -C ws -c .` names them
// "./a") to tw as a snapshot: prefix (and a leading "./") stripped from
// names and hard-link targets, the root itself left out, only
// directories, regular files, symlinks and hard links, with KeptMode bits
// and modification times and without owners. It closes tw. A hard link
// whose target is outside prefix is an error.
func RerootArchive(tr *tar.Reader, tw *tar.Writer, prefix string) error {
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("read workspace archive: %w", err)
		}
		name, ok := strings.CutPrefix(strings.TrimPrefix(hdr.Name, "./"), prefix)
		if !ok || strings.Trim(name, "/") == "" || name == "." {
			continue // the workspace root itself
		}
		out := &tar.Header{Name: name, Mode: hdr.Mode & KeptMode, ModTime: hdr.ModTime, Typeflag: hdr.Typeflag}
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

// rerootBuffer sizes the buffers RerootStream puts around both streams.
const rerootBuffer = 1 << 20

// RerootStream is RerootArchive from a workspace archive as it downloads
// (r) to a snapshot writer (w), buffered both ways. When ctx ended, the
// error is ctx's, not the broken read it caused.
func RerootStream(ctx context.Context, r io.Reader, w io.Writer, prefix string) error {
	bw := bufio.NewWriterSize(w, rerootBuffer)
	if err := RerootArchive(tar.NewReader(bufio.NewReaderSize(r, rerootBuffer)), tar.NewWriter(bw), prefix); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return bw.Flush()
}
