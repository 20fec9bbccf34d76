package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"
)

// Workspace content objects (see manifest.go). An object is one byte of
// encoding, then the content: objRaw as it is, objZstd compressed. Small
// contents that zstd does not shrink are stored raw, so a tree of tiny or
// already-compressed files does not pay for frames that save nothing.
const (
	objRaw  = 0x00
	objZstd = 0x01
)

// smallObject is the largest content read whole into memory (when a
// snapshot hashes it, and when a restore prefetches it); larger files
// stream, and a snapshot of a tar stream spools them to a temporary file.
const smallObject = 1 << 20

// putWorkers bounds the objects written (and fetched) at once: enough to
// hide a remote store's latency, few enough that a snapshot does not take
// every core of a worker that also runs commands.
const putWorkers = 4

// walkWorkers is how many directories a snapshot reads at once. Reading
// stats is mostly waiting in the kernel, so more walkers than cores
// still helps (20,000 files: 38 ms with 4, 35 ms with 8 on two cores).
const walkWorkers = 8

// ObjectReuseWindow is how recently an object that no manifest the
// snapshot started from names must have been written for the snapshot to
// reuse it rather than write it again. The garbage collector deletes only
// unreferenced objects older than SweepGrace, so an object reused within
// this window outlives any snapshot that takes less than the rest of the
// grace to write its manifest; an older one is written again, which resets
// its age.
const ObjectReuseWindow = SweepGrace / 2

// ErrCorruptObject is returned (wrapped) when an object's content does not
// match the hash that names it. It is never restored.
var ErrCorruptObject = errors.New("corrupt workspace object")

var (
	objectEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(putWorkers))
	objectDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(putWorkers), zstd.WithDecoderMaxWindow(maxDecoderWindow))
)

// encodeObject returns the stored form of a small content.
func encodeObject(data []byte) []byte {
	if len(data) >= 128 {
		out := objectEncoder.EncodeAll(data, append(make([]byte, 0, len(data)/2+64), objZstd))
		if len(out) < len(data)-len(data)/32 {
			return out
		}
	}
	out := make([]byte, 1+len(data))
	out[0] = objRaw
	copy(out[1:], data)
	return out
}

func newHash() hash.Hash { return sha256.New() }

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// readObject reads and checks a small content stored as an object of its
// own.
func readObject(ctx context.Context, store SnapshotStore, h string, size int64) ([]byte, error) {
	r, err := store.Open(ctx, ObjectKey(h))
	if err != nil {
		return nil, missingObject(h, err)
	}
	defer r.Close()
	raw, err := io.ReadAll(io.LimitReader(r, size+size/8+1024))
	if err != nil {
		return nil, fmt.Errorf("read object %s: %w", h, err)
	}
	return decodeBlob(h, size, raw)
}

// decodeBlob decodes a content's stored bytes and checks them against
// the hash and size that name them.
func decodeBlob(h string, size int64, raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: content %s is empty", ErrCorruptObject, h)
	}
	var data []byte
	var err error
	switch raw[0] {
	case objRaw:
		data = raw[1:]
	case objZstd:
		if data, err = objectDecoder.DecodeAll(raw[1:], make([]byte, 0, size)); err != nil {
			return nil, fmt.Errorf("%w: content %s does not decompress: %v", ErrCorruptObject, h, err)
		}
	default:
		return nil, fmt.Errorf("%w: content %s has an unknown encoding %#x", ErrCorruptObject, h, raw[0])
	}
	if int64(len(data)) != size || hashOf(data) != h {
		return nil, fmt.Errorf("%w: content %s is not what it is named for (%d bytes, want %d)", ErrCorruptObject, h, len(data), size)
	}
	return data, nil
}

// maxPackRead bounds what is read of a pack (a sealed pack is at most
// packTarget plus one small content).
const maxPackRead = packTarget + 2*smallObject + 1024

// contentReader reads contents for one restore or manifest load, keeping
// the last few packs it read in memory: a restore reads a pack's contents
// in the order they were written, so each pack is fetched once.
type contentReader struct {
	store SnapshotStore
	mu    sync.Mutex
	packs map[string]*packEntry
	order []string
}

type packEntry struct {
	once sync.Once
	data []byte
	err  error
}

// keptPacks is how many packs a contentReader keeps.
const keptPacks = 6

func newContentReader(store SnapshotStore) *contentReader {
	return &contentReader{store: store, packs: map[string]*packEntry{}}
}

