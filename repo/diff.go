package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// FileStat is one changed path of a Diff.
type FileStat struct {
	// Path is relative to the roots, with forward slashes.
	Path string
	// Status is "added", "modified" or "deleted". A path that changed
	// type (a file that became a symlink) is "modified".
	Status string
	// Added and Deleted count lines; both are 0 for a binary file.
	Added, Deleted int
	Binary         bool
}

// Diff is the difference between two trees.
type Diff struct {
	// Files lists every changed path, sorted, whether or not its patch
	// fit under the cap.
	Files []FileStat
	// Added and Deleted total the lines of all of Files.
	Added, Deleted int
	// Patch is a git-style patch ("diff --git a/p b/p"), binary files in
	// git's --binary format, so that git apply can replay it.
	Patch string
	// Truncated says Patch was cut at the cap.
	Truncated bool
}

// Statuses of a FileStat.
const (
	StatusAdded    = "added"
	StatusModified = "modified"
	StatusDeleted  = "deleted"
)

// diffHeader starts each file's section of a patch.
const diffHeader = "diff --git "

// DiffDirs compares two directory trees, ignoring any .git directory at
// their roots (and in subdirectories), as a git-style patch with paths
// relative to the roots ("a/src/x.go" / "b/src/x.go"), binary-safe (git's
// --binary format), new and deleted files included, capped at maxPatch
// bytes (0 or less: no cap): when cut, it is cut at a file boundary where
// possible (else at a line boundary) and Truncated is set (Files and totals
// always cover everything).
//
// Only regular files and symlinks are compared; symlinks are compared by
// target and never followed. The trees are read as data: the changed
// entries are copied into a scratch pair of trees that git diff --no-index
// compares outside any repository, so no .git, .gitattributes driver or
// config in the trees takes part, and --no-ext-diff --no-textconv rule out
// external programs even if a driver were configured.
func (g Git) DiffDirs(ctx context.Context, oldDir, newDir string, maxPatch int) (Diff, error) {
	oldTree, err := readTree(oldDir)
	if err != nil {
		return Diff{}, err
	}
	defer oldTree.close()
	newTree, err := readTree(newDir)
	if err != nil {
		return Diff{}, err
	}
	defer newTree.close()

	changes, err := compareTrees(oldTree, newTree)
	if err != nil || len(changes) == 0 {
		return Diff{}, err
	}

	s, err := g.newRunner("", "", Auth{})
	if err != nil {
		return Diff{}, err
	}
	defer s.close()
	work := filepath.Join(s.base, "diff")
	for _, side := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(work, side), 0o700); err != nil {
			return Diff{}, fmt.Errorf("repo: diff: %w", err)
		}
	}
	for _, c := range changes {
		if c.old != nil {
			if err := oldTree.place(c.path, c.old, filepath.Join(work, "a")); err != nil {
				return Diff{}, err
			}
		}
		if c.new != nil {
			if err := newTree.place(c.path, c.new, filepath.Join(work, "b")); err != nil {
				return Diff{}, err
			}
		}
	}

	common := []string{"diff", "--no-index", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color"}
	t := target{op: "diff"}
	num, xe, err := s.invoke(ctx, call{args: append(append([]string{}, common...), "--numstat", "-z", "a", "b"), dir: work, t: t})
	if err != nil {
		return Diff{}, err
	}
	if xe != nil && xe.code != 1 {
		return Diff{}, classify(t, xe.stderr, xe.err)
	}
	stats := parseNumstat(num)

	var d Diff
	for _, c := range changes {
		st := stats[c.path]
		f := FileStat{Path: c.path, Status: c.status(), Added: st.added, Deleted: st.deleted, Binary: st.binary}
		d.Files = append(d.Files, f)
		d.Added += f.Added
		d.Deleted += f.Deleted
	}

	w := &patchBuf{limit: maxPatch}
	if err := s.patch(ctx, call{args: append(append([]string{}, common...), "--binary", "--no-prefix", "a", "b"), dir: work, t: t}, w); err != nil {
		return Diff{}, err
	}
	p := w.buf
	if maxPatch > 0 && (w.full || len(p) > maxPatch) {
		p, d.Truncated = cutPatch(p, maxPatch), true
	}
	d.Patch = string(fixHeaders(p))
	return d, nil
}

