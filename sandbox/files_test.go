package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/redact"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// mapFetcher serves attachments from memory, by URL, honouring max as
// attach.Fetcher does.
type mapFetcher map[string][]byte

func (m mapFetcher) Fetch(_ context.Context, a session.Attachment, max int64, w io.Writer) (int64, string, error) {
	data, ok := m[a.URL]
	if !ok {
		return 0, "", errors.New("404 not found")
	}
	if int64(len(data)) > max {
		n, _ := w.Write(data[:max+1])
		return int64(n), "", fmt.Errorf("fetch: %w", sandbox.ErrAttachmentTooLarge)
	}
	n, err := w.Write(data)
	return int64(n), "", err
}

// noTree hides the local backend's Tree capability, so the activities
// reach the workspace with commands, as they do in containers.
type noTree struct{ sandbox.Backend }

func png(n int) []byte {
	return append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{7}, n)...)
}

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"report.pdf":                         "report.pdf",
		"../../etc/passwd":                   "passwd",
		`..\..\windows\win.ini`:              "win.ini",
		"..":                                 "file",
		".":                                  "file",
		"":                                   "file",
		".bashrc":                            "bashrc",
		"-rf":                                "rf",
		"a\x00b\x1b[31mc.txt":                "a_b__31mc.txt",
		"evil\u202egnp.exe":                  "evil_gnp.exe",
		"$(reboot)`id`.sh":                   "__reboot__id_.sh",
		"sp ace\nline.txt":                   "sp ace_line.txt",
		strings.Repeat("x", 300) + ".tar.gz": strings.Repeat("x", 97) + ".gz",
	} {
		if got := sandbox.SafeName(in); got != want {
			t.Errorf("SafeName(%q) = %q, want %q", in, got, want)
		}
	}
	taken := map[string]bool{"a.png": true, "a-2.png": true}
	if got := sandbox.UniqueName("a.png", taken); got != "a-3.png" {
		t.Errorf("UniqueName = %q", got)
	}
}

