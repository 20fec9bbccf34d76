package agent

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// A session's model calls used to carry the whole budgeted transcript as
// activity input, so Temporal stored it again at every call: history grew
// with the square of a turn's length. Now the model activity stores what
// it was sent as a chain of content-addressed chunks in the snapshot store
// (under the session's prefix, so /destroy and the sweeper delete them with
// the snapshots), answers with a small TranscriptRef, and the next call's
// input is that ref plus the messages added since. Workers keep recent
// transcripts in memory; a worker that has not seen one (another host ran
// the last call, a restart) reads the chunks back.

// TranscriptRef names a transcript the model activity stored: Count
// messages, identified by the digest of the chunk chain that holds them.
type TranscriptRef struct {
	Digest string `json:"digest"`
	Count  int    `json:"count"`
}

// TranscriptStore is where transcript chunks live (blobstore.Store).
type TranscriptStore interface {
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	DeleteOlder(ctx context.Context, prefix string, cutoff time.Time) (int, error)
}

// transcriptKeep is how long superseded chunks stay after a chunk was
// written whole: a call that failed after that write, and its retry, may
// still name the older chain.
const transcriptKeep = time.Hour

// TranscriptPrefix holds a session's transcript chunks.
func TranscriptPrefix(sessionID string) string {
	return sandbox.SessionPrefix(sessionID) + "transcript/"
}

// ErrTypeTranscriptMissing: the request's base transcript is in neither
// the worker's cache nor the store (deleted by hand, a store that lost
// it). Not retryable; the workflow sends the transcript in full instead.
const ErrTypeTranscriptMissing = "TranscriptMissing"

// ErrTypeNeedsCompaction: a Compactable request does not fit the window
// without leaving whole exchanges out. Not retryable; the workflow
// compacts the conversation and asks again.
const ErrTypeNeedsCompaction = "NeedsCompaction"

// rebaseDepth bounds a chain: every rebaseDepth-th chunk holds its whole
// transcript, so a worker without a cache reads at most this many chunks.
const rebaseDepth = 32

// transcriptCacheBytes bounds the memory of the transcripts a worker keeps,
// as footprint charges it: every entry holds a []session.Message of its own
// (its base's messages copied, then the new ones), so it costs the headers
// of all its messages besides their text. The bound used to be counted in
// MessageSize, which leaves the headers out (128 bytes a message, more than
// the text of a typical tool call or result), so a worker held several
// times 64 MiB; the soak's worker grew by 100 MB per 100 turns
// (docs/RELIABILITY.md, "The soak").
const transcriptCacheBytes = 64 << 20

// transcriptsPerSession is how many of a session's transcripts the cache
// keeps: the newest, which its next model call extends, and the one that
// extended (the base of a call that is retried after it stored its
// transcript). Every model call makes a new transcript, a copy of the last
// plus what is new, so without this one long session filled the cache with
// copies no call asks for again, at the cost of other sessions' newest. A
// call that asks for an older one reads its chain from the store.
const transcriptsPerSession = 2

// transcriptIdle is how long a transcript stays cached unused. A session's
// model calls follow each other within seconds during a turn, and its next
// turn is usually minutes or days away; a transcript kept past that only
// holds memory (the soak's idle forks each kept up to a megabyte or two,
// and the worker's live heap grew with their count until the byte bound
// above). One that is needed again is read from the store.
const transcriptIdle = 10 * time.Minute

// Headers of the types a cached transcript holds, for footprint.
var (
	messageHeader  = int(unsafe.Sizeof(session.Message{}))
	toolCallHeader = int(unsafe.Sizeof(session.ToolCall{}))
	imageHeader    = int(unsafe.Sizeof(session.ImageRef{}))
)

// entryOverhead is what an entry costs besides its messages: the cached
// struct, its list element and its map slots.
const entryOverhead = 256

// chunk is one stored object: the messages added after Parent's.
type chunk struct {
	Parent   string            `json:"parent,omitempty"`
	Depth    int               `json:"depth"`
	Messages []session.Message `json:"messages"`
}

// TranscriptKey is where the chunk with digest d of a session lives.
func TranscriptKey(sessionID, digest string) string {
	return TranscriptPrefix(sessionID) + digest + ".json"
}

// chunkJSON is json.Marshal(chunk{parent, depth, msgs}) for body, the
// encoding of msgs that chunkDigest made: the messages, most of a chunk
// and all of a whole one, are encoded once. parent is a hex digest (or
// empty), which JSON needs no escape for.
func chunkJSON(parent string, depth int, body []byte) []byte {
	out := make([]byte, 0, len(body)+len(parent)+48)
	out = append(out, '{')
	if parent != "" {
		out = append(out, `"parent":"`...)
		out = append(out, parent...)
		out = append(out, `",`...)
	}
	out = append(out, `"depth":`...)
	out = strconv.AppendInt(out, int64(depth), 10)
	out = append(out, `,"messages":`...)
	out = append(out, body...)
	return append(out, '}')
}

