package sandbox

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Tree is an optional capability of a backend whose workspace is a
// directory on the worker's host that the worker may read and write itself
// (the local backend). Snapshots then walk it and read only the files whose
// metadata changed since the last snapshot, and a restore onto a live
// sandbox (a rewind) writes only the entries that differ.
type Tree interface {
	// TreeDirs returns the workspace directory of a live handle and a
	// directory on the same file system, private to the worker, for
	// staging files before they are moved into the workspace.
	TreeDirs(h Handle) (workspace, staging string, err error)
}

// racyWindow: an entry whose timestamps fall this close to the walk could
// change again without changing them (file systems stamp times from a
// coarse clock), so its stat key is not recorded and the next snapshot
// reads it again. Git's "racy clean" problem, solved the same way.
const racyWindow = 100 * time.Millisecond

// entryOverhead is what an entry costs against the workspace quota beyond
// its content: a tar header, as the quota was first defined on archives.
const entryOverhead = 512

// quota counts a workspace against Limits.WorkspaceBytes. It is safe for
// concurrent use.
type quota struct {
	limit int64
	n     atomic.Int64
}

func (q *quota) add(size int64) error {
	if n := q.n.Add(size + entryOverhead); q.limit > 0 && n > q.limit {
		return ErrOverLimit
	}
	return nil
}

// over reports whether the workspace passed the quota.
func (q *quota) over() bool { return q.limit > 0 && q.n.Load() > q.limit }

// snapshotTree builds the manifest of the workspace in dir, reusing the
// hashes of base's files whose stat key, size and mtime are unchanged and
// handing new contents to w.
func snapshotTree(ctx context.Context, dir string, base *Manifest, w *objectWriter, q *quota, onDenied func(string, error)) (*Manifest, error) {
	var prev map[string]*ManifestEntry
	if base != nil {
		prev = base.statIndex()
	}
	racyAfter := time.Now().Add(-racyWindow).UnixNano()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = w.wait() // large files are read again through root
		root.Close()
	}()
	entries, err := WalkTreeParallel(dir, walkWorkers, func(rel string, dirfd int, name string, st *unix.Stat_t) (*ManifestEntry, bool, error) {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		e := &ManifestEntry{Path: rel, Mode: st.Mode & KeptMode, MTime: st.Mtim.Nano()}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			e.Type = EntryDir
		case unix.S_IFLNK:
			target, err := ReadlinkAt(dirfd, name, st.Size)
			if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EINVAL) {
				return nil, false, nil // replaced or removed while we walked
			}
			if err != nil {
				return nil, false, fmt.Errorf("%s: %w", rel, err)
			}
			e.Type, e.Link = EntrySymlink, target
		case unix.S_IFREG:
			e.Type, e.Size = EntryFile, st.Size
			var sb [32]byte
			stat := appendStatKey(sb[:0], st)
			racy := e.MTime >= racyAfter || st.Ctim.Nano() >= racyAfter
			if p := prev[rel]; p != nil && p.Stat == string(stat) && p.Size == e.Size && p.MTime == e.MTime {
				// The base's strings, path included: the walk's own path
				// would be a second copy, held as long as this manifest.
				e.Path, e.Hash, e.Location, e.Stat, e.reused = p.Path, p.Hash, p.Location, p.Stat, true
				if racy {
					e.Stat = ""
				}
				break
			}
			if !racy {
				e.Stat = string(stat)
			}
			ok, err := hashTreeFile(dirfd, name, root, e, w)
			if errors.Is(err, syscall.EACCES) {
				onDenied(rel, err)
				return nil, false, nil
			}
			if err != nil {
				return nil, false, fmt.Errorf("%s: %w", rel, err)
			}
			if !ok {
				return nil, false, nil // removed while we walked
			}
		default:
			return nil, false, nil // sockets, FIFOs, devices: not workspace content
		}
		if err := q.add(e.Size); err != nil {
			return nil, false, err
		}
		return e, true, nil
	}, onDenied)
	if err != nil {
		return nil, err
	}
	// Pointers through the walk (its subtrees are spliced together),
	// values in the manifest.
	m := &Manifest{Entries: make([]ManifestEntry, len(entries))}
	for i, e := range entries {
		m.Entries[i] = *e
	}
	return m, nil
}