func (c *contentReader) pack(ctx context.Context, ph string) ([]byte, error) {
	c.mu.Lock()
	p, ok := c.packs[ph]
	if !ok {
		p = &packEntry{}
		c.packs[ph] = p
		c.order = append(c.order, ph)
		if len(c.order) > keptPacks {
			delete(c.packs, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.mu.Unlock()
	p.once.Do(func() {
		r, err := c.store.Open(ctx, ObjectKey(ph))
		if err != nil {
			p.err = missingObject(ph, err)
			return
		}
		defer r.Close()
		p.data, p.err = io.ReadAll(io.LimitReader(r, maxPackRead))
	})
	return p.data, p.err
}

// small returns a checked content of at most smallObject bytes.
func (c *contentReader) small(ctx context.Context, h string, size int64, l Location) ([]byte, error) {
	if l.Pack == "" {
		return readObject(ctx, c.store, h, size)
	}
	data, err := c.pack(ctx, l.Pack)
	if err != nil {
		return nil, err
	}
	if l.Offset+l.Stored > int64(len(data)) {
		return nil, fmt.Errorf("%w: content %s lies past the end of pack %s", ErrCorruptObject, h, l.Pack)
	}
	return decodeBlob(h, size, data[l.Offset:l.Offset+l.Stored])
}

// span is one ranged read of a pack that serves several contents.
type span struct {
	pack     string
	off, end int64
	items    []*ManifestEntry
}

// Span planning: contents of one pack whose bytes lie within maxSpanGap of
// each other are read together, up to maxSpan bytes a read. A restore
// then reads a pack written in one go in a few large reads, and a content
// stored long ago (a file that did not change, or a duplicate) costs one
// small read, not a whole pack.
const (
	maxSpanGap = 256 << 10
	maxSpan    = 8 << 20
)

// planSpans groups packed contents, in the order given, into ranged reads.
func planSpans(items []*ManifestEntry) []span {
	var out []span
	for _, e := range items {
		if n := len(out); n > 0 {
			sp := &out[n-1]
			if sp.pack == e.Pack && e.Offset >= sp.off && e.Offset <= sp.end+maxSpanGap && e.Offset+e.Stored-sp.off <= maxSpan {
				sp.end = max(sp.end, e.Offset+e.Stored)
				sp.items = append(sp.items, e)
				continue
			}
		}
		out = append(out, span{pack: e.Pack, off: e.Offset, end: e.Offset + e.Stored, items: []*ManifestEntry{e}})
	}
	return out
}

// read fetches the span's bytes.
func (sp *span) read(ctx context.Context, store SnapshotStore) ([]byte, error) {
	r, err := store.OpenRange(ctx, ObjectKey(sp.pack), sp.off, sp.end-sp.off)
	if err != nil {
		return nil, missingObject(sp.pack, err)
	}
	defer r.Close()
	data := make([]byte, sp.end-sp.off)
	if _, err := io.ReadFull(r, data); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: pack %s ends before byte %d", ErrCorruptObject, sp.pack, sp.end)
		}
		return nil, fmt.Errorf("read pack %s: %w", sp.pack, err)
	}
	return data, nil
}

// content returns a checked content of the span from its bytes.
func (sp *span) content(data []byte, e *ManifestEntry) ([]byte, error) {
	return decodeBlob(e.Hash, e.Size, data[e.Offset-sp.off:e.Offset-sp.off+e.Stored])
}

// openObject streams an object of any size; the reader fails with
// ErrCorruptObject at the end if the content is not what h names, so a
// consumer must read it to EOF before trusting what it wrote.
func openObject(ctx context.Context, store SnapshotStore, h string, size int64) (io.ReadCloser, error) {
	r, err := store.Open(ctx, ObjectKey(h))
	if err != nil {
		return nil, missingObject(h, err)
	}
	br := bufio.NewReaderSize(r, 256<<10)
	enc, err := br.ReadByte()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%w: object %s is empty", ErrCorruptObject, h)
	}
	vr := &verifyingReader{want: h, size: size, sum: sha256.New(), closer: r}
	switch enc {
	case objRaw:
		vr.r = br
	case objZstd:
		dec, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxDecoderWindow))
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("%w: object %s: %v", ErrCorruptObject, h, err)
		}
		vr.r, vr.dec = dec, dec
	default:
		r.Close()
		return nil, fmt.Errorf("%w: object %s has an unknown encoding %#x", ErrCorruptObject, h, enc)
	}
	return vr, nil
}

// missingObject makes a missing object a damaged snapshot: the manifest
// that names it cannot be restored whole.
func missingObject(h string, err error) error {
	if errors.Is(err, ErrSnapshotNotFound) {
		return fmt.Errorf("%w: object %s, which the snapshot names, is missing from the store", ErrCorruptObject, h)
	}
	return err
}

