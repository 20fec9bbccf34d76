package sandbox

import (
	"fmt"
	"testing"
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
