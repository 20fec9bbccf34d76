package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// treeEntry is what a walk of a live workspace finds at one path.
type treeEntry struct {
	typ   byte
	mode  uint32
	size  int64
	mtime int64
	stat  string
	link  string
}

// applyTree makes the workspace in dir equal to target, writing only what
// differs: entries missing from target are removed, files whose content
// differs are replaced, and modes and times are set. current, when known,
// is the manifest the workspace was last saved as; its hashes spare
// reading files whose stat key is unchanged (others of the right size are
// read and hashed).
//
// Every object to be written is fetched into staging and checked against
// its hash before the workspace is touched, so a corrupt or missing object
// fails the restore with the workspace as it was. The writes go through
// os.Root, parents before children, so nothing lands outside dir whatever
// the workspace held.
func applyTree(ctx context.Context, dir, staging string, target, current *Manifest, store SnapshotStore) (written int, err error) {
	isDir := map[string]bool{".": true}
	want := make(map[string]*ManifestEntry, len(target.Entries))
	for i := range target.Entries {
		e := &target.Entries[i]
		if !isDir[path.Dir(e.Path)] {
			return 0, fmt.Errorf("%w: %q is not inside a directory of the manifest", ErrBadManifest, e.Path)
		}
		if e.Type == EntryDir {
			isDir[e.Path] = true
		}
		want[e.Path] = e
	}
	known := map[string]string{}
	if current != nil {
		for _, e := range current.Entries {
			if e.Type == EntryFile && e.Stat != "" {
				known[e.Path+"\x00"+e.Stat+"\x00"+strconv.FormatInt(e.Size, 10)+"\x00"+strconv.FormatInt(e.MTime, 10)] = e.Hash
			}
		}
	}
	cur := map[string]treeEntry{}
	err = WalkTree(dir, func(rel string, dirfd int, name string, st *unix.Stat_t) error {
		t := treeEntry{mode: st.Mode & KeptMode, size: st.Size, mtime: st.Mtim.Nano()}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			t.typ = EntryDir
		case unix.S_IFREG:
			t.typ = EntryFile
			t.stat = string(appendStatKey(nil, st))
		case unix.S_IFLNK:
			t.typ = EntrySymlink
			t.link, _ = ReadlinkAt(dirfd, name, st.Size)
		default:
			t.typ = '?'
		}
		cur[rel] = t
		if t.typ == EntryDir && want[rel] == nil {
			return ErrSkipDir // removed whole
		}
		return nil
	}, func(string, error) {})
	if err != nil {
		return 0, fmt.Errorf("list the workspace: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer root.Close()

	// Plan.
	var remove []string
	for p, t := range cur {
		w := want[p]
		if w == nil || w.Type != t.typ && !(w.Type == EntryHardlink && t.typ == EntryFile) {
			remove = append(remove, p)
		}
	}
	var fetch []*ManifestEntry
	for i := range target.Entries {
		e := &target.Entries[i]
		if e.Type != EntryFile {
			continue
		}
		t, ok := cur[e.Path]
		if ok && t.typ == EntryFile && t.size == e.Size {
			h := known[e.Path+"\x00"+t.stat+"\x00"+strconv.FormatInt(t.size, 10)+"\x00"+strconv.FormatInt(t.mtime, 10)]
			if h == "" {
				h, _ = hashFileIn(root, e.Path)
			}
			if h == e.Hash {
				continue
			}
		}
		fetch = append(fetch, e)
	}

	// Fetch and check every new content before touching the workspace.
	stage, err := os.MkdirTemp(staging, ".restore-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(stage)
	staged := make(map[string]string, len(fetch))
	for i, e := range fetch {
		staged[e.Path] = stagedName(stage, i)
	}
	if err := fetchAll(ctx, store, fetch, staged); err != nil {
		return 0, fmt.Errorf("fetch %d changed files: %w", len(fetch), err)
	}
	stageDir, err := os.Open(stage)
	if err != nil {
		return 0, err
	}
	defer stageDir.Close()

	// Apply: removals, then entries parents first, then modes and times.
	slices.Sort(remove)
	gone := map[string]bool{}
	under := func(p string) bool {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if gone[d] {
				return true
			}
		}
		return false
	}
	for _, p := range remove {
		if under(p) {
			continue
		}
		if err := removeInRoot(root, p); err != nil {
			return 0, fmt.Errorf("remove %q: %w", p, err)
		}
		gone[p] = true
		written++
	}
	for p := range cur {
		if gone[p] || under(p) {
			delete(cur, p)
		}
	}
	for p, t := range cur {
		if t.typ == EntryDir && t.mode&0o200 == 0 {
			if err := root.Chmod(p, 0o700); err != nil { // writable until the end
				return 0, fmt.Errorf("entry %q: %w", p, err)
			}
		}
	}
	for i := range target.Entries {
		e := &target.Entries[i]
		t, had := cur[e.Path]
		if err := ctx.Err(); err != nil {
			return written, err
		}
		var err error
		switch e.Type {
		case EntryDir:
			if !had {
				err = root.Mkdir(e.Path, 0o700)
			}
		case EntryFile:
			if name, ok := staged[e.Path]; ok {
				err = renameInto(root, stageDir, path.Base(name), e.Path)
				had = false
				written++
			}
		case EntrySymlink:
			if !had || t.link != e.Link {
				if err = removeInRoot(root, e.Path); err == nil {
					err = root.Symlink(e.Link, e.Path)
				}
				had = false
				written++
			}
		case EntryHardlink:
			if err = removeInRoot(root, e.Path); err == nil {
				err = root.Link(e.Link, e.Path)
			}
			written++
			if err != nil {
				return written, fmt.Errorf("entry %q: %w", e.Path, err)
			}
			continue // a hard link shares its file's mode and times
		}
		if err == nil && e.Type == EntryFile {
			err = setMeta(root, e, t, had)
		}
		if err == nil && e.Type == EntrySymlink && (!had || t.mtime != e.MTime) {
			err = lchtimesIn(root, e.Path, e.MTime)
		}
		if err != nil {
			return written, fmt.Errorf("entry %q: %w", e.Path, err)
		}
	}
	// Directories last, deepest first: creating children changes a
	// directory's mtime, and a read-only directory must not block its own.
	var dirs []*ManifestEntry
	for i := range target.Entries {
		if e := &target.Entries[i]; e.Type == EntryDir {
			dirs = append(dirs, e)
		}
	}
	slices.SortFunc(dirs, func(a, b *ManifestEntry) int { return strings.Count(b.Path, "/") - strings.Count(a.Path, "/") })
	for _, e := range dirs {
		if err := setMeta(root, e, treeEntry{}, false); err != nil {
			return written, fmt.Errorf("entry %q: %w", e.Path, err)
		}
	}
	return written, nil
}

func stagedName(dir string, i int) string { return dir + "/" + strconv.Itoa(i) }

// fetchAll writes the checked content of every entry into the file staged
// names for it: packed contents pack by pack in ranged reads (see
// planSpans), the others object by object, a few at a time.
func fetchAll(ctx context.Context, store SnapshotStore, fetch []*ManifestEntry, staged map[string]string) error {
	var packedItems, own []*ManifestEntry
	for _, e := range fetch {
		if e.Pack != "" {
			packedItems = append(packedItems, e)
		} else {
			own = append(own, e)
		}
	}
	slices.SortFunc(packedItems, func(a, b *ManifestEntry) int {
		if c := strings.Compare(a.Pack, b.Pack); c != 0 {
			return c
		}
		return int(a.Offset - b.Offset)
	})
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(putWorkers)
	for _, sp := range planSpans(packedItems) {
		g.Go(func() error {
			data, err := sp.read(gctx, store)
			if err != nil {
				return err
			}
			for _, e := range sp.items {
				content, err := sp.content(data, e)
				if err != nil {
					return err
				}
				if err := os.WriteFile(staged[e.Path], content, 0o600); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for _, e := range own {
		g.Go(func() error { return fetchTo(gctx, store, e, staged[e.Path]) })
	}
	return g.Wait()
}

// fetchTo writes a checked content stored as an object of its own into a
// new file.
func fetchTo(ctx context.Context, store SnapshotStore, e *ManifestEntry, name string) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := openObject(ctx, store, e.Hash, e.Size)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := io.CopyBuffer(writerOnly{f}, r, make([]byte, 256<<10)); err != nil {
		return err
	}
	return f.Close()
}

// writerOnly hides an *os.File's ReaderFrom so io.CopyBuffer uses our
// buffer.
type writerOnly struct{ io.Writer }

// hashFileIn hashes a regular file of the workspace.
func hashFileIn(root *os.Root, name string) (string, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum := newHash()
	if _, err := io.CopyBuffer(sum, f, make([]byte, 256<<10)); err != nil {
		return "", err
	}
	return hexSum(sum), nil
}

// removeInRoot removes an entry and, for a directory, everything in it.
// A missing entry is not an error.
func removeInRoot(root *os.Root, name string) error {
	err := root.RemoveAll(name)
	if err != nil && errors.Is(err, fs.ErrPermission) {
		// A directory a command made read-only: open it up and retry.
		_ = fs.WalkDir(root.FS(), name, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = root.Chmod(p, 0o700)
			}
			return nil
		})
		err = root.RemoveAll(name)
	}
	return err
}

// renameInto moves a staged file into the workspace at name, replacing
// what is there. The parent is opened through the root, so the move
// cannot leave it.
func renameInto(root *os.Root, stage *os.File, staged, name string) error {
	parent, err := root.Open(path.Dir(name))
	if err != nil {
		return err
	}
	defer parent.Close()
	return RetryEINTR(func() error {
		return unix.Renameat(int(stage.Fd()), staged, int(parent.Fd()), path.Base(name))
	})
}

// setMeta sets an entry's mode and mtime unless the workspace already has
// them (had: t is what is there).
func setMeta(root *os.Root, e *ManifestEntry, t treeEntry, had bool) error {
	if !had || t.mode != e.Mode {
		if err := root.Chmod(e.Path, fileMode(e.Mode)); err != nil {
			return err
		}
	}
	if !had || t.mtime != e.MTime {
		mt := time.Unix(0, e.MTime)
		return root.Chtimes(e.Path, mt, mt)
	}
	return nil
}

// fileMode turns manifest mode bits into an fs.FileMode.
func fileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// lchtimesIn sets a symlink's own mtime (os.Root has no Lchtimes).
func lchtimesIn(root *os.Root, name string, mtime int64) error {
	parent, err := root.Open(path.Dir(name))
	if err != nil {
		return err
	}
	defer parent.Close()
	ts := []unix.Timespec{unix.NsecToTimespec(mtime), unix.NsecToTimespec(mtime)}
	return unix.UtimesNanoAt(int(parent.Fd()), path.Base(name), ts, unix.AT_SYMLINK_NOFOLLOW)
}