// verifyingReader hashes what it passes on and, at EOF, fails unless the
// content had the expected size and hash.
type verifyingReader struct {
	r      io.Reader
	dec    *zstd.Decoder
	closer io.Closer
	sum    hash.Hash
	want   string
	size   int64
	n      int64
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.n >= v.size {
		// Everything expected is read; anything more means corruption.
		var one [1]byte
		if k, err := io.ReadFull(v.r, one[:]); k > 0 || err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("%w: object %s is longer than the %d bytes it is named for, or its encoding is damaged (%v)", ErrCorruptObject, v.want, v.size, err)
		}
		if hex.EncodeToString(v.sum.Sum(nil)) != v.want {
			return 0, fmt.Errorf("%w: object %s does not hold the content it is named for", ErrCorruptObject, v.want)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > v.size-v.n {
		p = p[:v.size-v.n]
	}
	n, err := v.r.Read(p)
	v.sum.Write(p[:n])
	v.n += int64(n)
	if errors.Is(err, io.EOF) {
		if v.n < v.size {
			return n, fmt.Errorf("%w: object %s ends after %d of %d bytes", ErrCorruptObject, v.want, v.n, v.size)
		}
		err = nil
	}
	if err != nil && !errors.Is(err, ErrCorruptObject) && v.dec != nil {
		err = fmt.Errorf("%w: object %s does not decompress: %v", ErrCorruptObject, v.want, err)
	}
	return n, err
}

func (v *verifyingReader) Close() error {
	if v.dec != nil {
		v.dec.Close()
	}
	return v.closer.Close()
}

// Location says where a content is stored: in a pack (Pack names the
// pack object; Offset and Stored delimit the content's encoded bytes in
// it), or, with Pack empty, as an object of its own named by its hash.
//
// Small contents are packed: a snapshot appends the new ones to packs of
// about packTarget bytes, so a first snapshot of 20,000 files writes a few
// dozen objects rather than 20,000 (creating a file, or a PUT to S3, costs
// far more than the bytes in a small one). A pack lives as long as any
// manifest names it.
type Location struct {
	Pack   string
	Offset int64
	Stored int64
}

// packTarget is the size at which a pack is sealed and written.
const packTarget = 8 << 20

// objectWriter writes the new contents of one snapshot, each at most once,
// several at a time, and counts what it wrote. known maps the hashes of
// contents known to be stored to where: those of the manifest the snapshot
// started from (which exists until the new one is written, so the
// collector keeps them) and those written here.
type objectWriter struct {
	store  SnapshotStore
	base   *Manifest // the snapshot this one starts from, if any
	g      *errgroup.Group
	gctx   context.Context
	cancel context.CancelFunc // stops the other writes after a failed one
	limit  int64              // bytes this snapshot may write; 0: no limit

	inBase map[string]*Location // the base's contents and parts (read only)

	mu      sync.Mutex
	known   map[string]Location // what this snapshot stored
	pending map[string]bool
	pack    []byte // the pack being filled
	inPack  []packed

	written atomic.Int64
	objects atomic.Int64
	over    atomic.Bool
	now     func() time.Time
}

// packed is a content placed in the pack being filled.
type packed struct {
	hash        string
	off, stored int64
}

func newObjectWriter(ctx context.Context, store SnapshotStore, base *Manifest, limit int64) *objectWriter {
	// Not errgroup.WithContext: its context ends at the first Wait, and a
	// snapshot waits for its file contents before it writes its parts.
	g := &errgroup.Group{}
	g.SetLimit(putWorkers)
	gctx, cancel := context.WithCancel(ctx)
	w := &objectWriter{store: store, base: base, g: g, gctx: gctx, cancel: cancel, limit: limit, known: map[string]Location{}, pending: map[string]bool{}, now: time.Now}
	if base != nil {
		w.inBase = base.hashIndex()
	}
	return w
}

// lookupLocked returns where content h is stored: by this snapshot, or
// by its base. w.mu is held.
func (w *objectWriter) lookupLocked(h string) (Location, bool) {
	if l, ok := w.known[h]; ok {
		return l, true
	}
	if l, ok := w.inBase[h]; ok {
		return *l, true
	}
	return Location{}, false
}

// claim reports whether the caller should store the content h: not
// known, and no other job of this snapshot is storing it.
func (w *objectWriter) claim(h string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.lookupLocked(h); ok || w.pending[h] {
		return false
	}
	w.pending[h] = true
	return true
}

func (w *objectWriter) fail(err error) error {
	if err != nil {
		w.cancel()
	}
	return err
}

// location returns where content h is stored, once wait has returned.
func (w *objectWriter) location(h string) (Location, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lookupLocked(h)
}

// locate sets the location of every file entry of m.
func (w *objectWriter) locate(m *Manifest) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Type != EntryFile || e.reused {
			continue
		}
		l, ok := w.lookupLocked(e.Hash)
		if !ok {
			return fmt.Errorf("content of %q was not stored", e.Path)
		}
		e.Location = l
	}
	return nil
}

