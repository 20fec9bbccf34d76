package sandboxtest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/sandbox"
)

// Entry is one archive member as the kit compares it.
type Entry struct {
	Type     byte
	Mode     int64
	Size     int64
	Linkname string
	ModTime  int64 // Unix seconds
	SHA256   string
}

func (e Entry) String() string {
	return fmt.Sprintf("{type %q mode %o size %d link %q mtime %d sha %.8s}", e.Type, e.Mode, e.Size, e.Linkname, e.ModTime, e.SHA256)
}

// ReadEntries parses a tar stream into entries keyed by cleaned name
// (directories without the trailing slash, the root itself left out).
func ReadEntries(t testing.TB, r io.Reader) map[string]Entry {
	t.Helper()
	out := map[string]Entry{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read exported archive: %v", err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
		if name == "" || name == "." {
			continue
		}
		if strings.HasPrefix(name, "/") || slices.Contains(strings.Split(name, "/"), "..") {
			t.Errorf("exported archive has unsafe name %q", hdr.Name)
		}
		e := Entry{Type: hdr.Typeflag, Mode: hdr.Mode & 0o7777, Linkname: hdr.Linkname, ModTime: hdr.ModTime.Unix()}
		if e.Type == tar.TypeReg {
			sum := sha256.New()
			n, err := io.Copy(sum, tr)
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			e.Size, e.SHA256 = n, hex.EncodeToString(sum.Sum(nil))
		}
		out[name] = e
	}
}

func exportBytes(t testing.TB, b sandbox.Backend, h sandbox.Handle) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var buf bytes.Buffer
	if err := b.Export(ctx, h, &buf); err != nil {
		t.Fatalf("Export: %v", err)
	}
	return buf.Bytes()
}

func exportEntries(t testing.TB, b sandbox.Backend, h sandbox.Handle) map[string]Entry {
	t.Helper()
	return ReadEntries(t, bytes.NewReader(exportBytes(t, b, h)))
}

func importBytes(b sandbox.Backend, h sandbox.Handle, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return b.Import(ctx, h, bytes.NewReader(data))
}

func testRoundTrip(t *testing.T, b sandbox.Backend) {
	src := NewSandbox(t, b)
	Sh(t, b, src, `set -e
mkdir -p d/e empty private
printf hello > d/e/f.txt
printf '#!/bin/sh\necho hi\n' > run.sh
printf 'with space' > 'name with space.txt'
head -c 300000 /dev/zero | tr '\0' 'z' > big.bin
ln -s d/e/f.txt link
ln -s missing-target dangling
chmod 755 run.sh
chmod 600 d/e/f.txt
chmod 700 private
chmod 555 empty
touch -t 202001021504.05 d/e/f.txt run.sh big.bin d/e d empty private`)
	want := exportEntries(t, b, src)
	for _, name := range []string{"d", "d/e", "d/e/f.txt", "run.sh", "name with space.txt", "big.bin", "link", "dangling", "empty", "private"} {
		if _, ok := want[name]; !ok {
			t.Fatalf("export lacks %q; has %v", name, slices.Sorted(maps.Keys(want)))
		}
	}
	if e := want["link"]; e.Type != tar.TypeSymlink || e.Linkname != "d/e/f.txt" {
		t.Errorf("symlink exported as %v", e)
	}
	if e := want["run.sh"]; e.Mode != 0o755 {
		t.Errorf("run.sh exported with mode %o, want 755", e.Mode)
	}

	dst := NewSandbox(t, b)
	if err := importBytes(b, dst, exportBytes(t, b, src)); err != nil {
		t.Fatalf("Import: %v", err)
	}
	got := exportEntries(t, b, dst)
	for _, name := range slices.Sorted(maps.Keys(want)) {
		g, w := got[name], want[name]
		if w.Type == tar.TypeSymlink {
			// Not every extractor can set a symlink's own time.
			g.ModTime, w.ModTime = 0, 0
		}
		if g != w {
			t.Errorf("%s: after round trip %v, want %v", name, got[name], want[name])
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("round trip added %q", name)
		}
	}
	if out := Sh(t, b, dst, "./run.sh && cat link"); out != "hi\nhello" {
		t.Errorf("restored executable and symlink give %q, want \"hi\\nhello\"", out)
	}
}

func testImportReplaces(t *testing.T, b sandbox.Backend) {
	src := NewSandbox(t, b)
	Sh(t, b, src, "echo new > new.txt")
	dst := NewSandbox(t, b)
	Sh(t, b, dst, "mkdir stale && echo old > stale/old.txt && echo old > new.txt")
	if err := importBytes(b, dst, exportBytes(t, b, src)); err != nil {
		t.Fatalf("Import: %v", err)
	}
	if got := Sh(t, b, dst, "ls -A; cat new.txt"); got != "new.txt\nnew\n" {
		t.Errorf("after Import the workspace lists %q, want only the archive's new.txt", got)
	}
}

// TarEntry describes a member of an archive built by BuildTar.
type TarEntry struct {
	Name     string
	Type     byte // tar.TypeReg when zero
	Linkname string
	Body     string
}

// BuildTar builds a tar archive, including ones Export would never write.
func BuildTar(t testing.TB, entries ...TarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.Name, Typeflag: e.Type, Linkname: e.Linkname, Mode: 0o644}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.Body))
		}
		if hdr.Typeflag == tar.TypeDir {
			hdr.Mode = 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("build tar: %v", err)
		}
		if _, err := tw.Write([]byte(e.Body)); err != nil {
			t.Fatalf("build tar: %v", err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("build tar: %v", err)
	}
	return buf.Bytes()
}

func testImportUnsafe(t *testing.T, b sandbox.Backend) {
	tag := fmt.Sprintf("sandboxtest-escape-%d", sessionSeq.Add(1))
	cases := map[string][]TarEntry{
		"dotdot":   {{Name: "ok.txt", Body: "ok"}, {Name: "../" + tag, Body: "x"}},
		"nested":   {{Name: "a/../../" + tag, Body: "x"}},
		"absolute": {{Name: "/tmp/" + tag, Body: "x"}},
		"through-symlink": {
			{Name: "up", Type: tar.TypeSymlink, Linkname: ".."},
			{Name: "up/" + tag, Body: "x"},
		},
		"hardlink-outside": {{Name: "hl", Type: tar.TypeLink, Linkname: "../" + tag}},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			h := NewSandbox(t, b)
			if err := importBytes(b, h, BuildTar(t, entries...)); err == nil {
				t.Errorf("Import accepted an archive with an entry outside the workspace")
			}
			check := fmt.Sprintf("test ! -e ../%s && test ! -e /tmp/%s && echo clean", tag, tag)
			if got := Sh(t, b, h, check); got != "clean\n" {
				t.Errorf("Import wrote outside the workspace")
			}
		})
	}
}
