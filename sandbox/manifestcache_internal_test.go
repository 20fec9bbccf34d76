package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The cache of recent manifests is bounded by entries as well as by count:
// a worker whose sessions' workspaces grow (the soak adds files every
// turn) keeps at most maxEntries of them, dropping the oldest, and never
// keeps one larger than the whole bound.
func TestManifestCacheIsBoundedByEntries(t *testing.T) {
	manifest := func(n int) *Manifest { return &Manifest{Entries: make([]ManifestEntry, n)} }
	key := func(session string, turn int) string { return SnapshotKey(session, turn) }
	c := &manifestCache{max: 4, maxEntries: 100}
	c.put(key("a", 1), "fa", manifest(40))
	c.put(key("b", 1), "fb", manifest(40))
	if got := c.entries(); got != 80 {
		t.Fatalf("holds %d entries, want 80", got)
	}
	c.put(key("c", 1), "fc", manifest(40)) // 120 > 100: a goes
	if c.get(key("a", 1), "fa") != nil || c.get(key("b", 1), "fb") == nil || c.get(key("c", 1), "fc") == nil {
		t.Errorf("after a third manifest past the bound, want a dropped and b, c kept")
	}
	if got := c.entries(); got > 100 {
		t.Errorf("holds %d entries, over the bound of 100", got)
	}
	c.put(key("d", 1), "fd", manifest(101)) // larger than the bound: not kept
	if c.get(key("d", 1), "fd") != nil {
		t.Error("a manifest larger than the whole bound was kept")
	}
	c.put(key("b", 2), "fb2", manifest(101)) // b's newer manifest is too large: b's old one goes too
	if c.get(key("b", 1), "fb") != nil {
		t.Error("a session's older manifest stayed after its newer one was refused")
	}
	for i := range 10 {
		c.put(key(fmt.Sprint("k", i), 1), "f", manifest(1))
	}
	if len(c.list) != 4 {
		t.Errorf("holds %d manifests, want at most 4", len(c.list))
	}
}

// A session's newer manifest replaces its older one: a snapshot starts
// from the previous turn's manifest only, so one busy session keeps one
// manifest, not the four places' worth of its last turns (which made the
// soak's worker heap follow its workspace four times over), and leaves the
// other sessions' manifests alone.
func TestManifestCacheKeepsOneManifestPerSession(t *testing.T) {
	manifest := func(n int) *Manifest { return &Manifest{Entries: make([]ManifestEntry, n)} }
	c := &manifestCache{max: 4, maxEntries: 1000}
	c.put(SnapshotKey("other", 7), "fo", manifest(10))
	for turn := 1; turn <= 6; turn++ {
		c.put(SnapshotKey("busy", turn), fmt.Sprint("f", turn), manifest(100))
	}
	if got := c.entries(); got != 110 {
		t.Errorf("holds %d entries after six turns of one session, want 110 (its newest manifest and the other session's)", got)
	}
	if c.get(SnapshotKey("busy", 6), "f6") == nil {
		t.Error("the session's newest manifest is not kept")
	}
	if c.get(SnapshotKey("busy", 5), "f5") != nil {
		t.Error("the session's previous manifest is still kept beside its newest")
	}
	if c.get(SnapshotKey("other", 7), "fo") == nil {
		t.Error("another session's manifest was dropped")
	}
}

