package blobstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/sandbot/sandbot/sandbox"
)

// stores opens each kind of store the product supports: a directory, and
// S3 through the real AWS SDK against an in-process S3 fake on loopback.
func stores(t *testing.T) map[string]*Store {
	t.Helper()
	ctx := context.Background()
	out := map[string]*Store{}

	dir := filepath.Join(t.TempDir(), "snapshots") // not yet created
	fs, err := Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatalf("open file store: %v", err)
	}
	out["file"] = fs

	backend := s3mem.New()
	if err := backend.CreateBucket("snapshots"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	// Static credentials keep the SDK from looking anywhere else (shared
	// config files, instance metadata).
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	s3, err := Open(ctx, "s3://snapshots?region=us-east-1&use_path_style=true&disable_https=true"+
		"&request_checksum_calculation=when_required&response_checksum_validation=when_required"+
		"&endpoint="+srv.URL)
	if err != nil {
		t.Fatalf("open s3 store: %v", err)
	}
	out["s3"] = s3
	for _, s := range out {
		t.Cleanup(func() { s.Close() })
	}
	return out
}

func TestStore(t *testing.T) {
	for kind, s := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			key := sandbox.SnapshotKey("slack:T1:C1:1700000000.0001", 12)
			data := make([]byte, 3<<20+17)
			rand.Read(data)

			n, err := s.Put(ctx, key, bytes.NewReader(data))
			if err != nil || n != int64(len(data)) {
				t.Fatalf("Put = %d, %v; want %d", n, err, len(data))
			}
			if ok, err := s.Exists(ctx, key); err != nil || !ok {
				t.Fatalf("Exists after Put = %v, %v", ok, err)
			}
			if got := readAll(t, s, key); !bytes.Equal(got, data) {
				t.Fatalf("Open returned %d bytes that differ from the %d put", len(got), len(data))
			}

			fork := sandbox.SnapshotKey("slack:T1:C1:1700000000.0002", 12)
			if err := s.Copy(ctx, key, fork); err != nil {
				t.Fatalf("Copy: %v", err)
			}
			if got := readAll(t, s, fork); !bytes.Equal(got, data) {
				t.Fatal("copy differs from the source")
			}

			// A failing reader must not leave an object behind, nor replace
			// the one already there.
			if _, err := s.Put(ctx, key, io.MultiReader(strings.NewReader("partial"), failingReader{})); err == nil {
				t.Fatal("Put succeeded with a failing reader")
			}
			if got := readAll(t, s, key); !bytes.Equal(got, data) {
				t.Fatal("a failed Put replaced the existing snapshot")
			}
			broken := sandbox.SnapshotKey("broken", 1)
			if _, err := s.Put(ctx, broken, io.MultiReader(strings.NewReader("partial"), failingReader{})); err == nil {
				t.Fatal("Put succeeded with a failing reader")
			}
			if ok, _ := s.Exists(ctx, broken); ok {
				t.Fatal("a failed Put left an object")
			}

			// Prefixes are per session: deleting one session's snapshots
			// leaves a session whose ID starts the same way alone.
			a, ab := "sess-a", "sess-a/b"
			for _, k := range []string{sandbox.SnapshotKey(a, 1), sandbox.SnapshotKey(a, 2), sandbox.SnapshotKey(ab, 1), sandbox.SnapshotKey(a+"b", 1)} {
				if _, err := s.Put(ctx, k, strings.NewReader(k)); err != nil {
					t.Fatal(err)
				}
			}
			deleted, err := s.DeletePrefix(ctx, sandbox.SessionPrefix(a))
			if err != nil || deleted != 2 {
				t.Fatalf("DeletePrefix = %d, %v; want 2", deleted, err)
			}
			for k, want := range map[string]bool{
				sandbox.SnapshotKey(a, 1): false, sandbox.SnapshotKey(a, 2): false,
				sandbox.SnapshotKey(ab, 1): true, sandbox.SnapshotKey(a+"b", 1): true,
			} {
				if ok, err := s.Exists(ctx, k); err != nil || ok != want {
					t.Errorf("Exists(%s) after DeletePrefix = %v, %v; want %v", k, ok, err, want)
				}
			}

			missing := sandbox.SnapshotKey("nobody", 1)
			if _, err := s.Open(ctx, missing); !errors.Is(err, sandbox.ErrSnapshotNotFound) {
				t.Errorf("Open(missing): %v, want an error wrapping ErrSnapshotNotFound", err)
			}
			if err := s.Copy(ctx, missing, fork); !errors.Is(err, sandbox.ErrSnapshotNotFound) {
				t.Errorf("Copy(missing): %v, want an error wrapping ErrSnapshotNotFound", err)
			}
			for _, bad := range []string{"", "/abs", "a/../b", "a//b"} {
				if _, err := s.Put(ctx, bad, strings.NewReader("x")); !errors.Is(err, sandbox.ErrBadKey) {
					t.Errorf("Put(%q): %v, want ErrBadKey", bad, err)
				}
			}
			if _, err := s.DeletePrefix(ctx, "sessions"); !errors.Is(err, sandbox.ErrBadKey) {
				t.Errorf("DeletePrefix without trailing slash: %v, want ErrBadKey", err)
			}
		})
	}
}

