package sandbox

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// DefaultOutputCap is the per-stream output cap backends use when neither
// the command nor their options set one.
const DefaultOutputCap = 64 << 10

// TruncationMarker replaces the middle of an output that exceeded its cap.
const TruncationMarker = "\n[... output truncated ...]\n"

// OutputBuffer keeps a bounded view of a stream: the first half of the cap
// and the most recent second half, counting everything in between. A
// command that prints gigabytes therefore costs at most cap bytes of
// memory, while the reader still sees how it started and how it ended.
//
// Backends share it so every backend truncates and sanitizes output the
// same way. It is not safe for concurrent use; use one per stream.
type OutputBuffer struct {
	limit   int
	headCap int
	head    []byte
	tail    ring
	total   int64
}

// NewOutputBuffer returns a buffer that keeps at most limit bytes. A limit
// of zero or less means DefaultOutputCap.
func NewOutputBuffer(limit int) *OutputBuffer {
	if limit <= 0 {
		limit = DefaultOutputCap
	}
	headCap := limit / 2
	return &OutputBuffer{
		limit:   limit,
		headCap: headCap,
		head:    make([]byte, 0, min(headCap, 4096)),
		tail:    ring{size: limit - headCap},
	}
}

// Write keeps what fits and counts the rest. It never fails, so a flood of
// output is drained rather than blocking the command.
func (b *OutputBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.total += int64(n)
	if room := b.headCap - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	b.tail.write(p)
	return n, nil
}

// Total is the number of bytes written so far, kept or not.
func (b *OutputBuffer) Total() int64 { return b.total }

// Output is the sanitized content of an OutputBuffer.
type Output struct {
	// Text is valid UTF-8 of at most the buffer's limit in bytes.
	Text string
	// Dropped counts bytes of the stream that are not in Text.
	Dropped int64
	// Binary reports that invalid UTF-8 or NUL bytes were replaced.
	Binary bool
}

// Output returns what was kept, as valid UTF-8 no longer than the limit.
// When bytes were dropped, TruncationMarker separates the beginning from
// the end (if the limit leaves room for it). Invalid UTF-8 sequences and
// NULs become U+FFFD; because a replacement can be longer than what it
// replaces, a binary stream may lose a few more bytes to stay within the
// limit, and Dropped then counts replaced text rather than raw bytes.
func (b *OutputBuffer) Output() Output {
	tail := b.tail.bytes()
	kept := int64(len(b.head) + len(tail))
	var out Output
	var h, t string
	if kept == b.total {
		whole := make([]byte, 0, kept)
		whole = append(append(whole, b.head...), tail...)
		s, bin := sanitize(whole)
		out.Binary = bin
		if len(s) <= b.limit {
			out.Text = s
			return out
		}
		mid := runeStart(s, len(s)/2)
		h, t = s[:mid], s[mid:]
	} else {
		var bh, bt bool
		h, bh = sanitize(trimPartialEnd(b.head))
		t, bt = sanitize(trimPartialStart(tail))
		out.Binary = bh || bt
	}
	marker := TruncationMarker
	budget := b.limit - len(marker)
	if budget < 2*len(marker) {
		// Too small for a marker to be worth its bytes.
		marker, budget = "", b.limit
	}
	hb := budget / 2
	if len(t) < budget-hb {
		hb = budget - len(t)
	}
	if len(h) > hb {
		h = h[:runeStart(h, hb)]
	}
	if tb := budget - len(h); len(t) > tb {
		t = t[runeEnd(t, len(t)-tb):]
	}
	out.Text = h + marker + t
	out.Dropped = max(b.total-int64(len(h)+len(t)), 1)
	return out
}

// sanitize makes p valid UTF-8 without NULs.
func sanitize(p []byte) (string, bool) {
	binary := bytes.IndexByte(p, 0) >= 0 || !utf8.Valid(p)
	if !binary {
		return string(p), false
	}
	s := strings.ToValidUTF8(string(p), "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD"), true
}

// runeStart returns the largest index <= i that starts a rune in s.
func runeStart(s string, i int) int {
	if i >= len(s) {
		return len(s)
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// runeEnd returns the smallest index >= i that starts a rune in s (or len).
func runeEnd(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// trimPartialEnd drops an incomplete rune cut off at the end of p, so the
// cut does not turn into a replacement character.
func trimPartialEnd(p []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(p); i++ {
		c := p[len(p)-i]
		if c < utf8.RuneSelf {
			return p
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[len(p)-i:]) {
				return p[:len(p)-i]
			}
			return p
		}
	}
	return p
}

// trimPartialStart drops continuation bytes of a rune cut off at the start.
func trimPartialStart(p []byte) []byte {
	for i := 0; i < utf8.UTFMax && i < len(p); i++ {
		if utf8.RuneStart(p[i]) {
			return p[i:]
		}
	}
	return p
}

// ring keeps the last size bytes written to it. It grows lazily, so small
// outputs under a large cap stay small.
type ring struct {
	size  int
	buf   []byte
	start int // index of the oldest byte once buf is full
}

func (r *ring) write(p []byte) {
	if r.size == 0 {
		return
	}
	if len(p) >= r.size {
		if cap(r.buf) < r.size {
			r.buf = make([]byte, r.size)
		}
		r.buf = r.buf[:r.size]
		copy(r.buf, p[len(p)-r.size:])
		r.start = 0
		return
	}
	for len(p) > 0 {
		if len(r.buf) < r.size {
			k := min(r.size-len(r.buf), len(p))
			r.buf = append(r.buf, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(r.buf[r.start:], p)
		p = p[k:]
		r.start += k
		if r.start == r.size {
			r.start = 0
		}
	}
}

func (r *ring) bytes() []byte {
	if len(r.buf) < r.size || r.start == 0 {
		return r.buf
	}
	out := make([]byte, 0, r.size)
	return append(append(out, r.buf[r.start:]...), r.buf[:r.start]...)
}

// FillOutput copies captured stdout and stderr into r, with the dropped
// byte count, the truncation flag and whether either looked binary.
func (r *Result) FillOutput(stdout, stderr *OutputBuffer) {
	out, errOut := stdout.Output(), stderr.Output()
	r.Stdout, r.Stderr = out.Text, errOut.Text
	r.DroppedBytes = out.Dropped + errOut.Dropped
	r.Binary = out.Binary || errOut.Binary
	r.Truncated = r.DroppedBytes > 0
}

// Skip counts n bytes of the stream that were never read, as a backend
// does that fetches only the head and tail of a command's output from a
// file in the sandbox: write the head, Skip what lies between, write the
// tail. HeadTail gives the sizes to fetch.
func (b *OutputBuffer) Skip(n int64) {
	if n > 0 {
		b.total += n
	}
}

// HeadTail returns how many bytes of a stream's beginning and of its end a
// buffer of this limit keeps: fetching that much of each is enough to
// reproduce what the buffer would hold had it seen the whole stream.
func HeadTail(limit int) (head, tail int) {
	if limit <= 0 {
		limit = DefaultOutputCap
	}
	return limit / 2, limit - limit/2
}