// The parts cache tracks the current parts of a bounded number of
// sessions; a session it forgets keeps its parts cached (they age out by
// the LRU bound), and a part two sessions list stays until neither does.
func TestPartsCacheOwnersAreBounded(t *testing.T) {
	c := newPartCache(1000, 2)
	refs := func(hs ...string) []partRef { return cachedParts(c, hs...) }
	c.current("a", refs("x", "shared"))
	c.current("b", refs("y", "shared"))
	c.current("a", refs("x2", "shared")) // x superseded: dropped; shared still b's
	if _, ok := c.get("x"); ok {
		t.Error("a part its session's newer manifest no longer lists stayed cached")
	}
	if _, ok := c.get("shared"); !ok {
		t.Error("a part another session still lists was dropped")
	}
	c.current("c", refs("z")) // three sessions: b, the least recent, is forgotten
	if len(c.owners) != 2 || c.owners["b"] != nil {
		t.Errorf("tracks %d sessions (b forgotten: %v), want 2 and b forgotten", len(c.owners), c.owners["b"] == nil)
	}
	if _, ok := c.get("y"); !ok {
		t.Error("a forgotten session's part was dropped; it should age out")
	}
	c.current("a", refs("x3")) // shared: only a listed it now
	if _, ok := c.get("shared"); ok {
		t.Error("a part no tracked session lists any more stayed cached")
	}
	if len(c.uses) != 2 { // x3, z
		t.Errorf("counts uses of %d parts, want 2 (x3, z): %v", len(c.uses), c.uses)
	}
}

// A session whose manifests were not read or written for partsIdle gives
// its parts up: the soak's idle forks each kept their whole manifest's
// parts cached for good.
func TestPartsCacheForgetsIdleSessions(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	c := newPartCache(1000, 100)
	c.now = func() time.Time { return now }
	refs := func(hs ...string) []partRef { return cachedParts(c, hs...) }
	c.current("fork", refs("f1", "shared"))
	for i := range 30 { // the parent goes on, a snapshot a minute
		c.current("parent", refs(fmt.Sprint("p", i), "shared"))
		now = now.Add(time.Minute)
	}
	if _, ok := c.owners["fork"]; ok {
		t.Error("the fork, idle for 30 minutes, is still tracked")
	}
	if _, ok := c.get("f1"); ok {
		t.Error("the idle fork's own part is still cached")
	}
	if _, ok := c.get("shared"); !ok {
		t.Error("a part the parent still lists was dropped with the idle fork")
	}
	if _, ok := c.get("p29"); !ok {
		t.Error("the parent's current part was dropped")
	}
}

// cachedParts caches a part of one entry under each hash and returns
// their refs, as a manifest listing them would have.
func cachedParts(c *partCache, hashes ...string) []partRef {
	var out []partRef
	for _, h := range hashes {
		c.put(h, make([]ManifestEntry, 1))
		out = append(out, partRef{hash: h})
	}
	return out
}

// A parsed part's entries keep their own strings, not the manifest lines
// they were read from, and a pack's name once: what a worker holds per
// cached file. Measured as the heap the parsed entries keep after a
// collection: 379 bytes an entry when each kept its line, 239 without
// (struct 120, hash 64, stat key and path), with the pack's 64 shared.
func TestParsedPartsKeepLittleOfTheirLines(t *testing.T) {
	const n = 3000
	pack := strings.Repeat("ab", 32)
	entries := make([]ManifestEntry, n)
	for i := range entries {
		sum := sha256.Sum256([]byte(fmt.Sprint(i)))
		entries[i] = ManifestEntry{
			Path: fmt.Sprintf("chaos/s01t%dc%d", i/3, i%3), Type: EntryFile, Mode: 0o644, Size: 20,
			MTime: 1_700_000_000_123_456_789 + int64(i), Hash: hex.EncodeToString(sum[:]),
			Location: Location{Pack: pack, Offset: int64(40 * i), Stored: 33},
			Stat:     fmt.Sprintf("%d:%d", 1_000_000+i, 1_700_000_000_123_456_789+i),
		}
	}
	data := encodePart(entries)
	before := liveHeap()
	parsed, err := parsePart(data)
	if err != nil {
		t.Fatal(err)
	}
	kept := (liveHeap() - before) / n
	runtime.KeepAlive(data)
	if !slices.EqualFunc(parsed, entries, func(a, b ManifestEntry) bool { return a == b }) {
		t.Fatal("the parsed entries differ from the encoded ones")
	}
	if kept > 300 {
		t.Errorf("parsed entries keep %d bytes each, want at most 300 (their lines are %d bytes)", kept, len(data)/n)
	}
	t.Logf("a parsed entry keeps %d bytes (its line: %d)", kept, len(data)/n)
	runtime.KeepAlive(parsed)
}

// liveHeap is the heap in use right after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