func TestFileStoreKeepsNoTempFilesOrSidecars(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := sandbox.SnapshotKey("s", 1)
	if _, err := s.Put(context.Background(), key, strings.NewReader("tar")); err != nil {
		t.Fatal(err)
	}
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return nil
	})
	if len(files) != 1 || files[0] != key {
		t.Errorf("store directory holds %v, want just %s", files, key)
	}
}

// A put copies through the store's own buffer (sized to a small object,
// or pooled), not the 1 MiB one the blob writer's ReaderFrom allocates and
// zeroes per call: a model call writes a transcript chunk of a few hundred
// bytes and waits for it.
func TestSmallPutsAllocateLittle(t *testing.T) {
	s, err := Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	body := bytes.Repeat([]byte("x"), 1000)
	put := func(i int, r io.Reader) {
		if _, err := s.Put(ctx, sandbox.SessionPrefix("s")+"transcript/"+strings.Repeat("a", i+1)+".json", r); err != nil {
			t.Fatal(err)
		}
	}
	put(0, io.MultiReader(bytes.NewReader(body))) // fills the pool
	const n = 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 1; i <= n; i++ {
		if i%2 == 0 {
			put(i, bytes.NewReader(body)) // sized: a buffer of its size
		} else {
			put(i, io.MultiReader(bytes.NewReader(body))) // unsized: the pool's
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > n*64<<10 {
		t.Errorf("%d puts of %d bytes allocated %d bytes, want under %d (no 1 MiB buffer per put)", n, len(body), got, n*64<<10)
	}
}

func TestOpenRejectsUnknownScheme(t *testing.T) {
	_, err := Open(context.Background(), "ftp://user:secret@host/x?token=abc")
	if err == nil || !strings.Contains(err.Error(), "file, s3") {
		t.Fatalf("Open(ftp): %v, want an error listing the supported schemes", err)
	}
	if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "abc") {
		t.Errorf("error leaks credentials from the URL: %v", err)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func readAll(t *testing.T, s *Store, key string) []byte {
	t.Helper()
	r, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("Open(%s): %v", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return data
}

func TestDeleteOneKey(t *testing.T) {
	for kind, s := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			old := sandbox.SnapshotKey("session/console//local/x", 1)
			cur := sandbox.SnapshotKey("session/console//local/x", 2)
			for _, k := range []string{old, cur} {
				if _, err := s.Put(ctx, k, bytes.NewReader([]byte(k))); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Delete(ctx, old); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if ok, _ := s.Exists(ctx, old); ok {
				t.Fatal("deleted key still exists")
			}
			if ok, _ := s.Exists(ctx, cur); !ok {
				t.Fatal("Delete removed a neighbouring key")
			}
			if err := s.Delete(ctx, old); err != nil {
				t.Fatalf("deleting a missing key must succeed (retries): %v", err)
			}
		})
	}
}