// recent reports whether the object exists and was written within
// ObjectReuseWindow, so it may be reused without writing it again.
func (w *objectWriter) recent(ctx context.Context, h string) (bool, error) {
	mod, err := w.store.ModTime(ctx, ObjectKey(h))
	if errors.Is(err, ErrSnapshotNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return w.now().Sub(mod) < ObjectReuseWindow, nil
}

func (w *objectWriter) count(n int64) error {
	if t := w.written.Add(n); w.limit > 0 && t > w.limit {
		w.over.Store(true)
		return ErrOverLimit
	}
	return nil
}

// addSmall stores content (hash h) in a pack unless it is stored; it owns
// data.
func (w *objectWriter) addSmall(h string, data []byte) { w.add(h, data, false) }

// addPart stores a manifest part: packed like content, but counted as the
// manifest's bytes rather than as an object.
func (w *objectWriter) addPart(h string, data []byte) { w.add(h, data, true) }

func (w *objectWriter) add(h string, data []byte, part bool) {
	if !w.claim(h) {
		return
	}
	w.g.Go(func() error {
		enc := encodeObject(data) // the CPU work, outside the lock
		w.mu.Lock()
		off := int64(len(w.pack))
		w.pack = append(w.pack, enc...)
		w.inPack = append(w.inPack, packed{hash: h, off: off, stored: int64(len(enc))})
		if !part {
			w.objects.Add(1)
		}
		var full []byte
		var items []packed
		if len(w.pack) >= packTarget {
			full, items = w.pack, w.inPack
			w.pack, w.inPack = nil, nil
		}
		w.mu.Unlock()
		if full == nil {
			return nil
		}
		return w.fail(w.seal(full, items))
	})
}

// seal writes a full pack and records where its contents are.
func (w *objectWriter) seal(pack []byte, items []packed) error {
	ph := hashOf(pack)
	n, err := w.store.Put(w.gctx, ObjectKey(ph), bytes.NewReader(pack))
	w.mu.Lock()
	for _, it := range items {
		delete(w.pending, it.hash)
		if err == nil {
			w.known[it.hash] = Location{Pack: ph, Offset: it.off, Stored: it.stored}
		}
	}
	w.mu.Unlock()
	if err != nil {
		return err
	}
	return w.count(n)
}

// addLarge stores the content open returns (hash h) as an object of its
// own unless it is stored. The content is hashed again on the way, and an
// object whose content changed since it was hashed is not stored.
func (w *objectWriter) addLarge(h string, size int64, open func() (io.ReadCloser, error), cleanup func()) {
	if !w.claim(h) {
		if cleanup != nil {
			cleanup()
		}
		return
	}
	w.g.Go(func() (err error) {
		ok := false
		defer func() {
			w.mu.Lock()
			delete(w.pending, h)
			if ok {
				w.known[h] = Location{}
			}
			w.mu.Unlock()
			if cleanup != nil {
				cleanup()
			}
			w.fail(err)
		}()
		if have, err := w.recent(w.gctx, h); err != nil || have {
			ok = have
			return err
		}
		src, err := open()
		if err != nil {
			return err
		}
		defer src.Close()
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(encodeStream(pw, src, h, size))
		}()
		n, err := w.store.Put(w.gctx, ObjectKey(h), pr)
		pr.CloseWithError(err)
		if err != nil {
			return err
		}
		ok = true
		w.objects.Add(1)
		return w.count(n)
	})
}

// encodeStream writes the zstd object form of src, failing (so the store
// discards the object) unless src holds exactly size bytes hashing to h.
func encodeStream(w io.Writer, src io.Reader, h string, size int64) error {
	if _, err := w.Write([]byte{objZstd}); err != nil {
		return err
	}
	enc, err := compressSnapshot(w)
	if err != nil {
		return err
	}
	sum := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(enc, sum), io.LimitReader(src, size+1), make([]byte, 256<<10))
	if err != nil {
		enc.Close()
		return err
	}
	if n != size || hex.EncodeToString(sum.Sum(nil)) != h {
		enc.Close()
		return fmt.Errorf("a file changed while it was being saved (%d bytes, %d when hashed); the next snapshot saves it", n, size)
	}
	return enc.Close()
}

// wait waits for every write, writes the pack being filled, and returns
// the first error.
func (w *objectWriter) wait() error {
	if err := w.g.Wait(); err != nil {
		return err
	}
	w.mu.Lock()
	pack, items := w.pack, w.inPack
	w.pack, w.inPack = nil, nil
	w.mu.Unlock()
	if len(items) == 0 {
		return nil
	}
	return w.fail(w.seal(pack, items))
}