func TestSaveAttachments(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(b sandbox.Backend) sandbox.Backend
	}{
		{"tree", func(b sandbox.Backend) sandbox.Backend { return b }},
		{"commands", func(b sandbox.Backend) sandbox.Backend { return noTree{b} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			backends, err := sandbox.NewBackends(tc.wrap(f.local))
			if err != nil {
				t.Fatal(err)
			}
			f.acts.Backends = backends
			big := bytes.Repeat([]byte("b"), 150<<10) // several command chunks
			f.acts.Fetcher = mapFetcher{"u/notes": []byte("hello"), "u/dup": []byte("second"), "u/big": big,
				"u/img": png(100), "u/huge": make([]byte, 2000), "u/liar": make([]byte, 3000)}
			f.acts.Attach = sandbox.AttachLimits{MaxFiles: 6, MaxFileBytes: 200 << 10, MaxTotalBytes: 400 << 10, VisionMaxBytes: 1 << 20}
			h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s-files", Backend: "local"}).Handle
			res, err := run[sandbox.SaveAttachmentsResult](f.env, f.acts.SaveAttachments, sandbox.SaveAttachmentsRequest{Handle: h, Files: []session.Attachment{
				{Name: "../../notes.txt", Size: 5, URL: "u/notes"},
				{Name: "notes.txt", Size: 6, URL: "u/dup"},
				{Name: "big.bin", Size: int64(len(big)), URL: "u/big"},
				{Name: "pic.png", Size: 108, MimeType: "image/png", URL: "u/img"},
				{Name: "gone.txt", Size: 1, URL: "u/missing"},
				{Name: "huge.iso", Size: 1 << 30, URL: "u/huge"},
				{Name: "seventh.txt", Size: 1, URL: "u/notes"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			paths := map[string]string{}
			for _, s := range res.Saved {
				paths[s.Name] = s.Path
			}
			if paths["../../notes.txt"] != "attachments/notes.txt" || paths["notes.txt"] != "attachments/notes-2.txt" || paths["pic.png"] != "attachments/pic.png" {
				t.Fatalf("saved %+v", res.Saved)
			}
			ws := h.Workdir
			if b, _ := os.ReadFile(filepath.Join(ws, "attachments/notes.txt")); string(b) != "hello" {
				t.Fatalf("notes.txt = %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "attachments/big.bin")); !bytes.Equal(b, big) {
				t.Fatalf("big.bin has %d bytes, want %d", len(b), len(big))
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "notes.txt")); err == nil {
				t.Fatal("a file was written outside the workspace")
			}
			var img *session.ImageRef
			for _, s := range res.Saved {
				if s.Image != nil {
					img = s.Image
				}
			}
			if img == nil || img.MimeType != "image/png" || !strings.HasPrefix(img.Key, sandbox.SessionPrefix("s-files")) {
				t.Fatalf("image ref %+v", img)
			}
			reasons := map[string]string{}
			for _, r := range res.Refused {
				reasons[r.Name] = r.Reason
			}
			if !strings.Contains(reasons["gone.txt"], "could not be downloaded") ||
				!strings.Contains(reasons["huge.iso"], "1 GiB") || !strings.Contains(reasons["huge.iso"], "SANDBOT_ATTACH_MAX_FILE_BYTES") ||
				!strings.Contains(reasons["seventh.txt"], "at most 6 files") || len(res.Refused) != 3 {
				t.Fatalf("refused %+v", res.Refused)
			}
		})
	}
}

// TestSaveAttachmentsNeverFollowsASymlink is the attack: the agent turns
// attachments/ (or a file in it) into a symlink to a directory outside the
// workspace, hoping the worker writes the next attachment there.
func TestSaveAttachmentsNeverFollowsASymlink(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(b sandbox.Backend) sandbox.Backend
	}{
		{"tree", func(b sandbox.Backend) sandbox.Backend { return b }},
		{"commands", func(b sandbox.Backend) sandbox.Backend { return noTree{b} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			backends, _ := sandbox.NewBackends(tc.wrap(f.local))
			f.acts.Backends = backends
			f.acts.Fetcher = mapFetcher{"u/x": []byte("payload")}
			h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s-link", Backend: "local"}).Handle
			outside := t.TempDir()
			if err := os.Symlink(outside, filepath.Join(h.Workdir, session.AttachmentsDir)); err != nil {
				t.Fatal(err)
			}
			res, err := run[sandbox.SaveAttachmentsResult](f.env, f.acts.SaveAttachments, sandbox.SaveAttachmentsRequest{Handle: h, Files: []session.Attachment{{Name: "x.txt", Size: 7, URL: "u/x"}}})
			if err == nil && len(res.Saved) > 0 {
				t.Fatalf("saved through a symlink: %+v", res)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("the worker wrote outside the workspace: %v", ents)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(b sandbox.Backend) sandbox.Backend
	}{
		{"tree", func(b sandbox.Backend) sandbox.Backend { return b }},
		{"commands", func(b sandbox.Backend) sandbox.Backend { return noTree{b} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			backends, _ := sandbox.NewBackends(tc.wrap(f.local))
			f.acts.Backends = backends
			f.acts.ShareMaxBytes = 1000
			f.acts.Redactor = redact.New(redact.Secret{Name: "SANDBOT_MODEL_API_KEY", Value: "sk-verysecretvalue123"})
			h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s-read", Backend: "local"}).Handle
			ws := h.Workdir
			secretDir := t.TempDir()
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.WriteFile(filepath.Join(secretDir, "environ"), []byte("TOKEN=xyz"), 0o644))
			must(os.MkdirAll(filepath.Join(ws, "out"), 0o755))
			must(os.WriteFile(filepath.Join(ws, "out/chart.png"), png(50), 0o644))
			must(os.WriteFile(filepath.Join(ws, "big.log"), bytes.Repeat([]byte("x"), 1001), 0o644))
			must(os.WriteFile(filepath.Join(ws, "leak.txt"), []byte("key: sk-verysecretvalue123"), 0o644))
			must(os.Symlink(filepath.Join(secretDir, "environ"), filepath.Join(ws, "escape")))
			must(os.Symlink("out/chart.png", filepath.Join(ws, "inside-link")))

			res, err := run[sandbox.ReadFileResult](f.env, f.acts.ReadFile, sandbox.ReadFileRequest{Handle: h, Path: "out/chart.png"})
			if err != nil || res.Name != "chart.png" || res.MimeType != "image/png" || !bytes.Equal(res.Data, png(50)) {
				t.Fatalf("chart: %+v %v", res.MimeType, err)
			}
			if res, err := run[sandbox.ReadFileResult](f.env, f.acts.ReadFile, sandbox.ReadFileRequest{Handle: h, Path: filepath.Join(ws, "inside-link")}); err != nil || res.Path != "inside-link" {
				t.Fatalf("absolute path to a symlink inside: %+v %v", res.Path, err)
			}
			for path, want := range map[string]string{
				"escape":                    "leads outside the workspace",
				"../../etc/passwd":          "outside the workspace",
				"/etc/passwd":               "outside the workspace",
				"out":                       "is a directory",
				".":                         "the workspace itself",
				"big.log":                   "SANDBOT_SHARE_MAX_BYTES",
				"nope.txt":                  "does not exist",
				"leak.txt":                  "contains a secret",
				filepath.Join(ws, "escape"): "leads outside the workspace",
			} {
				_, err := run[sandbox.ReadFileResult](f.env, f.acts.ReadFile, sandbox.ReadFileRequest{Handle: h, Path: path})
				ae := appErr(t, err, sandbox.ErrTypeFileRefused)
				if !strings.Contains(ae.Message(), want) {
					t.Errorf("%s: %q, want it to say %q", path, ae.Message(), want)
				}
			}
		})
	}
}
