package e2b_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"testing"

	fakee2b "github.com/sandbot/sandbot/internal/fake/e2b"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/e2b"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// BenchmarkExecOverhead compares one trivial command through the backend
// (TTL bookkeeping, the Start stream, the process-group wrapper and the
// sandbox's shell, here under bubblewrap) with a bare authenticated GET to
// the same fake, the floor any HTTP client pays:
//
//	go test ./sandbox/e2b/ -run '^$' -bench ExecOverhead
func BenchmarkExecOverhead(b *testing.B) {
	fake := fakee2b.Start(b, fakee2b.Options{ManualExpiry: true})
	be := newBackend(b, fake, e2b.Options{})
	h := sandboxtest.NewSandbox(b, be)
	ctx := context.Background()
	b.Run("bare-http-roundtrip", func(b *testing.B) {
		for b.Loop() {
			req, _ := http.NewRequestWithContext(ctx, "GET", fake.URL()+"/sandboxes/"+h.ID, nil)
			req.Header.Set("X-API-Key", fake.Options().APIKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
	b.Run("e2b-exec-true", func(b *testing.B) {
		for b.Loop() {
			res, err := be.Exec(ctx, h, sandbox.Cmd{Command: "true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("Exec: %+v, %v", res, err)
			}
		}
	})
}

// randomTar is a workspace archive of n files of size bytes each of
// incompressible data.
func randomTar(b testing.TB, n, size int) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	chunk := make([]byte, size)
	for i := range n {
		_, _ = rand.Read(chunk)
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%d.bin", i), Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}); err != nil {
			b.Fatal(err)
		}
		_, _ = tw.Write(chunk)
	}
	_ = tw.Close()
	return buf.Bytes()
}

// BenchmarkSnapshot50MB moves a 50 MB workspace (five 10 MB files of
// random data) out of and into a sandbox:
//
//	go test ./sandbox/e2b/ -run '^$' -bench Snapshot50MB -benchtime 3x
func BenchmarkSnapshot50MB(b *testing.B) {
	fake := fakee2b.Start(b, fakee2b.Options{ManualExpiry: true})
	be := newBackend(b, fake, e2b.Options{})
	h := sandboxtest.NewSandbox(b, be)
	ctx := context.Background()
	archive := randomTar(b, 5, 10<<20)
	if err := be.Import(ctx, h, bytes.NewReader(archive)); err != nil {
		b.Fatal(err)
	}
	b.Run("export", func(b *testing.B) {
		b.SetBytes(50 << 20)
		for b.Loop() {
			if err := be.Export(ctx, h, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("import", func(b *testing.B) {
		b.SetBytes(50 << 20)
		for b.Loop() {
			if err := be.Import(ctx, h, bytes.NewReader(archive)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
