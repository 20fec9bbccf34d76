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
	"sync"
	"time"

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

// transcriptCacheBytes bounds the transcripts a worker keeps in memory.
const transcriptCacheBytes = 64 << 20

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
// front of the store.
type transcripts struct {
	mu    sync.Mutex
	lru   *list.List // of *cached, most recent first
	by    map[string]*list.Element
	bytes int
}

type cached struct {
	digest string
	depth  int
	msgs   []session.Message
	size   int
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
	t.lru.MoveToFront(e)
	return e.Value.(*cached), true
}

// whole reports whether the cached transcript digest was written as one
// chunk (the start of a chain).
func (t *transcripts) whole(digest string) bool {
	c, ok := t.get(digest)
	return ok && c.depth == 0
}

func (t *transcripts) put(c *cached) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by, t.lru = map[string]*list.Element{}, list.New()
	}
	if _, ok := t.by[c.digest]; ok {
		return
	}
	t.by[c.digest] = t.lru.PushFront(c)
	t.bytes += c.size
	for t.bytes > transcriptCacheBytes && t.lru.Len() > 1 {
		old := t.lru.Back()
		o := old.Value.(*cached)
		t.lru.Remove(old)
		delete(t.by, o.digest)
		t.bytes -= o.size
	}
}

func messagesSize(msgs []session.Message) int {
	n := 0
	for _, m := range msgs {
		n += MessageSize(m)
	}
	return n
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
	c := &cached{digest: ref.Digest, depth: depth, msgs: msgs, size: messagesSize(msgs)}
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
	digest, _, err := chunkDigest(parent, chunkMsgs)
	if err != nil {
		return TranscriptRef{}, nil, 0, nil, err
	}
	ref := TranscriptRef{Digest: digest, Count: len(stored)}
	write := func(context.Context) error { return nil }
	if _, ok := t.get(digest); !ok && store != nil {
		out, err := json.Marshal(chunk{Parent: parent, Depth: depth, Messages: chunkMsgs})
		if err != nil {
			return TranscriptRef{}, nil, 0, nil, err
		}
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
	t.put(&cached{digest: digest, depth: depth, msgs: stored, size: messagesSize(stored)})
	return ref, stored, skipped, write, nil
}
