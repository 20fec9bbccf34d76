package repo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies src to dst with cp -a, symlinks as symlinks.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
}

// assertSameTrees fails unless a and b hold the same files and symlinks
// outside .git (by the package's own comparison).
func assertSameTrees(t testing.TB, a, b string) {
	t.Helper()
	ta, err := readTree(a)
	if err != nil {
		t.Fatal(err)
	}
	defer ta.close()
	tb, err := readTree(b)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.close()
	ch, err := compareTrees(ta, tb)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ch {
		t.Errorf("trees differ at %s (%s)", c.path, c.status())
	}
}

// diffFixture is an old and a new tree with every kind of change.
func diffFixture(t testing.TB) (oldDir, newDir string) {
	t.Helper()
	oldDir, newDir = t.TempDir(), t.TempDir()
	writeFiles(t, oldDir, map[string]string{
		"src/x.go":      "package x\n\nfunc A() {}\n",
		"gone.txt":      "bye\n",
		"same.txt":      "unchanged\n",
		"run.sh":        "#!/bin/sh\n",
		"img.bin":       "\x00\x01\x02old",
		".git/config":   "[core]\n\tbare = false\n",
		"sub/.git/HEAD": "ref: refs/heads/main\n",
		"sub/keep.txt":  "k\n",
		"kind":          "a file, then a symlink\n",
	})
	writeFiles(t, newDir, map[string]string{
		"src/x.go":              "package x\n\nfunc A() {}\n\nfunc B() {}\n",
		"new dir/é new.txt":     "fresh\n",
		"same.txt":              "unchanged\n",
		"run.sh":                "#!/bin/sh\n",
		"img.bin":               "\x00\x01\x02new\xff",
		".git/config":           "[core]\n\tfsmonitor = /bin/false\n",
		".git/hooks/pre-commit": "#!/bin/sh\n",
		"sub/.git/HEAD":         "ref: refs/heads/other\n",
		"sub/keep.txt":          "k\n",
	})
	if err := os.Chmod(filepath.Join(newDir, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(newDir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/x.go", filepath.Join(newDir, "kind")); err != nil {
		t.Fatal(err)
	}
	return oldDir, newDir
}

func TestDiffDirs(t *testing.T) {
	oldDir, newDir := diffFixture(t)
	d, err := Git{}.DiffDirs(context.Background(), oldDir, newDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []FileStat{
		{Path: "gone.txt", Status: "deleted", Deleted: 1},
		{Path: "img.bin", Status: "modified", Binary: true},
		{Path: "kind", Status: "modified", Added: 1, Deleted: 1},
		{Path: "link", Status: "added", Added: 1},
		{Path: "new dir/é new.txt", Status: "added", Added: 1},
		{Path: "run.sh", Status: "modified"},
		{Path: "src/x.go", Status: "modified", Added: 2},
	}
	if len(d.Files) != len(want) {
		t.Fatalf("Files = %+v, want %+v", d.Files, want)
	}
	for i := range want {
		if d.Files[i] != want[i] {
			t.Errorf("Files[%d] = %+v, want %+v", i, d.Files[i], want[i])
		}
	}
	if d.Added != 5 || d.Deleted != 2 || d.Truncated {
		t.Errorf("totals +%d -%d truncated %v", d.Added, d.Deleted, d.Truncated)
	}
	for _, s := range []string{
		"diff --git a/src/x.go b/src/x.go\n",
		"--- a/src/x.go\n+++ b/src/x.go\n",
		"+func B() {}\n",
		// One-sided files are named as git names them in a repository.
		"diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n",
		"--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
		"diff --git \"a/new dir/\\303\\251 new.txt\" \"b/new dir/\\303\\251 new.txt\"\nnew file mode 100644\n",
		"diff --git a/link b/link\nnew file mode 120000\n",
		"+/etc/passwd\n\\ No newline at end of file\n",
		"diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n",
		"diff --git a/img.bin b/img.bin\n",
		"GIT binary patch\n",
	} {
		if !strings.Contains(d.Patch, s) {
			t.Errorf("patch lacks %q:\n%s", s, d.Patch)
		}
	}
	for _, s := range []string{".git", "same.txt", "sub/", "root:x:0:0"} {
		if strings.Contains(d.Patch, s) {
			t.Errorf("patch mentions %q:\n%s", s, d.Patch)
		}
	}

	// The patch replays: applied to a copy of the old tree it gives the
	// new one, binary file, mode and symlink included.
	replay := t.TempDir()
	copyTree(t, oldDir, replay)
	tgit(t, replay, "init", "--quiet", "scratch") // a repo elsewhere for git apply's config
	cmd := exec.Command(realGit(t), "apply", "--whitespace=nowarn", "-")
	cmd.Dir = replay
	cmd.Env = []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CEILING_DIRECTORIES=" + filepath.Dir(replay)}
	cmd.Stdin = strings.NewReader(d.Patch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v: %s", err, out)
	}
	if err := os.RemoveAll(filepath.Join(replay, "scratch")); err != nil {
		t.Fatal(err)
	}
	assertSameTrees(t, replay, newDir)
}

func TestDiffDirsSame(t *testing.T) {
	oldDir, newDir := t.TempDir(), t.TempDir()
	files := map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"}
	writeFiles(t, oldDir, files)
	writeFiles(t, newDir, files)
	writeFiles(t, newDir, map[string]string{".git/index": "only in .git"})
	d, err := Git{}.DiffDirs(context.Background(), oldDir, newDir, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 0 || d.Patch != "" || d.Truncated || d.Added != 0 {
		t.Errorf("diff of equal trees = %+v", d)
	}
}

func TestDiffDirsTruncated(t *testing.T) {
	oldDir, newDir := t.TempDir(), t.TempDir()
	writeFiles(t, newDir, map[string]string{
		"a.txt": strings.Repeat("a\n", 10),
		"b.txt": strings.Repeat("b\n", 10),
		"c.txt": strings.Repeat("c\n", 10),
	})
	full, err := Git{}.DiffDirs(context.Background(), oldDir, newDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Index(full.Patch, "diff --git a/b.txt")
	second := strings.Index(full.Patch, "diff --git a/c.txt")
	if first <= 0 || second <= first {
		t.Fatalf("unexpected patch:\n%s", full.Patch)
	}
	cases := []struct {
		limit int
		want  string
	}{
		{second + 5, full.Patch[:second]},   // inside c.txt: cut before it
		{second, full.Patch[:second]},       // exactly at c.txt's header
		{second - 1, full.Patch[:first]},    // just short of it: b.txt goes
		{len(full.Patch), full.Patch},       // fits exactly
		{first - 1, ""},                     // a.txt alone does not fit: cut at a line
		{len(full.Patch) + 100, full.Patch}, // room to spare
	}
	for _, c := range cases {
		d, err := Git{}.DiffDirs(context.Background(), oldDir, newDir, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Files) != 3 || d.Added != 30 {
			t.Errorf("limit %d: Files/totals cut too: %+v +%d", c.limit, d.Files, d.Added)
		}
		if len(d.Patch) > c.limit {
			t.Errorf("limit %d: patch is %d bytes", c.limit, len(d.Patch))
		}
		wantTrunc := c.want != full.Patch
		if d.Truncated != wantTrunc {
			t.Errorf("limit %d: Truncated = %v", c.limit, d.Truncated)
		}
		if c.want == "" {
			// Mid-file cut: whole lines of a.txt's section only.
			if !strings.HasPrefix(full.Patch, d.Patch) || !strings.HasSuffix(d.Patch, "\n") || strings.Contains(d.Patch, "b.txt") {
				t.Errorf("limit %d: patch = %q", c.limit, d.Patch)
			}
			continue
		}
		if d.Patch != c.want {
			t.Errorf("limit %d: patch =\n%s\nwant\n%s", c.limit, d.Patch, c.want)
		}
	}
}

// TestDiffDirsIgnoresTreeConfig gives the trees every handle that could
// make git run a program while diffing (attributes naming drivers, a
// .git/config defining them) and the worker's environment too
// (GIT_EXTERNAL_DIFF, GIT_CONFIG_PARAMETERS): nothing runs.
func TestDiffDirsIgnoresTreeConfig(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "pwned")
	script := filepath.Join(t.TempDir(), "evil.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch '"+marker+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_EXTERNAL_DIFF", script)
	t.Setenv("GIT_CONFIG_PARAMETERS", "'diff.external="+script+"' 'diff.evil.textconv="+script+"'")
	oldDir, newDir := t.TempDir(), t.TempDir()
	evil := map[string]string{
		".gitattributes": "* diff=evil filter=evil\n",
		".git/config":    "[diff]\n\texternal = " + script + "\n[diff \"evil\"]\n\ttextconv = " + script + "\n\tcommand = " + script + "\n",
	}
	writeFiles(t, oldDir, evil)
	writeFiles(t, newDir, evil)
	writeFiles(t, oldDir, map[string]string{"x.txt": "one\n"})
	writeFiles(t, newDir, map[string]string{"x.txt": "two\n", ".gitattributes": "* diff=evil filter=evil\n# changed\n"})

	d, err := Git{}.DiffDirs(context.Background(), oldDir, newDir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("a program from the tree or the environment ran (marker: %v)", err)
	}
	if !strings.Contains(d.Patch, "-one\n+two\n") || len(d.Files) != 2 {
		t.Errorf("patch:\n%s", d.Patch)
	}
}

func TestFixHeaders(t *testing.T) {
	in := "diff --git b/n b/n\nnew file mode 100644\n" +
		"diff --git a/g a/g\ndeleted file mode 100644\n" +
		"diff --git \"b/q \\303\" \"b/q \\303\"\n" +
		"diff --git a/m b/m\n" +
		" diff --git b/x b/x\n" + // a context line, not a header
		"diff --git a/ab a/ab"
	want := "diff --git a/n b/n\nnew file mode 100644\n" +
		"diff --git a/g b/g\ndeleted file mode 100644\n" +
		"diff --git \"a/q \\303\" \"b/q \\303\"\n" +
		"diff --git a/m b/m\n" +
		" diff --git b/x b/x\n" +
		"diff --git a/ab b/ab"
	if got := string(fixHeaders([]byte(in))); got != want {
		t.Errorf("fixHeaders =\n%s\nwant\n%s", got, want)
	}
}

func TestParseNumstat(t *testing.T) {
	out := []byte("1\t1\t\x00a/x\x00b/x\x00-\t-\t\x00/dev/null\x00b/bin\x00" +
		"0\t3\t\x00a/t\x00/dev/null\x001\t0\t\x00/dev/null\x00b/t\x00")
	got := parseNumstat(out)
	want := map[string]lineStat{"x": {1, 1, false}, "bin": {0, 0, true}, "t": {1, 3, false}}
	if len(got) != len(want) {
		t.Fatalf("parseNumstat = %+v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %+v, want %+v", k, got[k], v)
		}
	}
}

func TestSameContent(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 200<<10)
	other := append(append([]byte{}, big[:len(big)-1]...), 'y')
	for _, c := range []struct {
		a, b []byte
		same bool
	}{
		{big, big, true}, {big, other, false}, {nil, nil, true}, {big, big[:len(big)-1], false},
	} {
		got, err := sameContent(bytes.NewReader(c.a), bytes.NewReader(c.b))
		if err != nil || got != c.same {
			t.Errorf("sameContent(%d, %d bytes) = %v, %v", len(c.a), len(c.b), got, err)
		}
	}
}
