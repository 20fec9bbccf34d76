package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CollectReport is what one garbage collection of content objects did.
type CollectReport struct {
	// Manifests is how many manifests were read; Objects how many objects
	// the store held; Deleted how many of them were deleted.
	Manifests, Objects, Deleted int
}

// CollectObjects deletes the content objects (packs, parts and large
// files under ObjectsPrefix) that no manifest of any session names and
// that are older than SweepGrace. It is safe against snapshots and forks
// running meanwhile:
//
//   - a snapshot names only objects it wrote (younger than the grace),
//     objects its base manifest names (which stays until the new manifest
//     is written), and large objects written within ObjectReuseWindow,
//     which the grace outlives;
//   - a fork copies a manifest that exists until the copy is done (the
//     source session deletes snapshots only between turns, never while a
//     fork is copying), and a manifest written after the collection began
//     is read in a second listing before anything is deleted;
//   - a manifest that cannot be read (damaged) stops the collection, as
//     what it names is unknown; one deleted meanwhile is skipped.
//
// Several workers may collect at once.
func CollectObjects(ctx context.Context, store SnapshotStore, now time.Time) (CollectReport, error) {
	var rep CollectReport
	marked := map[string]bool{}
	read := map[string]bool{}
	mark := func(key string) error {
		if read[key] {
			return nil
		}
		read[key] = true
		m, err := readStoredManifest(ctx, store, key, "")
		if errors.Is(err, ErrSnapshotNotFound) && !errors.Is(err, ErrCorruptObject) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		if m == nil {
			return nil // a full tar: it names no objects
		}
		rep.Manifests++
		for _, p := range m.stored {
			marked[objectOf(p.hash, p.Location)] = true
		}
		for _, e := range m.Entries {
			if e.Type == EntryFile {
				marked[objectOf(e.Hash, e.Location)] = true
			}
		}
		return nil
	}
	listManifests := func(since time.Time) error {
		return store.List(ctx, SessionsPrefix, func(key string, mod time.Time) error {
			if !strings.HasSuffix(key, ".tar") || mod.Before(since) {
				return nil
			}
			if since.IsZero() {
				return mark(key)
			}
			delete(read, key) // written since the first listing: read again
			return mark(key)
		})
	}
	if err := listManifests(time.Time{}); err != nil {
		return rep, fmt.Errorf("collect objects: %w", err)
	}
	if err := listManifests(now); err != nil {
		return rep, fmt.Errorf("collect objects: %w", err)
	}
	cutoff := now.Add(-SweepGrace)
	err := store.List(ctx, ObjectsPrefix, func(key string, mod time.Time) error {
		rep.Objects++
		h := objectHashOfKey(key)
		if h == "" || marked[h] || !mod.Before(cutoff) {
			return nil
		}
		if err := store.Delete(ctx, key); err != nil {
			return err
		}
		rep.Deleted++
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("collect objects: %w", err)
	}
	return rep, nil
}

// objectOf is the hash naming the object that holds a content.
func objectOf(hash string, l Location) string {
	if l.Pack != "" {
		return l.Pack
	}
	return hash
}

// readStoredManifest reads the manifest at key: nil for a full tar. owner
// is readManifest's.
func readStoredManifest(ctx context.Context, store SnapshotStore, key, owner string) (*Manifest, error) {
	r, err := store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	if head, _ := br.Peek(len(manifestMagic)); !IsManifest(head) {
		return nil, nil
	}
	return readManifest(ctx, store, owner, br)
}