// appendStatKey appends a file's stat key: inode and change time. The
// change time cannot be set by a command, so a rewrite that restores a
// file's size and mtime still changes it.
func appendStatKey(b []byte, st *unix.Stat_t) []byte {
	b = strconv.AppendUint(b, st.Ino, 36)
	b = append(b, '.')
	return strconv.AppendInt(b, st.Ctim.Nano(), 36)
}

// hashTreeFile reads a file to hash it and hands it to w. It returns false
// for a file that vanished.
func hashTreeFile(dirfd int, name string, root *os.Root, e *ManifestEntry, w *objectWriter) (bool, error) {
	fd, err := Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NOCTTY)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ELOOP) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), e.Path)
	defer f.Close()
	if e.Size <= smallObject {
		data := make([]byte, e.Size+1)
		n, err := io.ReadFull(f, data)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return false, err
		}
		if int64(n) != e.Size {
			// Changed while we read: keep what we read, and read it again
			// next time.
			e.Size, e.Stat = min(int64(n), e.Size), ""
		}
		data = data[:e.Size]
		e.Hash = hashOf(data)
		w.addSmall(e.Hash, data)
		return true, nil
	}
	sum := sha256.New()
	n, err := io.CopyBuffer(sum, io.LimitReader(f, e.Size), make([]byte, 256<<10))
	if err != nil {
		return false, err
	}
	if n != e.Size {
		e.Size, e.Stat = n, ""
	}
	e.Hash = hex.EncodeToString(sum.Sum(nil))
	rel := e.Path
	w.addLarge(e.Hash, e.Size, func() (io.ReadCloser, error) {
		return root.OpenFile(rel, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	}, nil)
	return true, nil
}

// ReadlinkAt reads a symlink's target; size is its lstat size, a hint.
func ReadlinkAt(dirfd int, name string, size int64) (string, error) {
	n := max(int(size)+1, 128)
	for {
		buf := make([]byte, n)
		var got int
		err := RetryEINTR(func() error {
			var err error
			got, err = unix.Readlinkat(dirfd, name, buf)
			return err
		})
		if err != nil {
			return "", err
		}
		if got < n {
			return string(buf[:got]), nil
		}
		n *= 2
	}
}

// snapshotArchive builds the manifest of a workspace exported as a tar
// stream (any backend), handing new contents to w. Files larger than
// smallObject are spooled to a temporary file while they are hashed.
func snapshotArchive(ctx context.Context, r io.Reader, w *objectWriter, q *quota) (*Manifest, error) {
	tr := tar.NewReader(bufio.NewReaderSize(r, 1<<20))
	m := &Manifest{}
	at := map[string]int{}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return m, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		name, err := CheckArchiveName(hdr.Name)
		if err != nil {
			return nil, err
		}
		if name == "." {
			continue
		}
		e := ManifestEntry{Path: name, Mode: uint32(hdr.Mode) & KeptMode, MTime: hdr.ModTime.UnixNano()}
		switch hdr.Typeflag {
		case tar.TypeDir:
			e.Type = EntryDir
		case tar.TypeSymlink:
			if hdr.Linkname == "" {
				return nil, fmt.Errorf("%w: symlink %q without a target", ErrUnsafeArchive, name)
			}
			e.Type, e.Link = EntrySymlink, hdr.Linkname
		case tar.TypeLink:
			target, err := CheckHardlinkTarget(hdr.Name, hdr.Linkname)
			if err != nil {
				return nil, err
			}
			if i, ok := at[target]; !ok || m.Entries[i].Type != EntryFile {
				return nil, fmt.Errorf("%w: hard link %q to %q, which is not an earlier file", ErrUnsafeArchive, name, target)
			}
			e.Type, e.Link = EntryHardlink, target
		case tar.TypeReg:
			e.Type, e.Size = EntryFile, hdr.Size
			if err := hashArchiveFile(tr, &e, w); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		default:
			continue
		}
		if err := q.add(e.Size); err != nil {
			return nil, err
		}
		if i, ok := at[name]; ok {
			m.Entries[i] = e // a repeated name: the later entry wins
			continue
		}
		at[name] = len(m.Entries)
		m.Entries = append(m.Entries, e)
	}
}