func chunkDigest(parent string, msgs []session.Message) (string, []byte, error) {
	body, err := json.Marshal(msgs)
	if err != nil {
		return "", nil, err
	}
	h := sha256.New()
	h.Write([]byte(parent))
	h.Write([]byte{'\n'})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil)), body, nil
}

// transcripts is the worker's view of stored transcripts: an LRU cache in
// front of the store, bounded by footprint and by transcriptsPerSession.
type transcripts struct {
	mu    sync.Mutex
	lru   *list.List // of *cached, most recent first
	by    map[string]*list.Element
	bytes int
	// bySession holds the digests of each session's cached transcripts,
	// oldest first (at most transcriptsPerSession); a session whose
	// transcripts were all evicted has no key.
	bySession map[string][]string
	// max is the bound in bytes (0: transcriptCacheBytes); tests lower it.
	max int
	// now is the clock of idle expiry (nil: time.Now); tests set it.
	now func() time.Time
}

type cached struct {
	digest  string
	session string
	depth   int
	msgs    []session.Message
	size    int       // footprint(msgs)
	used    time.Time // last put or got (t.mu)
}

// footprint is the memory a cached transcript holds: its message headers,
// the strings and slices they point to, and the entry's own overhead. The
// text is shared with the transcript it extended (the messages are copied,
// their strings are not), so counting it in every entry overstates the
// total; it is the safe side of the bound.
func footprint(msgs []session.Message) int {
	n := entryOverhead + len(msgs)*messageHeader
	for _, m := range msgs {
		n += len(m.Role) + len(m.Content) + len(m.ToolCallID) + len(m.Name) + len(m.User)
		for _, tc := range m.ToolCalls {
			n += toolCallHeader + len(tc.ID) + len(tc.Name) + len(tc.Arguments)
		}
		for _, im := range m.Images {
			n += imageHeader + len(im.Key) + len(im.MimeType) + len(im.Path)
		}
	}
	return n
}

func (t *transcripts) get(digest string) (*cached, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		return nil, false
	}
	e, ok := t.by[digest]
	if !ok {
		return nil, false
	}
	c := e.Value.(*cached)
	now := t.clock()
	if now.Sub(c.used) > transcriptIdle {
		t.expire(now)
		return nil, false
	}
	c.used = now
	t.lru.MoveToFront(e)
	return c, true
}

func (t *transcripts) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

// expire evicts the transcripts unused for longer than transcriptIdle,
// least recently used first (t.mu held).
func (t *transcripts) expire(now time.Time) {
	for e := t.lru.Back(); e != nil && now.Sub(e.Value.(*cached).used) > transcriptIdle; e = t.lru.Back() {
		t.evict(e)
	}
}

// whole reports whether the cached transcript digest was written as one
// chunk (the start of a chain).
func (t *transcripts) whole(digest string) bool {
	c, ok := t.get(digest)
	return ok && c.depth == 0
}

// put caches c (a transcript already cached is only marked used), then
// evicts the transcripts idle for longer than transcriptIdle, the
// session's beyond transcriptsPerSession, oldest first, and the least
// recently used of all while the total is over the bound (the newest
// entry stays, even alone over it).
func (t *transcripts) put(c *cached) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by, t.lru, t.bySession = map[string]*list.Element{}, list.New(), map[string][]string{}
	}
	now := t.clock()
	if e, ok := t.by[c.digest]; ok {
		e.Value.(*cached).used = now
		t.lru.MoveToFront(e)
		t.expire(now)
		return
	}
	c.used = now
	t.by[c.digest] = t.lru.PushFront(c)
	t.bytes += c.size
	t.bySession[c.session] = append(t.bySession[c.session], c.digest)
	t.expire(now)
	for len(t.bySession[c.session]) > transcriptsPerSession {
		t.evict(t.by[t.bySession[c.session][0]])
	}
	limit := t.max
	if limit <= 0 {
		limit = transcriptCacheBytes
	}
	for t.bytes > limit && t.lru.Len() > 1 {
		t.evict(t.lru.Back())
	}
}

// evict removes an entry and its session's record of it (t.mu held).
func (t *transcripts) evict(e *list.Element) {
	o := e.Value.(*cached)
	t.lru.Remove(e)
	delete(t.by, o.digest)
	t.bytes -= o.size
	ds := slices.DeleteFunc(t.bySession[o.session], func(d string) bool { return d == o.digest })
	if len(ds) == 0 {
		delete(t.bySession, o.session)
	} else {
		t.bySession[o.session] = ds
	}
}

