package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// errKind returns err's *Error kind, failing when err is not one.
func errKind(t testing.TB, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *Error", err, err)
	}
	return e
}

// assertEmptyDir fails unless dir is absent or empty.
func assertEmptyDir(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if len(entries) > 0 {
		t.Errorf("%s still holds %d entries", dir, len(entries))
	}
}

// assertUsable checks that plain git works in a checkout as an agent
// would use it, and that the checkout carries no hooks.
func assertUsable(t testing.TB, dir string, commits int) {
	t.Helper()
	if st := tgit(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("git status in the fresh checkout: %q", st)
	}
	if n := len(strings.Split(tgit(t, dir, "log", "--format=%H"), "\n")); n != commits {
		t.Errorf("git log shows %d commits, want %d", n, commits)
	}
	tgit(t, dir, "diff", "--exit-code")
	hooks, err := os.ReadDir(filepath.Join(dir, ".git", "hooks"))
	if err != nil || len(hooks) != 0 {
		t.Errorf(".git/hooks = %v, %v; want an empty directory", hooks, err)
	}
}

func TestCloneShallow(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	dir := filepath.Join(t.TempDir(), "ws")
	info, err := Git{}.Clone(context.Background(), dir, CloneOptions{URL: o.url, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := CloneInfo{Commit: o.main[2], Branch: "main", Files: 5, Shallow: true, Bytes: info.Bytes}
	if info != want {
		t.Errorf("info = %+v, want %+v", info, want)
	}
	if info.Bytes <= 0 {
		t.Errorf("Bytes = %d", info.Bytes)
	}
	if n := tgit(t, dir, "rev-list", "--count", "HEAD"); n != "1" {
		t.Errorf("rev-list --count = %s, want 1", n)
	}
	assertUsable(t, dir, 1)
	if got := tgit(t, dir, "config", "--local", "--get", "remote.origin.url"); got != o.url {
		t.Errorf("remote.origin.url = %q", got)
	}
}

func TestCloneFull(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	dir := filepath.Join(t.TempDir(), "ws")
	info, err := Git{}.Clone(context.Background(), dir, CloneOptions{URL: o.url})
	if err != nil {
		t.Fatal(err)
	}
	if info.Shallow || info.Commit != o.main[2] || info.Branch != "main" {
		t.Errorf("info = %+v", info)
	}
	assertUsable(t, dir, 3)
	// A full clone has the other branches too.
	if got := tgit(t, dir, "rev-parse", "origin/feature"); got != o.feature {
		t.Errorf("origin/feature = %s, want %s", got, o.feature)
	}
}

func TestCloneBranch(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	dir := t.TempDir() // exists and is empty: allowed
	info, err := Git{}.Clone(context.Background(), dir, CloneOptions{URL: o.url, Branch: "feature", Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	if info.Commit != o.feature || info.Branch != "feature" || !info.Shallow || info.Files != 6 {
		t.Errorf("info = %+v, want feature at %s", info, o.feature)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "feature.txt")); err != nil || string(b) != "feature\n" {
		t.Errorf("feature.txt = %q, %v", b, err)
	}
	assertUsable(t, dir, 1)
}

func TestCloneMissingBranch(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	dir := filepath.Join(t.TempDir(), "ws")
	_, err := Git{}.Clone(context.Background(), dir, CloneOptions{URL: o.url, Branch: "nope", Depth: 1})
	e := errKind(t, err)
	if e.Kind != ErrBranchNotFound || !strings.Contains(e.Msg, `"nope"`) {
		t.Errorf("err = %v, want ErrBranchNotFound naming the branch", err)
	}
	assertEmptyDir(t, dir)
}

func TestCloneMissingRepo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	_, err := Git{}.Clone(context.Background(), dir, CloneOptions{URL: "file://" + filepath.Join(t.TempDir(), "missing.git")})
	if e := errKind(t, err); e.Kind != ErrNotFound {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
	assertEmptyDir(t, dir)
}

func TestCloneTooBig(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	// A cap below what the three small commits take once checked out.
	dir := t.TempDir()
	const limit = 2048
	_, err := Git{}.Clone(context.Background(), dir, CloneOptions{URL: o.url, MaxBytes: limit})
	e := errKind(t, err)
	if e.Kind != ErrTooBig {
		t.Fatalf("err = %v, want ErrTooBig", err)
	}
	if !strings.Contains(e.Msg, formatBytes(limit)) || !strings.Contains(e.Msg, "bytes) once checked out") {
		t.Errorf("Msg = %q, want the size and the cap %s", e.Msg, formatBytes(limit))
	}
	assertEmptyDir(t, dir)
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the existing dir itself should stay: %v", err)
	}

	// The same clone under a cap it fits in succeeds, and says its size.
	info, err := Git{}.Clone(context.Background(), dir, CloneOptions{URL: o.url, MaxBytes: 10 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if info.Bytes <= limit || info.Bytes > 10<<20 {
		t.Errorf("Bytes = %d", info.Bytes)
	}
}

func TestCloneRefusesCredentialsInURL(t *testing.T) {
	log := newArgvLogger(t, "never-set")
	for _, u := range []string{
		"https://x-access-token:" + testToken + "@github.com/o/r.git",
		"https://" + testToken + "@github.com/o/r.git",
		"http://user:pw-" + testToken + "@127.0.0.1:1/r.git",
	} {
		dir := filepath.Join(t.TempDir(), "ws")
		_, err := Git{Bin: log.bin}.Clone(context.Background(), dir, CloneOptions{URL: u})
		e := errKind(t, err)
		if e.Kind != ErrBadURL || strings.Contains(e.Error(), testToken) {
			t.Errorf("Clone(%q) = %v, want ErrBadURL without the token", u, err)
		}
		assertEmptyDir(t, dir)
	}
	if _, err := os.Stat(log.log); !os.IsNotExist(err) {
		t.Errorf("git ran for a URL holding credentials (log: %v)", err)
	}
}

func TestCloneRefusesNonEmptyDir(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"mine.txt": "keep me"})
	if _, err := (Git{}).Clone(context.Background(), dir, CloneOptions{URL: o.url}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "mine.txt")); err != nil || string(b) != "keep me" {
		t.Errorf("the existing file was touched: %q %v", b, err)
	}
}

// TestCloneHTTPAuth clones through a server that insists on the token,
// and proves the token went by environment only: never in any argv git
// was started with, never in the checkout, never in an error.
func TestCloneHTTPAuth(t *testing.T) {
	root := t.TempDir()
	o := newOrigin(t, root, "r.git")
	_ = o
	srv := newGitServer(t, root, testToken)
	url := srv.URL + "/r.git"
	auth := TokenAuth(testToken)
	cred := strings.TrimPrefix(auth.header, "Authorization: Basic ")
	log := newArgvLogger(t, cred)
	g := Git{Bin: log.bin}

	dir := filepath.Join(t.TempDir(), "ws")
	info, err := g.Clone(context.Background(), dir, CloneOptions{URL: url, Depth: 1, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	if info.Commit != o.main[2] || !info.Shallow {
		t.Errorf("info = %+v", info)
	}
	args, withHeader := log.lines(t)
	if !slices.Contains(args, "clone") || !slices.Contains(args, url) {
		t.Fatalf("the logger did not see the clone: %q", args)
	}
	red := credentialForms(testToken)
	for _, a := range args {
		if red.Redact(a) != a {
			t.Errorf("git was started with the credential in argv: %q", a)
		}
	}
	if withHeader == 0 {
		t.Error("no git call carried the header in its environment")
	}
	assertNoCredential(t, dir, testToken)
	cfg, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "url = "+url+"\n") || strings.Contains(strings.ToLower(string(cfg)), "extraheader") || strings.Contains(string(cfg), "helper") {
		t.Errorf(".git/config:\n%s", cfg)
	}
	assertUsable(t, dir, 1)

	// Without the token the same server refuses.
	_, err = Git{}.Clone(context.Background(), filepath.Join(t.TempDir(), "ws"), CloneOptions{URL: url})
	if e := errKind(t, err); e.Kind != ErrAuth {
		t.Errorf("anonymous: err = %v, want ErrAuth", err)
	}
}

func TestCloneHTTPWrongToken(t *testing.T) {
	root := t.TempDir()
	newOrigin(t, root, "r.git")
	srv := newGitServer(t, root, testToken)
	wrong := "wrong-" + testToken
	dir := filepath.Join(t.TempDir(), "ws")
	_, err := Git{}.Clone(context.Background(), dir, CloneOptions{URL: srv.URL + "/r.git", Auth: TokenAuth(wrong)})
	e := errKind(t, err)
	if e.Kind != ErrAuth {
		t.Errorf("err = %v, want ErrAuth", err)
	}
	red := credentialForms(wrong)
	if s := e.Error(); red.Redact(s) != s {
		t.Errorf("error shows the token: %s", s)
	}
	assertEmptyDir(t, dir)
}

// TestCloneSubmodules clones a repository whose submodule lives on the
// same server: the header, scoped to that origin, reaches it too.
func TestCloneSubmodules(t *testing.T) {
	root := t.TempDir()
	sub := newOrigin(t, root, "sub.git")
	srv := newGitServer(t, root, testToken)

	// The superproject records sub at main's tip, by a relative URL.
	work := t.TempDir()
	tgit(t, work, "init", "--quiet")
	writeFiles(t, work, map[string]string{
		".gitmodules": "[submodule \"lib\"]\n\tpath = lib\n\turl = ../sub.git\n",
		"top.txt":     "top\n",
	})
	tgit(t, work, "add", "--all")
	tgit(t, work, "update-index", "--add", "--cacheinfo", "160000,"+sub.main[2]+",lib")
	tgit(t, work, "commit", "--quiet", "-m", "with submodule")
	tgit(t, root, "init", "--quiet", "--bare", "super.git")
	tgit(t, work, "push", "--quiet", filepath.Join(root, "super.git"), "main")

	dir := filepath.Join(t.TempDir(), "ws")
	info, err := Git{}.Clone(context.Background(), dir, CloneOptions{URL: srv.URL + "/super.git", Depth: 1, Submodules: true, Auth: TokenAuth(testToken)})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "lib", "src", "y.go")); err != nil || !strings.Contains(string(b), "var Y") {
		t.Errorf("submodule not checked out: %q %v", b, err)
	}
	if got := tgit(t, filepath.Join(dir, "lib"), "rev-parse", "HEAD"); got != sub.main[2] {
		t.Errorf("submodule at %s, want %s", got, sub.main[2])
	}
	if info.Files < 7 {
		t.Errorf("Files = %d, want the submodule's files counted", info.Files)
	}
	assertNoCredential(t, dir, testToken)
	hooks, err := os.ReadDir(filepath.Join(dir, ".git", "modules", "lib", "hooks"))
	if err != nil || len(hooks) != 0 {
		t.Errorf("submodule hooks = %v, %v; want emptied", hooks, err)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB (1024 bytes)", 1536: "1.5 KiB (1536 bytes)",
		10 << 20: "10 MiB (10485760 bytes)", 3 << 30: "3 GiB (3221225472 bytes)",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
