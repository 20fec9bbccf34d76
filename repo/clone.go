package repo

import (
	"context"
	"errors"
	"fmt"
	"github.com/sandbot/sandbot/sandbox"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CloneOptions says what Clone fetches.
type CloneOptions struct {
	// URL is an https://, http:// (tests), ssh or file:// URL without
	// credentials; a URL holding user:password@ (or a token as the user
	// name) is refused with ErrBadURL.
	URL string
	// Branch is the branch (or tag) to check out; "" is the remote's
	// default branch.
	Branch string
	// Depth is how many commits of history to fetch: 0 is the full
	// history, 1 a shallow clone (the default the caller picks: agents
	// rarely need history, and it is most of a large repository's size).
	Depth int
	// Submodules also clones the submodules, with the same Auth (which
	// only reaches those on the URL's host) and, when Depth > 0, shallow.
	Submodules bool
	// MaxBytes caps the checkout's size, the files in the work tree plus
	// .git; 0 is no cap.
	MaxBytes int64
	// Auth authenticates the clone; the zero Auth is anonymous.
	Auth Auth
}

// CloneInfo describes a finished clone.
type CloneInfo struct {
	// Commit is the commit checked out ("" for an empty repository).
	Commit string
	// Branch is the branch checked out ("" when a tag was asked for and
	// HEAD is detached).
	Branch string
	// Files counts the files and symlinks of the work tree, outside any
	// .git.
	Files int
	// Bytes is the checkout's size: the work tree plus .git.
	Bytes int64
	// Shallow says the history was cut (Depth > 0 and there was more).
	Shallow bool
}

// sizePoll is how often Clone measures a clone in progress against
// MaxBytes. It is protection, not the limit's definition: the final
// measurement is what decides.
const sizePoll = 250 * time.Millisecond

// Clone clones into dir (must not exist or be empty) and leaves a checkout
// the agent can use with git status/diff/log and no credential anywhere:
// .git/config holds the remote URL only, no extraheader, no credential
// helper; the hooks directory is emptied (so nothing the worker's git
// placed there runs later in the sandbox).
//
// MaxBytes is enforced twice: a clone growing past it is stopped early,
// and the finished checkout is measured. Either way, dir's content is
// removed and an *Error of kind ErrTooBig gives the size and the cap. On
// any other failure dir's content is removed too (and dir itself if Clone
// created it), so a retry can use the same dir.
func (g Git) Clone(ctx context.Context, dir string, o CloneOptions) (CloneInfo, error) {
	if err := checkURL(o.URL); err != nil {
		return CloneInfo{}, err
	}
	if o.Depth < 0 || o.MaxBytes < 0 {
		return CloneInfo{}, fmt.Errorf("repo: clone: negative depth (%d) or size cap (%d)", o.Depth, o.MaxBytes)
	}
	if err := checkBranchArg(o.Branch); err != nil {
		return CloneInfo{}, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return CloneInfo{}, fmt.Errorf("repo: clone: %w", err)
	}
	existed, err := emptyDir(dir)
	if err != nil {
		return CloneInfo{}, err
	}
	s, err := g.newRunner("", o.URL, o.Auth)
	if err != nil {
		return CloneInfo{}, err
	}
	defer s.close()

	info, err := s.clone(ctx, dir, o)
	if err != nil {
		discard(dir, existed)
		return CloneInfo{}, err
	}
	return info, nil
}

func (s *runner) clone(ctx context.Context, dir string, o CloneOptions) (CloneInfo, error) {
	t := target{op: "clone", url: o.URL, branch: o.Branch}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := watchSize(cctx, cancel, dir, o.MaxBytes)
	_, err := s.run(cctx, call{args: cloneArgs(dir, o), t: t})
	stop()
	if err != nil {
		var over *overCap
		if errors.As(context.Cause(cctx), &over) {
			return CloneInfo{}, tooBig(over.size, o.MaxBytes, true)
		}
		return CloneInfo{}, err
	}

	gitDir := filepath.Join(dir, ".git")
	if err := s.sanitize(gitDir); err != nil {
		return CloneInfo{}, err
	}
	var info CloneInfo
	info.Bytes, info.Files, err = measure(dir)
	if err != nil {
		return CloneInfo{}, fmt.Errorf("repo: clone: measure checkout: %w", err)
	}
	if o.MaxBytes > 0 && info.Bytes > o.MaxBytes {
		return CloneInfo{}, tooBig(info.Bytes, o.MaxBytes, false)
	}
	if info.Commit, err = s.optional(ctx, t, gitDir, "rev-parse", "--verify", "--quiet", "HEAD"); err != nil {
		return CloneInfo{}, err
	}
	if info.Branch, err = s.optional(ctx, t, gitDir, "symbolic-ref", "--quiet", "--short", "HEAD"); err != nil {
		return CloneInfo{}, err
	}
	sh, err := s.run(ctx, call{args: []string{"--git-dir=" + gitDir, "rev-parse", "--is-shallow-repository"}, t: t})
	if err != nil {
		return CloneInfo{}, err
	}
	info.Shallow = strings.TrimSpace(string(sh)) == "true"
	return info, nil
}

// cloneArgs is the argv of the clone itself. It never holds the Auth: that
// is in the environment only.
func cloneArgs(dir string, o CloneOptions) []string {
	args := []string{"clone", "--quiet"}
	if o.Depth > 0 {
		args = append(args, "--depth="+strconv.Itoa(o.Depth))
	}
	if o.Branch != "" {
		args = append(args, "--branch="+o.Branch)
	}
	if o.Submodules {
		args = append(args, "--recurse-submodules")
		if o.Depth > 0 {
			args = append(args, "--shallow-submodules")
		}
	}
	return append(args, "--", o.URL, dir)
}

// optional runs a query whose "no answer" is exit status 1 (rev-parse of
// an unborn HEAD, symbolic-ref of a detached one) and returns its trimmed
// output, "" for no answer.
func (s *runner) optional(ctx context.Context, t target, gitDir string, args ...string) (string, error) {
	out, xe, err := s.invoke(ctx, call{args: append([]string{"--git-dir=" + gitDir}, args...), t: t})
	switch {
	case err != nil:
		return "", err
	case xe != nil && xe.code == 1:
		return "", nil
	case xe != nil:
		return "", classify(t, xe.stderr, xe.err)
	}
	return strings.TrimSpace(string(out)), nil
}

// sanitize empties the hooks directory of the clone's git dir and of every
// submodule's under .git/modules, and makes sure no config file there
// holds the credential. The credential only ever travelled in the
// environment, so finding it means something in git changed: the checkout
// is refused rather than handed to the agent.
func (s *runner) sanitize(gitDir string) error {
	if err := clearDir(filepath.Join(gitDir, "hooks")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("repo: clone: empty hooks: %w", err)
	}
	cfg, err := os.ReadFile(filepath.Join(gitDir, "config"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("repo: clone: read config: %w", err)
	}
	if s.scrub.Redact(string(cfg)) != string(cfg) {
		return &Error{Kind: ErrGit, Msg: "The clone was discarded: a credential ended up in its git config."}
	}
	// A submodule's name may hold slashes, so its git dir can be at any
	// depth under modules/; each is recognised by its HEAD.
	mods := filepath.Join(gitDir, "modules")
	err = filepath.WalkDir(mods, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || p == mods {
			return nil
		}
		if _, err := os.Lstat(filepath.Join(p, "HEAD")); err != nil {
			return nil
		}
		if err := s.sanitize(p); err != nil {
			return err
		}
		return fs.SkipDir
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// checkBranchArg refuses a branch that git could read as an option or
// that no ref name can be; the rest is git's to judge.
func checkBranchArg(b string) error {
	if b == "" {
		return nil
	}
	if strings.HasPrefix(b, "-") || strings.Contains(b, "..") || strings.ContainsAny(b, " ~^:?*[\\\x7f") || strings.IndexFunc(b, func(r rune) bool { return r < 0x20 }) >= 0 {
		return &Error{Kind: ErrBranchNotFound, Msg: fmt.Sprintf("%q is not a valid branch name.", b)}
	}
	return nil
}

// emptyDir checks that dir does not exist or is an empty directory, and
// says whether it existed.
func emptyDir(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("repo: clone: %w", err)
	case len(entries) > 0:
		return true, fmt.Errorf("repo: clone: %s is not empty", dir)
	}
	return true, nil
}

// discard removes what a failed clone left: dir's content, or dir itself
// when the clone created it.
func discard(dir string, existed bool) {
	if existed {
		_ = clearDir(dir)
		return
	}
	_ = os.RemoveAll(dir)
}

// clearDir removes everything in dir, keeping dir.
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}

// measure sizes a checkout: the bytes of every file and symlink under dir
// (.git included), and how many files and symlinks lie outside any .git.
func measure(dir string) (int64, int, error) {
	var (
		size  int64
		files int
	)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		size += fi.Size()
		if !inGitDir(dir, p) {
			files++
		}
		return nil
	})
	return size, files, err
}