// load returns the messages of a stored transcript, from the cache or by
// reading its chain from the store.
func (t *transcripts) load(ctx context.Context, store TranscriptStore, sessionID string, ref TranscriptRef) (*cached, error) {
	if c, ok := t.get(ref.Digest); ok {
		return c, nil
	}
	// Walk the chain back to a chunk that is cached or whole.
	var chain []chunk
	var base *cached
	for d := ref.Digest; d != ""; {
		if c, ok := t.get(d); ok {
			base = c
			break
		}
		if store == nil {
			return nil, fmt.Errorf("transcript %s is not cached on this worker and there is no store", d)
		}
		ch, err := readChunk(ctx, store, sessionID, d)
		if err != nil {
			return nil, err
		}
		chain = append(chain, ch)
		d = ch.Parent
		if len(chain) > rebaseDepth+1 {
			return nil, fmt.Errorf("transcript %s: its chain is longer than %d chunks", ref.Digest, rebaseDepth)
		}
	}
	var msgs []session.Message
	depth := 0
	if base != nil {
		msgs, depth = append(msgs, base.msgs...), base.depth
	}
	for i := len(chain) - 1; i >= 0; i-- {
		msgs = append(msgs, chain[i].Messages...)
		depth = chain[i].Depth
	}
	if len(msgs) != ref.Count {
		return nil, fmt.Errorf("transcript %s holds %d messages, the reference says %d", ref.Digest, len(msgs), ref.Count)
	}
	c := &cached{digest: ref.Digest, session: sessionID, depth: depth, msgs: msgs, size: footprint(msgs)}
	t.put(c)
	return c, nil
}

// errStoreUnavailable marks a store failure other than a missing chunk:
// worth retrying, unlike a chunk that is gone.
var errStoreUnavailable = errors.New("transcript store unavailable")

func readChunk(ctx context.Context, store TranscriptStore, sessionID, digest string) (chunk, error) {
	r, err := store.Open(ctx, TranscriptKey(sessionID, digest))
	if err != nil {
		if errors.Is(err, sandbox.ErrSnapshotNotFound) {
			return chunk{}, fmt.Errorf("transcript chunk %s is not in the store", digest)
		}
		return chunk{}, fmt.Errorf("%w: %w", errStoreUnavailable, err)
	}
	defer r.Close()
	var ch chunk
	if err := json.NewDecoder(r).Decode(&ch); err != nil {
		return chunk{}, fmt.Errorf("transcript chunk %s: %w", digest, err)
	}
	// A chunk is named by its content: one that does not match was
	// corrupted or replaced, and must not be sent as the conversation.
	if d, _, err := chunkDigest(ch.Parent, ch.Messages); err != nil || d != digest {
		return chunk{}, fmt.Errorf("transcript chunk %s: its content does not match its name", digest)
	}
	return ch, nil
}

// extend makes a transcript of base (nil: none) followed by added, for a
// workflow whose transcript is now base[skip:] + added, and returns its
// ref, the stored messages, how many leading messages of base the stored
// transcript leaves out (0 when the new chunk extends base's chain, skip
// when it is written whole), and the write of its chunk to the store,
// which the caller runs while the model thinks and waits for before it
// answers. A chain that is deep, or whose base the workflow has mostly
// trimmed, is written whole (rebased), so a worker without a cache reads a
// bounded number of chunks and the store does not keep what the session
// has dropped.
func (t *transcripts) extend(store TranscriptStore, sessionID string, base *cached, skip int, added []session.Message) (TranscriptRef, []session.Message, int, func(context.Context) error, error) {
	var parent string
	var prior []session.Message
	depth := 0
	if base != nil {
		parent, prior, depth = base.digest, base.msgs, base.depth+1
	}
	if skip < 0 || skip > len(prior) {
		return TranscriptRef{}, nil, 0, nil, fmt.Errorf("transcript: cannot skip %d of %d messages", skip, len(prior))
	}
	stored := append(append(make([]session.Message, 0, len(prior)+len(added)), prior...), added...)
	chunkMsgs, skipped := added, 0
	if base == nil || depth >= rebaseDepth || (skip > 0 && skip*2 >= len(prior)) {
		stored = stored[skip:]
		parent, depth, chunkMsgs, skipped = "", 0, stored, skip
	}
	digest, body, err := chunkDigest(parent, chunkMsgs)
	if err != nil {
		return TranscriptRef{}, nil, 0, nil, err
	}
	ref := TranscriptRef{Digest: digest, Count: len(stored)}
	write := func(context.Context) error { return nil }
	if _, ok := t.get(digest); !ok && store != nil {
		out := chunkJSON(parent, depth, body)
		key := TranscriptKey(sessionID, digest)
		// Content-addressed: writing it again (a retried call) writes
		// the same bytes.
		write = func(ctx context.Context) error {
			if _, err := store.Put(ctx, key, bytes.NewReader(out)); err != nil {
				return fmt.Errorf("transcript: store: %w", err)
			}
			return nil
		}
	}
	t.put(&cached{digest: digest, session: sessionID, depth: depth, msgs: stored, size: footprint(stored)})
	return ref, stored, skipped, write, nil
}
