package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// These tests check the archive rewriting backends do on both sides of a
// copy into or out of a sandbox (Docker's archive API, a cloud provider's
// file upload).

type member struct {
	name, link string
	typ        byte
	mode       int64
	uid        int
	body       string
}

func makeTar(t *testing.T, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		hdr := &tar.Header{Name: m.name, Linkname: m.link, Typeflag: m.typ, Mode: m.mode, Uid: m.uid, Gid: m.uid,
			Uname: "someone", Size: int64(len(m.body)), ModTime: time.Unix(1700000000, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, m.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func listTar(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		out = append(out, fmt.Sprintf("%s %c %o %d:%d %s %q %s", hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Linkname, body))
	}
}

func TestRerootExport(t *testing.T) {
	in := makeTar(t,
		member{name: "workspace/", typ: tar.TypeDir, mode: 0o40755, uid: 1000},
		member{name: "workspace/a", typ: tar.TypeReg, mode: 0o104755, uid: 1000, body: "A"},
		member{name: "workspace/d/", typ: tar.TypeDir, mode: 0o41777, uid: 1000},
		member{name: "workspace/d/h", typ: tar.TypeLink, link: "workspace/a", uid: 1000},
		member{name: "workspace/d/s", typ: tar.TypeSymlink, link: "../a", mode: 0o777, uid: 1000},
		member{name: "workspace/fifo", typ: tar.TypeFifo, mode: 0o644, uid: 1000},
	)
	var out bytes.Buffer
	if err := RerootArchive(tar.NewReader(bytes.NewReader(in)), tar.NewWriter(&out), "workspace/"); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(listTar(t, out.Bytes()), "\n")
	want := strings.Join([]string{
		`a 0 755 0:0  "" A`,
		`d/ 5 1777 0:0  "" `,
		`d/h 1 0 0:0  "a" `,
		`d/s 2 777 0:0  "../a" `,
	}, "\n")
	if got != want {
		t.Errorf("rerooted:\n%s\nwant:\n%s", got, want)
	}
	bad := makeTar(t, member{name: "workspace/h", typ: tar.TypeLink, link: "etc/passwd"})
	if err := RerootArchive(tar.NewReader(bytes.NewReader(bad)), tar.NewWriter(io.Discard), "workspace/"); err == nil {
		t.Error("a hard link out of the workspace was exported")
	}
}

func rewriteImport(t *testing.T, data []byte) ([]string, error) {
	t.Helper()
	var out bytes.Buffer
	err := VetArchive(context.Background(), bytes.NewReader(data), tar.NewWriter(&out), Owner{UID: 1000, GID: 1000})
	if err != nil {
		return nil, err
	}
	return listTar(t, out.Bytes()), nil
}

func TestImportRewrite(t *testing.T) {
	got, err := rewriteImport(t, makeTar(t,
		member{name: "./", typ: tar.TypeDir, mode: 0o700},
		member{name: "./x/y/f", typ: tar.TypeReg, mode: 0o6755, body: "F"},
		member{name: "x/", typ: tar.TypeDir, mode: 0o500},
		member{name: "x/l", typ: tar.TypeLink, link: "x/y/f"},
		member{name: "s", typ: tar.TypeSymlink, link: "/etc"},
		member{name: "s", typ: tar.TypeDir, mode: 0o755}, // a directory replaces the symlink
		member{name: "s/ok", typ: tar.TypeReg, mode: 0o644, body: "ok"},
		member{name: "dev", typ: tar.TypeChar, mode: 0o666},
	))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`x/ 5 755 1000:1000  "" `,
		`x/y/ 5 755 1000:1000  "" `,
		`x/y/f 0 755 1000:1000  "" F`,
		`x/ 5 500 1000:1000  "" `,
		`x/l 1 0 1000:1000  "x/y/f" `,
		`s 2 0 1000:1000  "/etc" `,
		`s/ 5 755 1000:1000  "" `,
		`s/ok 0 644 1000:1000  "" ok`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rewritten:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for name, ms := range map[string][]member{
		"dotdot":               {{name: "a/../../x", typ: tar.TypeReg}},
		"absolute":             {{name: "/etc/x", typ: tar.TypeReg}},
		"through symlink":      {{name: "s", typ: tar.TypeSymlink, link: "."}, {name: "s/x", typ: tar.TypeReg}},
		"through deep symlink": {{name: "a/s", typ: tar.TypeSymlink, link: "/"}, {name: "a/s/b/x", typ: tar.TypeReg}},
		"hard link to unknown": {{name: "h", typ: tar.TypeLink, link: "etc/passwd"}},
		"hard link to a dir":   {{name: "d", typ: tar.TypeDir}, {name: "h", typ: tar.TypeLink, link: "d"}},
		"below a file":         {{name: "f", typ: tar.TypeReg}, {name: "f/x", typ: tar.TypeReg}},
		"empty symlink":        {{name: "s", typ: tar.TypeSymlink}},
	} {
		if _, err := rewriteImport(t, makeTar(t, ms...)); !errors.Is(err, ErrUnsafeArchive) {
			t.Errorf("%s: %v, want ErrUnsafeArchive", name, err)
		}
	}
	// The last member is all zeros, which must not pass for the marker.
	whole := makeTar(t, member{name: "f", typ: tar.TypeReg, body: "0123456789"}, member{name: "z", typ: tar.TypeReg, body: strings.Repeat("\x00", 4096)})
	for _, cut := range []int{600, 1024, len(whole) - 1024, len(whole) - 512} {
		if _, err := rewriteImport(t, whole[:cut]); err == nil {
			t.Errorf("an archive cut at %d of %d bytes was accepted", cut, len(whole))
		}
	}
	if _, err := rewriteImport(t, whole); err != nil {
		t.Errorf("the whole archive: %v", err)
	}
}

func TestListingDigestRacy(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	line := func(mtime time.Time) string {
		ts := mtime.Format(statTime)
		return "81a4\t3\t" + ts + "\t" + ts + "\t42\t'./f'\n"
	}
	for _, tc := range []struct {
		name  string
		input string
		racy  bool
	}{
		{"old", line(now.Add(-time.Hour)), false},
		{"recent", line(now.Add(-10 * time.Millisecond)), true},
		{"future", line(now.Add(time.Second)), true},
		{"find error", "find: ./locked: Permission denied\n", false},
		{"unparsable time", "81a4\t3\tyesterday\tyesterday\t42\t'./f'\n", true},
	} {
		r := NewListingDigest(now.Add(-100 * time.Millisecond))
		// Split the input to exercise lines spanning writes.
		half := len(tc.input) / 2
		r.Write([]byte(tc.input[:half]))
		r.Write([]byte(tc.input[half:]))
		if r.Racy() != tc.racy {
			t.Errorf("%s: racy %v, want %v", tc.name, r.Racy(), tc.racy)
		}
	}
}

func TestRerootTarDotNames(t *testing.T) {
	// What `tar -C ws -cf - .` writes inside a cloud sandbox.
	in := makeTar(t,
		member{name: "./", typ: tar.TypeDir, mode: 0o755},
		member{name: "./a", typ: tar.TypeReg, mode: 0o644, body: "A"},
		member{name: "./d/", typ: tar.TypeDir, mode: 0o755},
		member{name: "./d/h", typ: tar.TypeLink, link: "./a"},
	)
	var out bytes.Buffer
	if err := RerootArchive(tar.NewReader(bytes.NewReader(in)), tar.NewWriter(&out), ""); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(listTar(t, out.Bytes()), "\n")
	want := strings.Join([]string{`a 0 644 0:0  "" A`, `d/ 5 755 0:0  "" `, `d/h 1 0 0:0  "a" `}, "\n")
	if got != want {
		t.Errorf("rerooted:\n%s\nwant:\n%s", got, want)
	}
}

func TestOutputBufferSkipMatchesWholeStream(t *testing.T) {
	stream := make([]byte, 10000)
	for i := range stream {
		stream[i] = 'a' + byte(i%26)
	}
	const limit = 1000
	whole := NewOutputBuffer(limit)
	whole.Write(stream)
	head, tail := HeadTail(limit)
	parts := NewOutputBuffer(limit)
	parts.Write(stream[:head])
	parts.Skip(int64(len(stream) - head - tail))
	parts.Write(stream[len(stream)-tail:])
	if w, p := whole.Output(), parts.Output(); w != p {
		t.Errorf("head+skip+tail gives %+v, the whole stream %+v", p, w)
	}
}

// A sandbox whose tools print one endless line instead of a listing
// (they are the agent's to replace) costs the worker no memory for it.
func TestListingDigestBoundsALine(t *testing.T) {
	d := NewListingDigest(time.Now())
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for range 64 {
		d.Write(chunk)
	}
	if !d.Racy() {
		t.Error("a 64 MiB line did not make the fingerprint unique")
	}
	if cap(d.partial) > 2*maxListingLine+len(chunk) {
		t.Errorf("the digest holds %d bytes of one line", cap(d.partial))
	}
}
