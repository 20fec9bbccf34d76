package sandbox_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/blobstore"
)

// The worker's cache of manifest parts holds what the sessions' current
// manifests list, not every part a busy session ever had: a session whose
// workspace changes every turn (the soak adds three files a turn) makes a
// new part for each change, and the parts it replaced are never read
// again. A fork shares its parent's parts, which stay cached while the
// fork's manifest lists them.
func TestPartsCacheDropsSupersededParts(t *testing.T) {
	ctx := context.Background()
	held := sandbox.FreshPartsCache(t)
	store, err := blobstore.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	hash := strings.Repeat("cd", 32)
	entry := func(name string) sandbox.ManifestEntry {
		return sandbox.ManifestEntry{Path: name, Type: sandbox.EntryFile, Mode: 0o644, Size: 1, Hash: hash}
	}
	m := &sandbox.Manifest{}
	for i := range 2000 {
		m.Entries = append(m.Entries, entry(fmt.Sprintf("d/f%05d", i*10)))
	}
	key := sandbox.SnapshotKey("parent", 1)
	if _, err := sandbox.StoreManifest(ctx, store, key, m); err != nil {
		t.Fatal(err)
	}
	// A fork at turn 1: its manifest is the parent's, under its own key.
	fork, err := sandbox.LoadManifest(ctx, store, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.StoreManifest(ctx, store, sandbox.SnapshotKey("fork", 1), fork); err != nil {
		t.Fatal(err)
	}
	for turn := 2; turn <= 150; turn++ {
		prev, err := sandbox.LoadManifest(ctx, store, key)
		if err != nil {
			t.Fatal(err)
		}
		// Three new files among the others, and one changed.
		next := &sandbox.Manifest{}
		for i, e := range prev.Entries {
			if i == (turn*37)%len(prev.Entries) {
				e.MTime++
			}
			next.Entries = append(next.Entries, e)
		}
		for c := range 3 {
			next.Entries = append(next.Entries, entry(fmt.Sprintf("d/f%05d.%03d.%d", ((turn*7919+c*104729)%2000)*10, turn, c)))
		}
		slices.SortFunc(next.Entries, func(a, b sandbox.ManifestEntry) int { return strings.Compare(a.Path, b.Path) })
		key = sandbox.SnapshotKey("parent", turn)
		if _, err := sandbox.StoreManifest(ctx, store, key, next); err != nil {
			t.Fatal(err)
		}
		m = next
	}
	// The parent's current parts and the fork's: at most both manifests'
	// entries. Without dropping, about 20,000 (three or four new parts of
	// 64 entries or so a turn).
	if got, bound := held(), len(m.Entries)+len(fork.Entries); got > bound {
		t.Errorf("the parts cache holds %d entries after 150 snapshots of a %d-entry workspace (and a fork of %d): want at most %d, what the current manifests list",
			got, len(m.Entries), len(fork.Entries), bound)
	}
	if cached, total := sandbox.CachedParts(fork); cached != total {
		t.Errorf("%d of the fork's %d parts are cached: its parent's later snapshots dropped parts the fork still lists", cached, total)
	}
	if cached, total := sandbox.CachedParts(m); cached != total {
		t.Errorf("%d of the parent's current %d parts are cached, want all", cached, total)
	}
	// The collector reads every manifest, the parent's old ones too; none
	// of them becomes current, so the current parts stay. (A copy of an
	// old manifest, made in the store, is the last the collector reads.)
	if err := store.Copy(ctx, sandbox.SnapshotKey("parent", 100), sandbox.SnapshotKey("parent", 999999)); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.CollectObjects(ctx, store, time.Now()); err != nil {
		t.Fatal(err)
	}
	if cached, total := sandbox.CachedParts(m); cached != total {
		t.Errorf("after a collection, %d of the parent's current %d parts are cached, want all", cached, total)
	}
	// Nor does it fill the cache with the parts of manifests nobody reads
	// again.
	if got, bound := held(), len(m.Entries)+len(fork.Entries); got > bound {
		t.Errorf("after a collection the parts cache holds %d entries, over the current manifests' %d", got, bound)
	}
}