// inGitDir reports whether p (under root) has a .git component.
func inGitDir(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	for _, c := range strings.Split(filepath.ToSlash(rel), "/") {
		if c == ".git" {
			return true
		}
	}
	return false
}

// overCap is the cause a clone is cancelled with when it outgrows its cap.
type overCap struct{ size int64 }

func (o *overCap) Error() string { return "clone over its size cap at " + formatBytes(o.size) }

// watchSize measures dir every sizePoll until stop is called, and cancels
// ctx with an *overCap when dir grows past limit. It measures loosely
// (files vanish under it while git works) because the final measurement is
// what decides.
func watchSize(ctx context.Context, cancel context.CancelCauseFunc, dir string, limit int64) (stop func()) {
	if limit <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(sizePoll)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if n := looseSize(dir); n > limit {
					cancel(&overCap{size: n})
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// looseSize sums what it can of dir, skipping whatever errs.
func looseSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// tooBig is the ErrTooBig of a checkout of size bytes against limit;
// early says the clone was stopped on the way, so size is a lower bound.
func tooBig(size, limit int64, early bool) *Error {
	at := ""
	if early {
		at = "at least "
	}
	return &Error{
		Kind: ErrTooBig,
		Msg: fmt.Sprintf("The repository takes %s%s once checked out, over the %s limit: ask for a shallow clone, or for a smaller repository.",
			at, formatBytes(size), formatBytes(limit)),
	}
}

// formatBytes renders n for a chat message, with the exact byte count
// alongside (so two sizes close to each other stay tellable).
func formatBytes(n int64) string {
	if n < 1024 {
		return sandbox.FormatBytes(n)
	}
	return fmt.Sprintf("%s (%d bytes)", sandbox.FormatBytes(n), n)
}
