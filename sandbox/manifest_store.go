package sandbox

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// StoreManifest writes m under key: its parts (those already stored are
// not written again), then the list. The contents m names must be stored
// already, where their Locations say. It returns the bytes
// written.
func StoreManifest(ctx context.Context, store SnapshotStore, key string, m *Manifest) (int64, error) {
	w := newObjectWriter(ctx, store, m, 0) // its contents (and parts it was read from) are stored
	n, err := storeManifest(ctx, w, key, m)
	return n + w.written.Load(), err
}

// storeManifest hands m's parts to w, waits for every object of the
// snapshot, then writes the list under key. It returns the list's size.
func storeManifest(ctx context.Context, w *objectWriter, key string, m *Manifest) (int64, error) {
	if err := w.wait(); err != nil {
		return 0, err
	}
	if err := w.locate(m); err != nil {
		return 0, err
	}
	var prev map[string]storedPart
	if w.base != nil {
		prev = w.base.storedParts()
	}
	var refs []partRef
	for _, p := range m.parts() {
		if sp, ok := prev[p[0].Path]; ok && sameEntries(sp.entries, p) {
			refs = append(refs, sp.ref) // unchanged: stored already
			continue
		}
		data := encodePart(p)
		h := hashOf(data)
		refs = append(refs, partRef{hash: h, size: int64(len(data)), entries: len(p)})
		// A copy: p is a window on m.Entries, and caching the window
		// would keep the whole manifest (every entry and its strings) for
		// as long as this one part stays cached. The soak's worker heap
		// grew by a manifest per snapshot that way, up to the cache's
		// 64 Ki entries in parts, which pinned hundreds of manifests.
		partsCache.put(h, slices.Clone(p))
		w.addPart(h, data)
	}
	if err := w.wait(); err != nil {
		return 0, err
	}
	for i := range refs {
		l, ok := w.location(refs[i].hash)
		if !ok {
			return 0, fmt.Errorf("manifest part %d was not stored", i+1)
		}
		refs[i].Location = l
	}
	var buf bytes.Buffer
	if err := encodeList(&buf, refs); err != nil {
		return 0, err
	}
	m.stored = refs
	n, err := w.store.Put(ctx, key, &buf)
	if err == nil {
		partsCache.current(path.Dir(key), refs)
	}
	return n, err
}

// LoadManifest reads the manifest under key; a key holding a full tar
// snapshot yields ErrBadManifest.
func LoadManifest(ctx context.Context, store SnapshotStore, key string) (*Manifest, error) {
	r, err := store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readManifest(ctx, store, path.Dir(key), bufio.NewReader(r))
}

