package docker_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/docker"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

func exportEntries(t testing.TB, b sandbox.Backend, h sandbox.Handle) map[string]sandboxtest.Entry {
	t.Helper()
	var buf bytes.Buffer
	if err := b.Export(ctxT(t), h, &buf); err != nil {
		t.Fatalf("Export: %v", err)
	}
	return sandboxtest.ReadEntries(t, &buf)
}

// Export's archive is relative to the workspace, in the local backend's
// shape: no root entry, directories with a trailing slash, no owners.
func TestExportFormat(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	sandboxtest.Sh(t, b, h, "mkdir -p d/e && echo x > d/e/f && ln d/e/f hard && mkfifo pipe")
	var buf bytes.Buffer
	if err := b.Export(ctxT(t), h, &buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	var names []string
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, hdr.Name)
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s carries an owner (%d:%d %q:%q)", hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		}
		if hdr.Typeflag == tar.TypeLink && hdr.Linkname != "d/e/f" && hdr.Linkname != "hard" {
			t.Errorf("hard link %s -> %q is not relative to the workspace", hdr.Name, hdr.Linkname)
		}
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"d/", "d/e/", "d/e/f", "hard"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("export names %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "workspace") || strings.Contains(got, "pipe") || strings.HasPrefix(got, "./") {
		t.Errorf("export names %q: want no root entry, no FIFO, relative names", got)
	}
}

// Files that come in belong to the sandbox user whatever the archive says,
// including directories the archive only implies.
func TestImportOwnership(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, hdr := range []*tar.Header{
		{Name: "top.txt", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 3, Uid: 0, Gid: 0, ModTime: time.Unix(1600000000, 0)},
		{Name: "implied/deep/f.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3, Uid: 4242, Gid: 4242, ModTime: time.Unix(1600000000, 0)},
		{Name: "ro", Typeflag: tar.TypeDir, Mode: 0o555, Uid: 0, ModTime: time.Unix(1600000000, 0)},
		{Name: "ro/in.txt", Typeflag: tar.TypeReg, Mode: 0o444, Size: 3, ModTime: time.Unix(1600000000, 0)},
	} {
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			tw.Write([]byte("abc"))
		}
	}
	tw.Close()
	if err := b.Import(ctxT(t), h, &buf); err != nil {
		t.Fatalf("Import: %v", err)
	}
	got := sandboxtest.Sh(t, b, h, `find . -mindepth 1 | sort | while read -r f; do stat -c '%n %u:%g %a' "$f"; done
touch implied/deep/new && echo writable`)
	want := `./implied 1000:1000 755
./implied/deep 1000:1000 755
./implied/deep/f.txt 1000:1000 644
./ro 1000:1000 555
./ro/in.txt 1000:1000 444
./top.txt 1000:1000 755
writable
`
	if got != want {
		t.Errorf("after Import:\n%s\nwant:\n%s", got, want)
	}
	// A later Import can replace a workspace with read-only directories.
	if err := b.Import(ctxT(t), h, bytes.NewReader(sandboxtest.BuildTar(t, sandboxtest.TarEntry{Name: "only.txt", Body: "1"}))); err != nil {
		t.Fatalf("second Import: %v", err)
	}
	if got := sandboxtest.Sh(t, b, h, "ls -A"); got != "only.txt\n" {
		t.Errorf("after second Import: %q", got)
	}
}

// A refused archive leaves the workspace as it was: it is vetted in full
// before the workspace is cleared.
func TestImportRefusalLeavesWorkspace(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	sandboxtest.Sh(t, b, h, "echo keep > keep.txt")
	for name, entries := range map[string][]sandboxtest.TarEntry{
		"through symlink to /tmp": {
			{Name: "ok.txt", Body: "fine"},
			{Name: "esc", Type: tar.TypeSymlink, Linkname: "/tmp"},
			{Name: "esc/pwned", Body: "x"},
		},
		"hard link to a container file": {{Name: "passwd", Type: tar.TypeLink, Linkname: "etc/passwd"}},
		"below a file":                  {{Name: "f", Body: "x"}, {Name: "f/g", Body: "y"}},
	} {
		err := b.Import(ctxT(t), h, bytes.NewReader(sandboxtest.BuildTar(t, entries...)))
		if !errors.Is(err, sandbox.ErrUnsafeArchive) {
			t.Errorf("%s: Import error %v, want sandbox.ErrUnsafeArchive", name, err)
		}
	}
	got := sandboxtest.Sh(t, b, h, "ls -A; test ! -e /tmp/pwned && echo clean")
	if got != "keep.txt\nclean\n" {
		t.Errorf("workspace after refused imports: %q", got)
	}
	truncated := sandboxtest.BuildTar(t, sandboxtest.TarEntry{Name: "big.txt", Body: strings.Repeat("x", 10000)})
	if err := b.Import(ctxT(t), h, bytes.NewReader(truncated[:3000])); err == nil {
		t.Error("Import accepted a truncated archive")
	}
	if got := sandboxtest.Sh(t, b, h, "ls -A"); got != "keep.txt\n" {
		t.Errorf("workspace after a truncated import: %q", got)
	}
}
