package repo

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// blob is one entry of a committed tree.
type blob struct{ mode, content string }

// treeOf lists the committed tree of rev in repo: path → mode and content
// (a gitlink's content is the commit it records).
func treeOf(t testing.TB, repo, rev string) map[string]blob {
	t.Helper()
	out, err := tgitErr(t, repo, nil, "ls-tree", "-r", "-z", rev)
	if err != nil {
		t.Fatal(err)
	}
	tree := map[string]blob{}
	for _, rec := range strings.Split(out, "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		b := blob{mode: f[0], content: f[2]}
		if f[1] == "blob" {
			if b.content, err = tgitErr(t, repo, nil, "cat-file", "blob", f[2]); err != nil {
				t.Fatal(err)
			}
		}
		tree[path] = b
	}
	return tree
}

// workTree clones o's main into a fresh directory, as the agent's
// workspace would start: a checkout with its .git.
func workTree(t testing.TB, o *origin) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	if _, err := (Git{}).Clone(context.Background(), dir, CloneOptions{URL: o.url, Depth: 1}); err != nil {
		t.Fatal(err)
	}
	return dir
}

var (
	testAuthor    = Signature{Name: "Sandbot", Email: "bot@example.com", When: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", 2*3600))}
	testCommitter = Signature{Name: "Sandbot Worker", Email: "worker@example.com", When: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}
)

func commitOpts(o *origin, work, parent, branch string) CommitOptions {
	return CommitOptions{
		URL: o.url, Parent: parent, WorkTree: work, Branch: branch,
		Message: "bot: change things\n\nCo-authored-by: U <u@example.com>\n",
		Author:  testAuthor, Committer: testCommitter,
	}
}

// refOf is the commit a ref of repo points at, "" when it does not exist.
func refOf(t testing.TB, repo, ref string) string {
	t.Helper()
	out, err := tgitErr(t, repo, nil, "rev-parse", "--verify", "--quiet", ref)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

func TestCommitAndPush(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	work := workTree(t, o)
	writeFiles(t, work, map[string]string{
		"src/x.go":  "package x // changed\n",
		"new.txt":   "new\n",
		"debug.log": "untracked and ignored: stays out\n",
		"run.sh":    "#!/bin/sh\necho hi\n",
	})
	if err := os.Remove(filepath.Join(work, "README.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(work, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/x.go", filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}

	tmp := filepath.Join(t.TempDir(), "not", "yet") // created on demand
	res, err := Git{}.CommitAndPush(context.Background(), tmp, commitOpts(o, work, o.main[2], "bot/t1"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Files != 5 || len(res.Commit) != 40 {
		t.Errorf("res = %+v, want a commit of 5 changed paths", res)
	}
	if got := refOf(t, o.dir, "refs/heads/bot/t1"); got != res.Commit {
		t.Fatalf("bot/t1 = %q, want %s", got, res.Commit)
	}
	want := map[string]blob{
		".gitignore": {"100644", "*.log\n"},
		"keep.log":   {"100644", "tracked although ignored\n"}, // tracked: stays
		"src/x.go":   {"100644", "package x // changed\n"},
		"src/y.go":   {"100644", "package x\n\nvar Y = 1\n"},
		"new.txt":    {"100644", "new\n"},
		"run.sh":     {"100755", "#!/bin/sh\necho hi\n"},
		"link":       {"120000", "src/x.go"},
	}
	got := treeOf(t, o.dir, res.Commit)
	if len(got) != len(want) {
		t.Errorf("tree = %v, want %v", got, want)
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s = %+v, want %+v", p, got[p], w)
		}
	}
	meta := tgit(t, o.dir, "log", "-1", "--format=%P|%an|%ae|%ad|%cn|%ce|%cd|%B", "--date=raw", res.Commit)
	wantMeta := o.main[2] + "|Sandbot|bot@example.com|1767315845 +0200|Sandbot Worker|worker@example.com|1767323046 +0000|bot: change things\n\nCo-authored-by: U <u@example.com>"
	if meta != wantMeta {
		t.Errorf("commit:\n%s\nwant\n%s", meta, wantMeta)
	}
	if entries, err := os.ReadDir(tmp); err != nil || len(entries) != 0 {
		t.Errorf("scratch left in tmp: %v %v", entries, err)
	}

	// A second push builds on the first.
	writeFiles(t, work, map[string]string{"new.txt": "newer\n"})
	res2, err := Git{}.CommitAndPush(context.Background(), tmp, commitOpts(o, work, res.Commit, "bot/t1"))
	if err != nil {
		t.Fatal(err)
	}
	if !res2.Changed || res2.Files != 1 {
		t.Errorf("second = %+v", res2)
	}
	if got := refOf(t, o.dir, "refs/heads/bot/t1"); got != res2.Commit {
		t.Errorf("bot/t1 = %s, want %s", got, res2.Commit)
	}
	if p := tgit(t, o.dir, "rev-parse", res2.Commit+"^"); p != res.Commit {
		t.Errorf("second's parent = %s, want %s", p, res.Commit)
	}
	if c := treeOf(t, o.dir, res2.Commit)["new.txt"].content; c != "newer\n" {
		t.Errorf("new.txt = %q", c)
	}
}

func TestCommitAndPushUnchanged(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	work := workTree(t, o)
	// Changes that are not part of a commit: .git and an ignored file.
	writeFiles(t, work, map[string]string{"debug.log": "ignored\n", ".git/description": "changed"})
	res, err := Git{}.CommitAndPush(context.Background(), t.TempDir(), commitOpts(o, work, o.main[2], "bot/none"))
	if err != nil {
		t.Fatal(err)
	}
	if res != (PushResult{Commit: o.main[2]}) {
		t.Errorf("res = %+v, want unchanged at the parent", res)
	}
	if got := refOf(t, o.dir, "refs/heads/bot/none"); got != "" {
		t.Errorf("bot/none was pushed: %s", got)
	}
}

func TestCommitAndPushNonFastForward(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	work := workTree(t, o)
	writeFiles(t, work, map[string]string{"a.txt": "mine\n"})
	first, err := Git{}.CommitAndPush(context.Background(), t.TempDir(), commitOpts(o, work, o.main[2], "bot/t1"))
	if err != nil {
		t.Fatal(err)
	}
	// Someone else pushes to the branch.
	other := t.TempDir()
	tgit(t, other, "clone", "--quiet", "--branch", "bot/t1", o.url, ".")
	writeFiles(t, other, map[string]string{"theirs.txt": "theirs\n"})
	tgit(t, other, "add", "--all")
	tgit(t, other, "commit", "--quiet", "-m", "theirs")
	tgit(t, other, "push", "--quiet", "origin", "bot/t1")
	theirs := tgit(t, other, "rev-parse", "HEAD")

	writeFiles(t, work, map[string]string{"a.txt": "mine, again\n"})
	_, err = Git{}.CommitAndPush(context.Background(), t.TempDir(), commitOpts(o, work, first.Commit, "bot/t1"))
	if e := errKind(t, err); e.Kind != ErrNonFastForward || !strings.Contains(e.Msg, `"bot/t1"`) {
		t.Errorf("err = %v, want ErrNonFastForward", err)
	}
	if got := refOf(t, o.dir, "refs/heads/bot/t1"); got != theirs {
		t.Errorf("bot/t1 = %s, want their %s kept", got, theirs)
	}
}

func TestCommitAndPushMissingParent(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	work := workTree(t, o)
	missing := strings.Repeat("1", 40)
	_, err := Git{}.CommitAndPush(context.Background(), t.TempDir(), commitOpts(o, work, missing, "bot/t1"))
	if e := errKind(t, err); e.Kind != ErrNotFound || !strings.Contains(e.Msg, missing) {
		t.Errorf("err = %v, want ErrNotFound naming the commit", err)
	}
}

func TestCommitAndPushRefusesBadInput(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	work := t.TempDir()
	base := commitOpts(o, work, o.main[2], "bot/t1")
	cases := map[string]func(*CommitOptions){
		"short parent":     func(c *CommitOptions) { c.Parent = o.main[2][:12] },
		"parent is a name": func(c *CommitOptions) { c.Parent = "main" },
		"bad branch":       func(c *CommitOptions) { c.Branch = "a..b" },
		"option branch":    func(c *CommitOptions) { c.Branch = "-f" },
		"empty branch":     func(c *CommitOptions) { c.Branch = "" },
		"no work tree":     func(c *CommitOptions) { c.WorkTree = filepath.Join(work, "missing") },
		"no author":        func(c *CommitOptions) { c.Author = Signature{} },
		"angle in name":    func(c *CommitOptions) { c.Author.Name = "a <evil@x>" },
		"newline in email": func(c *CommitOptions) { c.Committer.Email = "x@y\nz" },
		"credential URL":   func(c *CommitOptions) { c.URL = "https://x:" + testToken + "@github.com/o/r.git" },
	}
	for name, mutate := range cases {
		c := base
		mutate(&c)
		if _, err := (Git{}).CommitAndPush(context.Background(), t.TempDir(), c); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), testToken) {
			t.Errorf("%s: error shows the token: %v", name, err)
		}
	}
	if got := tgit(t, o.dir, "for-each-ref", "--format=%(refname)"); got != "refs/heads/feature\nrefs/heads/main" {
		t.Errorf("refs after refusals: %q", got)
	}
}

// TestCommitAndPushAttack hands CommitAndPush a work tree built to make
// git run a program or commit what it should not: a .git/config naming an
// fsmonitor, a hooks path, filter and diff drivers; hooks in .git/hooks;
// attributes asking for those drivers; a nested repository and a gitdir:
// file pointing outside; a symlink to /etc/passwd. The worker's own
// environment points git at the untrusted .git as well.
func TestCommitAndPushAttack(t *testing.T) {
	o := newOrigin(t, t.TempDir(), "r.git")
	work := workTree(t, o)
	marker := filepath.Join(t.TempDir(), "pwned")
	script := filepath.Join(t.TempDir(), "evil.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch '"+marker+"'\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hooksDir := t.TempDir()
	hookNames := []string{"pre-commit", "post-commit", "pre-push", "post-index-change", "reference-transaction", "post-checkout", "fsmonitor-watchman", "pre-auto-gc"}
	for _, dir := range []string{hooksDir, filepath.Join(work, ".git", "hooks")} {
		for _, h := range hookNames {
			if err := os.WriteFile(filepath.Join(dir, h), []byte("#!/bin/sh\ntouch '"+marker+"'\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	evilConfig := "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = " + script +
		"\n\thooksPath = " + hooksDir + "\n\tpager = " + script + "\n\tsshCommand = " + script + "\n\taskPass = " + script +
		"\n[filter \"evil\"]\n\tclean = " + script + "\n\tsmudge = " + script + "\n\tprocess = " + script + "\n\trequired = true" +
		"\n[diff \"evil\"]\n\ttextconv = " + script + "\n\tcommand = " + script +
		"\n[credential]\n\thelper = !" + script + "\n"
	writeFiles(t, work, map[string]string{
		".git/config":    evilConfig,
		".gitattributes": "* filter=evil diff=evil\n",
		"src/x.go":       "package x // changed\n",
	})
	if err := os.Symlink("/etc/passwd", filepath.Join(work, "passwd")); err != nil {
		t.Fatal(err)
	}
	// A nested repository with its own evil config, and a gitdir: file
	// pointing at a repository outside the tree.
	nested := filepath.Join(work, "nested")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	tgit(t, nested, "init", "--quiet")
	writeFiles(t, nested, map[string]string{"n.txt": "n\n"})
	tgit(t, nested, "add", "--all")
	tgit(t, nested, "commit", "--quiet", "-m", "nested")
	writeFiles(t, nested, map[string]string{".git/config": evilConfig})
	writeFiles(t, work, map[string]string{"pointer/.git": "gitdir: " + o.dir + "\n", "pointer/p.txt": "p\n"})

	t.Setenv("GIT_DIR", filepath.Join(work, ".git"))
	t.Setenv("GIT_WORK_TREE", work)
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor="+script+"' 'core.hooksPath="+hooksDir+"'")
	t.Setenv("GIT_EXTERNAL_DIFF", script)

	res, err := Git{}.CommitAndPush(context.Background(), t.TempDir(), commitOpts(o, work, o.main[2], "bot/attack"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("a program from the work tree or the environment ran (marker: %v)", err)
	}
	tree := treeOf(t, o.dir, res.Commit)
	for p, b := range tree {
		if slices.Contains(strings.Split(p, "/"), ".git") {
			t.Errorf("committed %s from a .git", p)
		}
		if b.mode == "160000" {
			t.Errorf("committed a gitlink %s → %s read from the work tree", p, b.content)
		}
	}
	if b := tree["passwd"]; b != (blob{"120000", "/etc/passwd"}) {
		t.Errorf("passwd = %+v, want a symlink to /etc/passwd", b)
	}
	if b := tree[".gitattributes"]; b != (blob{"100644", "* filter=evil diff=evil\n"}) {
		t.Errorf(".gitattributes = %+v", b)
	}
	if b := tree["src/x.go"]; b.content != "package x // changed\n" {
		t.Errorf("src/x.go = %+v: the content went through a filter?", b)
	}
	// Like nested/, pointer/ is a repository to git (through its gitdir:
	// file): left out, not recorded as a gitlink to whatever it names.
	for p := range tree {
		if p == "pointer" || strings.HasPrefix(p, "pointer/") || p == "nested" {
			t.Errorf("committed %s", p)
		}
	}
}

// TestCommitAndPushKeepsParentGitlinks: a submodule's pointer comes from
// Parent, whatever repository sits at its path in the work tree.
func TestCommitAndPushKeepsParentGitlinks(t *testing.T) {
	root := t.TempDir()
	sub := newOrigin(t, root, "sub.git")
	seed := t.TempDir()
	tgit(t, seed, "init", "--quiet")
	writeFiles(t, seed, map[string]string{".gitmodules": "[submodule \"lib\"]\n\tpath = lib\n\turl = ../sub.git\n", "top.txt": "top\n"})
	tgit(t, seed, "add", "--all")
	tgit(t, seed, "update-index", "--add", "--cacheinfo", "160000,"+sub.main[0]+",lib")
	tgit(t, seed, "commit", "--quiet", "-m", "super")
	parent := tgit(t, seed, "rev-parse", "HEAD")
	super := &origin{dir: filepath.Join(root, "super.git"), url: "file://" + filepath.Join(root, "super.git")}
	tgit(t, root, "init", "--quiet", "--bare", super.dir)
	tgit(t, seed, "push", "--quiet", super.dir, "main")

	work := t.TempDir()
	writeFiles(t, work, map[string]string{".gitmodules": "[submodule \"lib\"]\n\tpath = lib\n\turl = ../sub.git\n", "top.txt": "top, changed\n"})
	// lib is a repository whose HEAD is another commit.
	lib := filepath.Join(work, "lib")
	tgit(t, root, "clone", "--quiet", sub.url, lib)
	if head := tgit(t, lib, "rev-parse", "HEAD"); head == sub.main[0] {
		t.Fatal("fixture: lib must be at another commit")
	}
	res, err := Git{}.CommitAndPush(context.Background(), t.TempDir(), commitOpts(super, work, parent, "bot/sub"))
	if err != nil {
		t.Fatal(err)
	}
	tree := treeOf(t, super.dir, res.Commit)
	if b := tree["lib"]; b != (blob{"160000", sub.main[0]}) {
		t.Errorf("lib = %+v, want Parent's gitlink to %s", b, sub.main[0])
	}
	if res.Files != 1 || tree["top.txt"].content != "top, changed\n" {
		t.Errorf("res = %+v, tree = %v", res, tree)
	}
}

// TestCommitAndPushHTTP pushes through the authenticating server, with
// the token only in the environment, and meets a server-side hook that
// protects main.
func TestCommitAndPushHTTP(t *testing.T) {
	root := t.TempDir()
	o := newOrigin(t, root, "r.git")
	hook := "#!/bin/sh\nwhile read old new ref; do\n  if [ \"$ref\" = refs/heads/main ]; then\n    echo \"GH006: Protected branch update failed for $ref.\" >&2\n    echo \"Changes must be made through a pull request.\" >&2\n    exit 1\n  fi\ndone\n"
	if err := os.WriteFile(filepath.Join(o.dir, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := newGitServer(t, root, testToken)
	auth := TokenAuth(testToken)
	log := newArgvLogger(t, strings.TrimPrefix(auth.header, "Authorization: Basic "))
	g := Git{Bin: log.bin}
	work := workTree(t, o)
	writeFiles(t, work, map[string]string{"a.txt": "a\n"})

	opts := commitOpts(o, work, o.main[2], "bot/http")
	opts.URL, opts.Auth = srv.URL+"/r.git", auth
	res, err := g.CommitAndPush(context.Background(), t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := refOf(t, o.dir, "refs/heads/bot/http"); got != res.Commit || !res.Changed {
		t.Errorf("bot/http = %s, res = %+v", got, res)
	}
	args, withHeader := log.lines(t)
	if !slices.Contains(args, "push") || !slices.Contains(args, "fetch") {
		t.Fatalf("the logger did not see fetch and push: %q", args)
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
	// The pushed objects and refs hold no credential either.
	assertNoCredential(t, o.dir, testToken)

	opts.Branch = "main"
	_, err = g.CommitAndPush(context.Background(), t.TempDir(), opts)
	e := errKind(t, err)
	if e.Kind != ErrProtected || !strings.Contains(e.Msg, "Changes must be made through a pull request.") {
		t.Errorf("err = %v, want ErrProtected with the server's words", err)
	}
	if got := refOf(t, o.dir, "refs/heads/main"); got != o.main[2] {
		t.Errorf("main moved to %s", got)
	}

	opts.Branch, opts.Auth = "bot/other", TokenAuth("wrong-"+testToken)
	_, err = g.CommitAndPush(context.Background(), t.TempDir(), opts)
	if e := errKind(t, err); e.Kind != ErrAuth || strings.Contains(e.Error(), testToken) {
		t.Errorf("wrong token: err = %v, want ErrAuth without the token", err)
	}
}
