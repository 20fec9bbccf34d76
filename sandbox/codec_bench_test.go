package sandbox

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// Snapshot compression, measured on two workspaces this machine always
// has, each codec in the same run:
//
//	go test -run '^$' -bench Codec -benchtime 3x ./sandbox
//
// "source" is a tar of $GOROOT/src/cmd (Go source and test data), "build"
// a tar of $GOROOT/pkg/tool (compiled binaries). The ratio metric is
// stored bytes over tar bytes; MB/s is of the tar.

func tarOf(b *testing.B, dir string) []byte {
	b.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	tw.Close()
	return buf.Bytes()
}

type codec struct {
	name string
	enc  func(io.Writer) io.WriteCloser
	dec  func(io.Reader) io.Reader
}

func codecs(b *testing.B) []codec {
	zstdAt := func(level zstd.EncoderLevel) func(io.Writer) io.WriteCloser {
		return func(w io.Writer) io.WriteCloser {
			e, err := zstd.NewWriter(w, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1))
			if err != nil {
				b.Fatal(err)
			}
			return e
		}
	}
	zstdDec := func(r io.Reader) io.Reader {
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	gzipAt := func(level int) func(io.Writer) io.WriteCloser {
		return func(w io.Writer) io.WriteCloser {
			z, _ := gzip.NewWriterLevel(w, level)
			return z
		}
	}
	gzipDec := func(r io.Reader) io.Reader {
		z, err := gzip.NewReader(r)
		if err != nil {
			b.Fatal(err)
		}
		return z
	}
	return []codec{
		{"gzip-default", gzipAt(gzip.DefaultCompression), gzipDec},
		{"gzip-fastest", gzipAt(gzip.BestSpeed), gzipDec},
		{"zstd-default", zstdAt(zstd.SpeedDefault), zstdDec},
		{"zstd-fastest", zstdAt(zstd.SpeedFastest), zstdDec},
	}
}

func BenchmarkCodec(b *testing.B) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	goroot := strings.TrimSpace(string(out))
	corpora := []struct{ name, dir string }{
		{"source", filepath.Join(goroot, "src", "cmd")},
		{"build", filepath.Join(goroot, "pkg", "tool")},
	}
	for _, corpus := range corpora {
		data := tarOf(b, corpus.dir)
		for _, c := range codecs(b) {
			var packed bytes.Buffer
			w := c.enc(&packed)
			w.Write(data)
			w.Close()
			ratio := float64(packed.Len()) / float64(len(data))
			b.Run(corpus.name+"/"+c.name+"/compress", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					w := c.enc(io.Discard)
					if _, err := w.Write(data); err != nil {
						b.Fatal(err)
					}
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(ratio, "ratio") // after the loop, which resets metrics
			})
			b.Run(corpus.name+"/"+c.name+"/decompress", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if _, err := io.Copy(io.Discard, c.dec(bytes.NewReader(packed.Bytes()))); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
