package sandbox

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestOutputBufferKeepsSmallOutputExactly(t *testing.T) {
	for _, size := range []int{0, 1, 100, 1000} {
		b := NewOutputBuffer(1000)
		data := strings.Repeat("x", size)
		b.Write([]byte(data))
		o := b.Output()
		if o.Text != data || o.Dropped != 0 || o.Binary {
			t.Errorf("size %d: got %d bytes, dropped %d, binary %v", size, len(o.Text), o.Dropped, o.Binary)
		}
	}
}

// TestOutputBufferKeepsHeadAndTail checks the buffer against the obvious
// reference (first half, last half) for random data in random chunks.
func TestOutputBufferKeepsHeadAndTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 200 {
		limit := 200 + rng.IntN(2000)
		size := rng.IntN(5 * limit)
		data := make([]byte, size)
		for i := range data {
			data[i] = 'a' + byte(rng.IntN(26))
		}
		b := NewOutputBuffer(limit)
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(limit))
			b.Write(rest[:n])
			rest = rest[n:]
		}
		o := b.Output()
		if b.Total() != int64(size) {
			t.Fatalf("iter %d: Total %d, want %d", iter, b.Total(), size)
		}
		if size <= limit {
			if o.Text != string(data) || o.Dropped != 0 {
				t.Fatalf("iter %d: output within the limit was changed", iter)
			}
			continue
		}
		if len(o.Text) > limit {
			t.Fatalf("iter %d: %d bytes kept, limit %d", iter, len(o.Text), limit)
		}
		head, tail, ok := strings.Cut(o.Text, TruncationMarker)
		if !ok {
			t.Fatalf("iter %d: no truncation marker", iter)
		}
		if !bytes.HasPrefix(data, []byte(head)) || !bytes.HasSuffix(data, []byte(tail)) {
			t.Fatalf("iter %d: kept text is not the stream's start and end", iter)
		}
		if want := int64(size - len(head) - len(tail)); o.Dropped != want {
			t.Fatalf("iter %d: Dropped %d, want %d", iter, o.Dropped, want)
		}
		if len(head) < limit/2-len(TruncationMarker) || len(tail) < limit/2-len(TruncationMarker) {
			t.Fatalf("iter %d: head %d / tail %d bytes is less than the limit allows", iter, len(head), len(tail))
		}
	}
}

func TestOutputBufferNeverSplitsRunes(t *testing.T) {
	for _, limit := range []int{100, 101, 102, 103, 257} {
		b := NewOutputBuffer(limit)
		b.Write([]byte(strings.Repeat("é€😀", 500)))
		o := b.Output()
		if !utf8.ValidString(o.Text) || strings.ContainsRune(o.Text, utf8.RuneError) || o.Binary {
			t.Errorf("limit %d: cut produced invalid text or replacement characters: %q", limit, o.Text)
		}
		if len(o.Text) > limit {
			t.Errorf("limit %d: kept %d bytes", limit, len(o.Text))
		}
	}
}

func TestOutputBufferSanitizesBinary(t *testing.T) {
	b := NewOutputBuffer(1000)
	b.Write([]byte("ok\xff\xfe \x00 end"))
	o := b.Output()
	if !o.Binary || !utf8.ValidString(o.Text) || strings.ContainsRune(o.Text, 0) {
		t.Errorf("got %q binary=%v", o.Text, o.Binary)
	}
	if o.Text != "ok\uFFFD \uFFFD end" {
		t.Errorf("got %q", o.Text)
	}

	// Replacement characters are longer than the bytes they replace; the
	// limit still holds.
	b = NewOutputBuffer(100)
	b.Write(bytes.Repeat([]byte("\xffa"), 50))
	if o := b.Output(); len(o.Text) > 100 || !utf8.ValidString(o.Text) || o.Dropped == 0 {
		t.Errorf("binary growth: %d bytes, dropped %d", len(o.Text), o.Dropped)
	}
}

func TestOutputBufferTinyLimit(t *testing.T) {
	b := NewOutputBuffer(10)
	b.Write([]byte(strings.Repeat("abcdefghij", 10)))
	o := b.Output()
	if len(o.Text) > 10 || o.Dropped != 90 || strings.Contains(o.Text, "truncated") {
		t.Errorf("got %q dropped %d", o.Text, o.Dropped)
	}
}

func TestOutputBufferMemoryIsBounded(t *testing.T) {
	b := NewOutputBuffer(1 << 10)
	chunk := bytes.Repeat([]byte("y\n"), 32<<10)
	for range 100 {
		b.Write(chunk)
	}
	if cap(b.head) > 1<<10 || cap(b.tail.buf) > 1<<10 {
		t.Errorf("buffer grew to head %d / tail %d bytes for a 1 KiB limit", cap(b.head), cap(b.tail.buf))
	}
}
