package daytona_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"testing"

	fakedaytona "github.com/sandbot/sandbot/internal/fake/daytona"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/daytona"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// BenchmarkExecOverhead compares one trivial command through the Backend
// (session, async exec, status polls, output collection, session delete)
// with a bare authenticated HTTP round trip to the same fake:
//
//	go test ./sandbox/daytona/ -run '^$' -bench . -benchtime 20x
func BenchmarkExecOverhead(b *testing.B) {
	srv := fakedaytona.Start(b, fakedaytona.Options{})
	be := newBackend(b, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(b, be)
	ctx := context.Background()
	b.Run("bare-http-roundtrip", func(b *testing.B) {
		for b.Loop() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/sandbox/"+h.ID, nil)
			req.Header.Set("Authorization", "Bearer "+srv.APIKey())
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("GET: %v %v", resp, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("daytona-exec-true", func(b *testing.B) {
		for b.Loop() {
			res, err := be.Exec(ctx, h, sandbox.Cmd{Command: "true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("Exec: %+v, %v", res, err)
			}
		}
	})
}

// BenchmarkSnapshot50MB moves a workspace of 50 MB of incompressible data
// in five files out of and into a sandbox.
func BenchmarkSnapshot50MB(b *testing.B) {
	const size = 50 << 20
	srv := fakedaytona.Start(b, fakedaytona.Options{})
	be := newBackend(b, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(b, be)
	ctx := context.Background()
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	for i := range 5 {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("f%d.bin", i), Mode: 0o644, Size: size / 5, Typeflag: tar.TypeReg}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.CopyN(tw, rand.Reader, size/5); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	if err := be.Import(ctx, h, bytes.NewReader(archive.Bytes())); err != nil {
		b.Fatal(err)
	}
	b.Run("export", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if err := be.Export(ctx, h, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("import", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if err := be.Import(ctx, h, bytes.NewReader(archive.Bytes())); err != nil {
				b.Fatal(err)
			}
		}
	})
}
