package sandbox

import "testing"

// BeatAtOnce makes sandbox activities send their first heartbeat at the
// start, for the rest of t: tests that check what a beat carries need one
// from quick activities, which otherwise send none.
func BeatAtOnce(t testing.TB) {
	beatAtOnce.Store(true)
	t.Cleanup(func() { beatAtOnce.Store(false) })
}

// FreshPartsCache gives the rest of t a parts cache of its own (sandbox
// tests do not run in parallel) and returns how many entries it holds.
func FreshPartsCache(t testing.TB) func() int {
	old := partsCache
	partsCache = newPartCache(64<<10, maxPartOwners)
	t.Cleanup(func() { partsCache = old })
	return partsCache.heldEntries
}

// CachedParts reports how many of a stored manifest's parts the parts
// cache holds, of how many.
func CachedParts(m *Manifest) (cached, total int) {
	for _, ref := range m.stored {
		if _, ok := partsCache.get(ref.hash); ok {
			cached++
		}
	}
	return cached, len(m.stored)
}
