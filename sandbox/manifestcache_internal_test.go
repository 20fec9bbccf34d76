package sandbox

import (
	"fmt"
	"testing"
	"time"
)

// The cache of recent manifests is bounded by entries as well as by count:
// a worker whose sessions' workspaces grow (the soak adds files every
// turn) keeps at most maxEntries of them, dropping the oldest, and never
// keeps one larger than the whole bound.
func TestManifestCacheIsBoundedByEntries(t *testing.T) {
	manifest := func(n int) *Manifest { return &Manifest{Entries: make([]ManifestEntry, n)} }
	c := &manifestCache{max: 4, maxEntries: 100}
	c.put("a", "fa", manifest(40))
	c.put("b", "fb", manifest(40))
	if got := c.entries(); got != 80 {
		t.Fatalf("holds %d entries, want 80", got)
	}
	c.put("c", "fc", manifest(40)) // 120 > 100: a goes
	if c.get("a", "fa") != nil || c.get("b", "fb") == nil || c.get("c", "fc") == nil {
		t.Errorf("after a third manifest past the bound, want a dropped and b, c kept")
	}
	if got := c.entries(); got > 100 {
		t.Errorf("holds %d entries, over the bound of 100", got)
	}
	c.put("d", "fd", manifest(101)) // larger than the bound: not kept
	if c.get("d", "fd") != nil {
		t.Error("a manifest larger than the whole bound was kept")
	}
	c.put("b", "fb2", manifest(101)) // b's newer manifest is too large: b's old one goes too
	if c.get("b", "fb") != nil {
		t.Error("a session's older manifest stayed after its newer one was refused")
	}
	for i := range 10 {
		c.put(fmt.Sprint("k", i), "f", manifest(1))
	}
	if len(c.list) != 4 {
		t.Errorf("holds %d manifests, want at most 4", len(c.list))
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