// patch runs the patch-producing diff into w, which may stop reading
// once it holds enough: git then dies of a broken pipe, which is not a
// failure. Exit status 1 is "there were differences".
func (s *runner) patch(ctx context.Context, c call, w *patchBuf) error {
	cmd := s.command(ctx, c)
	cmd.Stdout = w
	stderr := &tailBuffer{max: maxStderr}
	cmd.Stderr = stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("repo: git diff: %w", context.Cause(ctx))
	case w.full:
		return nil
	case errors.As(err, &ee) && ee.Exited() && ee.ExitCode() == 1:
		return nil
	case errors.As(err, &ee) && ee.Exited():
		return classify(c.t, s.scrub.Redact(stderr.String()), err)
	}
	return fmt.Errorf("repo: git diff: %s", s.scrub.Redact(err.Error()))
}

// errPatchFull stops git's output once the cap is reached.
var errPatchFull = errors.New("patch cap reached")

// patchBuf collects a patch up to a little past its cap: enough to see
// whether a file's header starts right at the cap.
type patchBuf struct {
	buf   []byte
	limit int // <= 0: no cap
	full  bool
}

func (w *patchBuf) Write(p []byte) (int, error) {
	if w.limit <= 0 {
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	room := w.limit + len(diffHeader) - len(w.buf)
	if len(p) > room {
		w.buf = append(w.buf, p[:room]...)
		w.full = true
		return room, errPatchFull
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// cutPatch cuts p to at most limit bytes: before the last file header
// that starts within the limit, or, when even the first file does not fit,
// after the last whole line.
func cutPatch(p []byte, limit int) []byte {
	window := p[:min(len(p), limit+len(diffHeader))]
	if i := bytes.LastIndex(window, []byte("\n"+diffHeader)); i >= 0 {
		return p[:i+1]
	}
	if i := bytes.LastIndexByte(p[:min(len(p), limit)], '\n'); i >= 0 {
		return p[:i+1]
	}
	return p[:min(len(p), limit)]
}

// fixHeaders corrects git diff --no-index's header for a file on one side
// only, which names that side twice ("diff --git b/new b/new", "diff
// --git a/gone a/gone"), to git's usual form ("diff --git a/new b/new"),
// so the patch reads and applies like one from a repository. The two are
// the same length, so this is safe after a cut. No other line of a patch
// can start with the header: hunk lines start with " +-\\" and binary
// lines are base85, which has no space.
func fixHeaders(p []byte) []byte {
	out := p
	for off := 0; off < len(out); {
		end := bytes.IndexByte(out[off:], '\n')
		line := out[off:]
		if end >= 0 {
			line = out[off : off+end]
		}
		if rest, ok := bytes.CutPrefix(line, []byte(diffHeader)); ok && len(rest)%2 == 1 {
			n := len(rest) / 2
			first, second := rest[:n], rest[n+1:]
			if rest[n] == ' ' && bytes.Equal(first, second) {
				fixSide(first, 'b', 'a')  // new file: a/ on the left
				fixSide(second, 'a', 'b') // deleted file: b/ on the right
			}
		}
		if end < 0 {
			break
		}
		off += end + 1
	}
	return out
}

// fixSide rewrites, in place, a name's side prefix from one letter to
// another: "b/x" or a quoted "\"b/x\"".
func fixSide(name []byte, from, to byte) {
	i := 0
	if len(name) > 0 && name[0] == '"' {
		i = 1
	}
	if len(name) > i+1 && name[i] == from && name[i+1] == '/' {
		name[i] = to
	}
}

// lineStat is one path's numstat.
type lineStat struct {
	added, deleted int
	binary         bool
}

// parseNumstat reads git diff --numstat -z output, keyed by the path
// under the a/ or b/ tree. A path whose type changed appears twice (a
// deletion and an addition) and is summed.
func parseNumstat(out []byte) map[string]lineStat {
	stats := map[string]lineStat{}
	toks := strings.Split(string(out), "\x00")
	for i := 0; i < len(toks); i++ {
		rec := toks[i]
		if rec == "" {
			continue
		}
		f := strings.SplitN(rec, "\t", 3)
		if len(f) != 3 {
			continue
		}
		names := []string{f[2]}
		if f[2] == "" && i+2 < len(toks) {
			names = []string{toks[i+1], toks[i+2]}
			i += 2
		}
		path := ""
		for _, n := range names {
			if p, ok := strings.CutPrefix(n, "a/"); ok {
				path = p
			} else if p, ok := strings.CutPrefix(n, "b/"); ok {
				path = p
			}
		}
		if path == "" {
			continue
		}
		st := stats[path]
		if f[0] == "-" || f[1] == "-" {
			st.binary = true
		} else {
			a, _ := strconv.Atoi(f[0])
			d, _ := strconv.Atoi(f[1])
			st.added += a
			st.deleted += d
		}
		stats[path] = st
	}
	return stats
}

// entry is a file or symlink of a tree.
type entry struct {
	link string // symlink target; "" for a file
	exec bool
	info fs.FileInfo
}

func (e *entry) isLink() bool { return e.info.Mode()&fs.ModeSymlink != 0 }

// change is one path that differs; old or new is nil on the side where it
// does not exist.
type change struct {
	path     string
	old, new *entry
}

func (c change) status() string {
	switch {
	case c.old == nil:
		return StatusAdded
	case c.new == nil:
		return StatusDeleted
	}
	return StatusModified
}

// tree is one side of a diff: its entries, read through an os.Root so no
// symlink inside it (even one swapped in while it is read) leads out.
type tree struct {
	root    *os.Root
	entries map[string]*entry
}

func (t *tree) close() { _ = t.root.Close() }

// readTree lists the files and symlinks under dir, skipping every entry
// named .git and anything that is neither (sockets, devices, fifos).
func readTree(dir string) (*tree, error) {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("repo: diff: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("repo: diff: %w", err)
	}
	t := &tree{root: root, entries: map[string]*entry{}}
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch typ := d.Type(); {
		case typ.IsDir():
			return nil
		case typ&fs.ModeSymlink != 0:
			target, err := root.Readlink(p)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			t.entries[p] = &entry{link: target, info: info}
		case typ.IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			t.entries[p] = &entry{exec: info.Mode()&0o100 != 0, info: info}
		}
		return nil
	})
	if err != nil {
		t.close()
		return nil, fmt.Errorf("repo: diff: read %s: %w", dir, err)
	}
	return t, nil
}

// compareTrees lists the paths that differ, sorted.
func compareTrees(a, b *tree) ([]change, error) {
	paths := make(map[string]bool, len(b.entries))
	for p := range a.entries {
		paths[p] = true
	}
	for p := range b.entries {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	var out []change
	for _, p := range sorted {
		o, n := a.entries[p], b.entries[p]
		if o != nil && n != nil {
			same, err := equalEntry(a, b, p, o, n)
			if err != nil {
				return nil, err
			}
			if same {
				continue
			}
		}
		out = append(out, change{path: p, old: o, new: n})
	}
	return out, nil
}

// equalEntry compares what git would: type, executable bit, and content
// (a symlink's target).
func equalEntry(a, b *tree, p string, o, n *entry) (bool, error) {
	if o.isLink() != n.isLink() || o.exec != n.exec {
		return false, nil
	}
	if o.isLink() {
		return o.link == n.link, nil
	}
	if o.info.Size() != n.info.Size() {
		return false, nil
	}
	if os.SameFile(o.info, n.info) {
		return true, nil
	}
	fa, err := openFile(a.root, p)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := openFile(b.root, p)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	return sameContent(fa, fb)
}

// sameContent compares two readers to their ends.
func sameContent(a, b io.Reader) (bool, error) {
	const chunk = 64 << 10
	ba, bb := make([]byte, chunk), make([]byte, chunk)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		doneA := errors.Is(ea, io.EOF) || errors.Is(ea, io.ErrUnexpectedEOF)
		doneB := errors.Is(eb, io.EOF) || errors.Is(eb, io.ErrUnexpectedEOF)
		switch {
		case ea != nil && !doneA:
			return false, fmt.Errorf("repo: diff: %w", ea)
		case eb != nil && !doneB:
			return false, fmt.Errorf("repo: diff: %w", eb)
		case doneA || doneB:
			return doneA && doneB, nil
		}
	}
}

// openFile opens a regular file of an untrusted tree for reading: never
// through a symlink, never blocking on a fifo swapped in for it.
func openFile(root *os.Root, p string) (*os.File, error) {
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("repo: open %s: %w", p, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("repo: open %s: not a regular file", p)
	}
	return f, nil
}

// place copies the entry at p into the scratch tree dst: a file with its
// executable bit, a symlink as a symlink to the same target.
func (t *tree) place(p string, e *entry, dst string) error {
	to := filepath.Join(dst, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return fmt.Errorf("repo: diff: %w", err)
	}
	if e.isLink() {
		if err := os.Symlink(e.link, to); err != nil {
			return fmt.Errorf("repo: diff: %w", err)
		}
		return nil
	}
	src, err := openFile(t.root, p)
	if err != nil {
		return err
	}
	defer src.Close()
	mode := os.FileMode(0o600)
	if e.exec {
		mode = 0o700
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("repo: diff: %w", err)
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return fmt.Errorf("repo: diff: copy %s: %w", p, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("repo: diff: %w", err)
	}
	return nil
}