func hashArchiveFile(r io.Reader, e *ManifestEntry, w *objectWriter) error {
	if e.Size <= smallObject {
		data := make([]byte, e.Size)
		if _, err := io.ReadFull(r, data); err != nil {
			return err
		}
		e.Hash = hashOf(data)
		w.addSmall(e.Hash, data)
		return nil
	}
	f, err := os.CreateTemp("", "sandbot-object-*")
	if err != nil {
		return err
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }
	sum := sha256.New()
	if _, err := io.CopyBuffer(io.MultiWriter(f, sum), io.LimitReader(r, e.Size), make([]byte, 256<<10)); err != nil {
		cleanup()
		return err
	}
	e.Hash = hex.EncodeToString(sum.Sum(nil))
	w.addLarge(e.Hash, e.Size, func() (io.ReadCloser, error) {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return io.NopCloser(f), nil
	}, cleanup)
	return nil
}

// writeManifestArchive writes the workspace a manifest describes as a tar
// stream, the form every backend's Import takes. Contents are fetched a
// few reads ahead of the writer (packed ones in ranged reads, see
// planSpans); every one is checked against its hash, and a corrupt one
// fails the stream (so Import, which only swaps a workspace in once its
// archive is whole, leaves the workspace as it was).
func writeManifestArchive(ctx context.Context, m *Manifest, store SnapshotStore, w io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The reads, in the order the archive needs them: a span of packed
	// contents, or one small content stored on its own. Large ones stream
	// when their turn comes.
	type unit struct {
		sp  *span
		own *ManifestEntry
	}
	var units []unit
	var run []*ManifestEntry
	flush := func() {
		for _, sp := range planSpans(run) {
			units = append(units, unit{sp: &sp})
		}
		run = nil
	}
	for i := range m.Entries {
		e := &m.Entries[i]
		switch {
		case e.Type != EntryFile:
		case e.Pack != "":
			run = append(run, e)
		case e.Size <= smallObject:
			flush()
			units = append(units, unit{own: e})
		}
	}
	flush()
	type result struct {
		data []byte
		err  error
	}
	ahead := make(chan chan result, putWorkers)
	go func() {
		defer close(ahead)
		for _, u := range units {
			ch := make(chan result, 1)
			select {
			case ahead <- ch:
			case <-ctx.Done():
				return
			}
			go func() {
				var r result
				if u.sp != nil {
					r.data, r.err = u.sp.read(ctx, store)
				} else {
					r.data, r.err = readObject(ctx, store, u.own.Hash, u.own.Size)
				}
				ch <- r
			}()
		}
	}()
	bw := bufio.NewWriterSize(w, 1<<20)
	tw := tar.NewWriter(bw)
	buf := make([]byte, 256<<10)
	next := 0 // the unit being written from
	var cur result
	item := 0
	have := false
	for i := range m.Entries {
		e := &m.Entries[i]
		hdr := &tar.Header{Name: e.Path, Mode: int64(e.Mode), ModTime: time.Unix(0, e.MTime)}
		switch e.Type {
		case EntryDir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.Path+"/"
		case EntrySymlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Link
		case EntryHardlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, e.Link
		case EntryFile:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if e.Type != EntryFile {
			continue
		}
		if e.Pack == "" && e.Size > smallObject {
			if err := streamObject(ctx, tw, store, e, buf); err != nil {
				return fmt.Errorf("file %q: %w", e.Path, err)
			}
			continue
		}
		if !have {
			ch, ok := <-ahead
			if !ok {
				return ctx.Err()
			}
			cur, have, item = <-ch, true, 0
			if cur.err != nil {
				return fmt.Errorf("file %q: %w", e.Path, cur.err)
			}
		}
		u := units[next]
		var content []byte
		var err error
		if u.sp != nil {
			content, err = u.sp.content(cur.data, u.sp.items[item])
			item++
			if item == len(u.sp.items) {
				have = false
				next++
			}
		} else {
			content = cur.data
			have = false
			next++
		}
		if err != nil {
			return fmt.Errorf("file %q: %w", e.Path, err)
		}
		if _, err := tw.Write(content); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// streamObject writes a large content from its own object.
func streamObject(ctx context.Context, w io.Writer, store SnapshotStore, e *ManifestEntry, buf []byte) error {
	r, err := openObject(ctx, store, e.Hash, e.Size)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.CopyBuffer(w, r, buf)
	return err
}