// readManifest reads a stored manifest's list from r and its parts from
// the store (or the worker's cache of parts), a few at a time. owner is the
// store prefix of the session whose current manifest this now is, for the
// parts cache (partCache.current); "" records none (the collector reads
// every manifest, which makes none current).
func readManifest(ctx context.Context, store SnapshotStore, owner string, r io.Reader) (*Manifest, error) {
	refs, err := decodeList(r)
	if err != nil {
		return nil, err
	}
	got := make([][]ManifestEntry, len(refs))
	cr := newContentReader(store)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(putWorkers)
	for i, ref := range refs {
		if p, ok := partsCache.get(ref.hash); ok {
			got[i] = p
			continue
		}
		g.Go(func() error {
			data, err := cr.small(gctx, ref.hash, ref.size, ref.Location)
			if err != nil {
				return fmt.Errorf("manifest part %d: %w", i+1, err)
			}
			p, err := parsePart(data)
			if err != nil {
				return fmt.Errorf("manifest part %d: %w", i+1, err)
			}
			if owner != "" {
				partsCache.put(ref.hash, p)
			}
			got[i] = p
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	m := &Manifest{stored: refs}
	for i, p := range got {
		if len(p) != refs[i].entries {
			return nil, fmt.Errorf("%w: part %d has %d entries, the list says %d", ErrBadManifest, i+1, len(p), refs[i].entries)
		}
		m.Entries = append(m.Entries, p...)
	}
	if err := checkLinks(m.Entries); err != nil {
		return nil, err
	}
	if owner != "" {
		partsCache.current(owner, refs)
	}
	return m, nil
}

// partsCache keeps decoded parts by hash (64 Ki entries, about 16 MB: an
// entry is 128 bytes and its strings). Each part is its own copy, never a
// window on a manifest, so it keeps only itself. Parts never change (their hash
// names them), so a worker that made or read a session's last manifest
// reads the next one's unchanged parts from memory.
//
// A part the session's newer manifest no longer lists is dropped at once
// (current), as the transcripts cache keeps only a session's newest
// transcripts: every snapshot that changes a file makes a new part for it,
// so without this one busy session filled the cache with parts no snapshot
// reads again (the soak's workers held about 5 MB of them at turn 1,000,
// still growing toward the bound).
var partsCache = newPartCache(64<<10, maxPartOwners)

// maxPartOwners bounds how many sessions' current parts the cache tracks;
// past it the least recently used session's record is forgotten (its parts
// stay, under the LRU bound, until they age out).
const maxPartOwners = 1024

// partsIdle is how long a session's current parts stay cached without a
// snapshot or read of its manifests: as with transcripts (agent's
// transcriptIdle), an idle session's next snapshot is usually much later,
// and reads its parts from the store. Without it the soak's idle forks,
// one every 50 turns, each kept its whole manifest's parts.
const partsIdle = 10 * time.Minute

type partCache struct {
	mu      sync.Mutex
	max     int // entries held at most
	held    int
	order   *list.List // front: most recent; values are string hashes
	byHash  map[string]*list.Element
	entries map[string][]ManifestEntry

	// owners holds, per owner (a session's store prefix), the parts of the
	// manifest this worker read or wrote last for it; uses counts the
	// owners whose current manifest lists a part, which is dropped when
	// that reaches zero (a fork shares its parent's parts).
	maxOwners  int
	owners     map[string]*list.Element // values are *partOwner
	ownerOrder *list.List               // front: most recent
	uses       map[string]int
	now        func() time.Time // nil: time.Now; tests set it
}

type partOwner struct {
	name   string
	hashes []string
	used   time.Time
}

func newPartCache(maxEntries, maxOwners int) *partCache {
	return &partCache{
		max: maxEntries, order: list.New(), byHash: map[string]*list.Element{}, entries: map[string][]ManifestEntry{},
		maxOwners: maxOwners, owners: map[string]*list.Element{}, ownerOrder: list.New(), uses: map[string]int{},
	}
}

// get returns a part; callers must not modify it.
func (c *partCache) get(h string) ([]ManifestEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byHash[h]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return c.entries[h], true
}

func (c *partCache) put(h string, p []ManifestEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byHash[h]; ok || len(p) > c.max {
		return
	}
	c.byHash[h] = c.order.PushFront(h)
	c.entries[h] = p
	c.held += len(p)
	for c.held > c.max {
		c.drop(c.order.Back().Value.(string))
	}
}

// current records refs as owner's current manifest: the parts its previous
// one listed and no owner's current one does are dropped.
func (c *partCache) current(owner string, refs []partRef) {
	hashes := make([]string, len(refs))
	for i, r := range refs {
		hashes[i] = r.hash
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	for _, h := range hashes {
		c.uses[h]++
	}
	if el, ok := c.owners[owner]; ok {
		o := el.Value.(*partOwner)
		c.release(o.hashes, true)
		o.hashes, o.used = hashes, now
		c.ownerOrder.MoveToFront(el)
	} else {
		c.owners[owner] = c.ownerOrder.PushFront(&partOwner{name: owner, hashes: hashes, used: now})
	}
	for el := c.ownerOrder.Back(); el != nil; el = c.ownerOrder.Back() {
		o := el.Value.(*partOwner)
		idle := now.Sub(o.used) > partsIdle
		if !idle && c.ownerOrder.Len() <= c.maxOwners {
			break
		}
		c.ownerOrder.Remove(el)
		delete(c.owners, o.name)
		// An idle session's parts go; one forgotten for the bound's sake
		// keeps them, to age out under the LRU bound.
		c.release(o.hashes, idle)
	}
}

// release takes an owner's uses of hashes back, dropping the parts no
// owner lists any more if drop is set (c.mu held).
func (c *partCache) release(hashes []string, drop bool) {
	for _, h := range hashes {
		c.uses[h]--
		if c.uses[h] > 0 {
			continue
		}
		delete(c.uses, h)
		if drop {
			c.drop(h)
		}
	}
}

// drop removes a part if it is cached (c.mu held).
func (c *partCache) drop(h string) {
	el, ok := c.byHash[h]
	if !ok {
		return
	}
	c.order.Remove(el)
	c.held -= len(c.entries[h])
	delete(c.byHash, h)
	delete(c.entries, h)
}

// heldEntries is how many entries the cached parts hold.
func (c *partCache) heldEntries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
}

// recentManifests keeps the manifest this worker wrote last for each of
// a few sessions, for the next snapshot of the same session (see
// Activities.baseManifest), which starts from the previous turn's
// manifest and from no older one: a session's newer manifest replaces its
// older one. Few, and few entries: a manifest of 20,000 entries is
// megabytes of heap the collector scans on every cycle (the soak's worker
// heap followed its growing workspace, two thirds of it manifests; with
// one entry per key, which is per turn, one busy session filled all four
// places with its last four turns), and a miss costs one read of the list
// and its parts. Bounded by entries as well as by count, a worker's
// manifests take tens of megabytes at most whatever its workspaces hold; a
// manifest larger than the whole bound is not kept.
var recentManifests = &manifestCache{max: 4, maxEntries: 64 << 10}

type manifestCache struct {
	mu         sync.Mutex
	max        int              // manifests held at most
	maxEntries int              // their entries at most (0: no bound)
	list       []cachedManifest // oldest first
}

// cachedManifest is a session's (owner's: its store prefix) manifest
// stored under key with fingerprint fp.
type cachedManifest struct {
	owner, key, fp string
	m              *Manifest
}

func (c *manifestCache) get(key, fp string) *Manifest {
	if key == "" || fp == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.list {
		if e.key == key && e.fp == fp {
			return e.m
		}
	}
	return nil
}

func (c *manifestCache) put(key, fp string, m *Manifest) {
	if key == "" || fp == "" {
		return
	}
	owner := path.Dir(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = slices.DeleteFunc(c.list, func(e cachedManifest) bool { return e.owner == owner })
	if c.maxEntries > 0 && len(m.Entries) > c.maxEntries {
		return
	}
	c.list = append(c.list, cachedManifest{owner: owner, key: key, fp: fp, m: m})
	held := 0
	for _, e := range c.list {
		held += len(e.m.Entries)
	}
	for len(c.list) > c.max || (c.maxEntries > 0 && held > c.maxEntries) {
		held -= len(c.list[0].m.Entries)
		c.list = c.list[1:]
	}
}

// entries is how many manifest entries the cache holds.
func (c *manifestCache) entries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.list {
		n += len(e.m.Entries)
	}
	return n
}
