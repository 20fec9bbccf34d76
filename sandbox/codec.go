package sandbox

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"github.com/sandbot/sandbot/session"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Snapshots are stored as zstd-compressed tar streams. Backends export and
// import plain tar; the activities compress on the way into the store and
// decompress on the way out, so no backend knows about compression.
//
// zstd over gzip: on a source tree and on build output it compresses at
// several times gzip's speed to a smaller stream, and decompresses faster
// still (docs/PERFORMANCE.md, "Snapshot compression"). Snapshots written
// before compression are plain tar and gzip streams are read too: readers
// sniff the magic number, so a key's name never has to change (keys are
// chosen by workflow code, and history keeps them).

// zstdMagic and gzipMagic open every stream of their format.
var (
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	gzipMagic = []byte{0x1f, 0x8b}
)

// compressSnapshot returns a writer that compresses into w. Close flushes
// the last frame; it does not close w.
func compressSnapshot(w io.Writer) (io.WriteCloser, error) {
	// One goroutine: the archive is produced by one backend stream, and a
	// snapshot must not take every core of a worker that also runs
	// commands. The window stays at the level's default (8 MiB), which
	// bounds the encoder's memory whatever the workspace size.
	enc, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	return enc, nil
}

// maxDecoderWindow bounds the window a zstd stream may ask for when it is
// read back, and so the decoder's memory: a stream claiming a larger one is
// refused rather than allowed to make the worker allocate it.
const maxDecoderWindow = 64 << 20

// ReadSnapshot returns the plain tar stream of a stored snapshot,
// whichever of zstd, gzip or plain tar it is. Close releases the decoder;
// it does not close r.
func ReadSnapshot(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	switch {
	case bytes.HasPrefix(head, zstdMagic):
		dec, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxDecoderWindow))
		if err != nil {
			return nil, fmt.Errorf("zstd snapshot: %w", err)
		}
		return zstdReadCloser{dec}, nil
	case bytes.HasPrefix(head, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip snapshot: %w", err)
		}
		return zr, nil
	}
	return io.NopCloser(br), nil // a plain tar from before compression
}

// zstdReadCloser adapts zstd.Decoder, whose Close returns nothing.
type zstdReadCloser struct{ d *zstd.Decoder }

func (z zstdReadCloser) Read(p []byte) (int, error) { return z.d.Read(p) }
func (z zstdReadCloser) Close() error               { z.d.Close(); return nil }

// ErrOverLimit is what a limitWriter's refused write returns.
var ErrOverLimit = errors.New("over the limit")

// limitWriter passes writes through to w and counts them; the write that
// would take the total past limit fails with err and nothing of it is
// passed on. A zero limit means no limit.
type limitWriter struct {
	w       io.Writer
	limit   int64
	n       int64
	err     error
	refused bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.limit > 0 && l.n+int64(len(p)) > l.limit {
		l.refused = true
		return 0, l.err
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}

// over reports whether a write was refused for passing the limit.
func (l *limitWriter) over() bool { return l.refused }

// FormatBytes writes a size for people: 512 B, 1.5 KiB, 4 GiB.
func FormatBytes(n int64) string { return session.FormatBytes(n) }
