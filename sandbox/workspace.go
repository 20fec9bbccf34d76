package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"go.temporal.io/sdk/temporal"
)

// The activities of incremental snapshots (manifest.go). They have names
// of their own, not Snapshot's and Ensure's: a worker of an older build
// would write full tars where manifests are expected, and could not
// restore a manifest, so the workflow schedules these only once it runs
// code that knows them, and only workers that know them pick them up.

// RestoreRequest asks for a live sandbox's workspace to be brought back to
// a snapshot (a rewind).
type RestoreRequest struct {
	Handle Handle `json:"handle"`
	// Key is the snapshot to restore.
	Key string `json:"key"`
	// Current is the snapshot the workspace was last saved as, if any: it
	// spares reading files that did not change.
	Current string `json:"current,omitempty"`
}

// RestoreResult says what a restore did.
type RestoreResult struct {
	// Written counts the entries written or removed (the rest were
	// already right); -1 when the whole workspace was replaced.
	Written int `json:"written"`
}

// SaveWorkspace writes an incremental snapshot of the workspace to
// req.Key: a manifest naming each file's content by hash, and the
// contents not yet in the store. When the backend's workspace is a
// directory on this host (Tree), only files whose metadata changed since
// req.Base are read; otherwise the backend exports a tar stream, which is
// hashed as it passes. Nothing is written when the workspace still matches
// req.PrevFingerprint.
func (a *Activities) SaveWorkspace(ctx context.Context, req SnapshotRequest) (res SnapshotResult, err error) {
	defer func() { err = RedactError(a.Redactor, err) }()
	if err := CheckKey(req.Key); err != nil {
		return SnapshotResult{}, badRequest("sandbox: snapshot: %v", err)
	}
	if a.Store == nil {
		return SnapshotResult{}, badRequest("sandbox: snapshot: no snapshot store configured")
	}
	b, err := a.backend(req.Handle.Backend)
	if err != nil {
		return SnapshotResult{}, err
	}
	start := time.Now()
	defer func() { countSnapshot(req.Handle.Backend, res, err, time.Since(start)) }()
	stop := heartbeatWhileRunning(ctx, nil)
	defer stop()

	base, err := a.baseManifest(ctx, req.Base, req.PrevFingerprint)
	if err != nil {
		// The base only saves work; without it every file is read.
		a.log().Warn("snapshot: cannot read the previous manifest; reading every file", "session_id", req.Handle.SessionID, "key", req.Base, "error", err)
		base = nil
	}
	w := newObjectWriter(ctx, a.Store, base, a.Limits.SnapshotBytes)
	q := &quota{limit: a.Limits.WorkspaceBytes}
	var m *Manifest
	var fp string
	if t, ok := b.(Tree); ok {
		dir, _, terr := t.TreeDirs(req.Handle)
		if terr != nil {
			return SnapshotResult{}, classify("snapshot", terr)
		}
		m, err = snapshotTree(ctx, dir, base, w, q, func(rel string, err error) {
			a.log().Warn("snapshot: skipping unreadable entry", "entry", rel, "session_id", req.Handle.SessionID, "error", err)
		})
		if err == nil && base != nil && sameEntries(base.Entries, m.Entries) {
			// Nothing changed since the base: its fingerprint stands.
			fp = base.Fingerprint()
		}
	} else {
		if f, ok := b.(Fingerprinter); ok {
			if fp, err = f.Fingerprint(ctx, req.Handle); err != nil {
				return SnapshotResult{}, classify("snapshot: fingerprint", err)
			}
			if fp != "" && fp == req.PrevFingerprint {
				return SnapshotResult{Written: false, Fingerprint: fp}, nil
			}
		}
		m, err = a.snapshotExport(ctx, b, req.Handle, w, q)
	}
	werr := w.wait()
	switch {
	case q.over():
		return SnapshotResult{}, a.overQuota(req.Handle, req.Key)
	case w.over.Load():
		return SnapshotResult{}, a.overCap(req.Handle, req.Key)
	case err != nil:
		return SnapshotResult{}, classify("snapshot", err)
	case werr != nil:
		return SnapshotResult{}, classify("snapshot: store", werr)
	}
	files, size := m.Files()
	if fp != "" && fp == req.PrevFingerprint {
		return SnapshotResult{Written: false, Fingerprint: fp, Files: files, WorkspaceBytes: size}, nil
	}
	n, err := storeManifest(ctx, w, req.Key, m)
	if _, tree := b.(Tree); tree {
		fp = m.Fingerprint()
	}
	if err == nil {
		recentManifests.put(req.Key, fp, m)
		// The next snapshot looks files up in it by path and content;
		// build those indexes now, between turns, rather than on the next
		// snapshot's clock.
		go m.index()
	}
	if w.over.Load() {
		return SnapshotResult{}, a.overCap(req.Handle, req.Key)
	}
	if err != nil {
		return SnapshotResult{}, classify("snapshot: store", err)
	}
	return SnapshotResult{
		Written: true, Key: req.Key, Fingerprint: fp, Bytes: w.written.Load() + n,
		Objects: int(w.objects.Load()), Files: files, WorkspaceBytes: size,
	}, nil
}

// snapshotExport hashes the backend's tar export as it streams.
func (a *Activities) snapshotExport(ctx context.Context, b Backend, h Handle, w *objectWriter, q *quota) (*Manifest, error) {
	pr, pw := io.Pipe()
	exported := make(chan error, 1)
	go func() {
		err := b.Export(ctx, h, pw)
		pw.CloseWithError(err)
		exported <- err
	}()
	m, err := snapshotArchive(ctx, pr, w, q)
	if err != nil {
		pr.CloseWithError(err)
	} else {
		// Drain what follows the end-of-archive marker, so the exporter
		// can finish its writes.
		_, _ = io.Copy(io.Discard, pr)
	}
	if xerr := <-exported; xerr != nil && err == nil {
		err = fmt.Errorf("export: %w", xerr)
	}
	return m, err
}

func (a *Activities) overQuota(h Handle, key string) error {
	a.log().Warn("workspace over quota; snapshot not stored", "session_id", h.SessionID, "key", key, "quota", a.Limits.WorkspaceBytes)
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"the workspace is over its quota of %s (%s), so no snapshot was stored; delete files such as build output, caches or downloads to get under it, or ask the operator to raise the quota",
		FormatBytes(a.Limits.WorkspaceBytes), a.Limits.WorkspaceSetting), ErrTypeWorkspaceOverQuota, nil)
}

func (a *Activities) overCap(h Handle, key string) error {
	a.log().Warn("snapshot over its cap; not stored", "session_id", h.SessionID, "key", key, "cap", a.Limits.SnapshotBytes)
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
		"the compressed snapshot of the workspace grew past its cap of %s (%s), so none was stored; delete files (large or already-compressed ones count the most) to get under it, or ask the operator to raise the cap",
		FormatBytes(a.Limits.SnapshotBytes), a.Limits.SnapshotSetting), ErrTypeSnapshotTooLarge, nil)
}

// baseManifest is loadManifest for the manifest a snapshot starts from,
// which this worker usually wrote itself at the previous turn: it is kept
// in memory, by key and fingerprint (a key can be written again, its
// fingerprint names what it holds).
func (a *Activities) baseManifest(ctx context.Context, key, fp string) (*Manifest, error) {
	if m := recentManifests.get(key, fp); m != nil {
		return m, nil
	}
	return a.loadManifest(ctx, key)
}

// loadManifest reads the manifest at key: nil for no key or a snapshot
// that is a full tar.
func (a *Activities) loadManifest(ctx context.Context, key string) (*Manifest, error) {
	if key == "" {
		return nil, nil
	}
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	return readStoredManifest(ctx, a.Store, key, path.Dir(key))
}

// EnsureWorkspace is Ensure for sessions whose snapshots may be manifests.
func (a *Activities) EnsureWorkspace(ctx context.Context, req EnsureRequest) (EnsureResult, error) {
	return a.Ensure(ctx, req)
}

// RestoreWorkspace brings a live sandbox's workspace back to the snapshot
// req.Key (/rewind). On a Tree backend only the entries that differ are
// written, after every new content was fetched and checked; elsewhere the
// backend imports the whole workspace, which it swaps in only once the
// archive is whole. Either way a corrupt or missing object fails the
// restore with the workspace as it was.
func (a *Activities) RestoreWorkspace(ctx context.Context, req RestoreRequest) (res RestoreResult, err error) {
	defer func() { err = RedactError(a.Redactor, err) }()
	if err := CheckKey(req.Key); err != nil {
		return RestoreResult{}, badRequest("sandbox: restore: %v", err)
	}
	if a.Store == nil {
		return RestoreResult{}, badRequest("sandbox: restore: no snapshot store configured")
	}
	b, err := a.backend(req.Handle.Backend)
	if err != nil {
		return RestoreResult{}, err
	}
	stop := heartbeatWhileRunning(ctx, nil)
	defer stop()
	m, err := a.loadManifest(ctx, req.Key)
	if err == nil && m != nil {
		if t, ok := b.(Tree); ok {
			dir, staging, terr := t.TreeDirs(req.Handle)
			if terr != nil {
				return RestoreResult{}, classify("restore", terr)
			}
			cur, cerr := a.loadManifest(ctx, req.Current)
			if cerr != nil {
				a.log().Warn("restore: cannot read the current manifest; comparing file contents", "key", req.Current, "error", cerr)
				cur = nil
			}
			n, err := applyTree(ctx, dir, staging, m, cur, a.Store)
			if err != nil {
				return RestoreResult{}, restoreError(req.Key, err)
			}
			return RestoreResult{Written: n}, nil
		}
	}
	if err != nil {
		return RestoreResult{}, restoreError(req.Key, err)
	}
	if err := a.restore(ctx, b, req.Handle, req.Key); err != nil {
		return RestoreResult{}, restoreError(req.Key, err)
	}
	return RestoreResult{Written: -1}, nil
}

// restoreError types a failed restore: a damaged snapshot cannot get
// better by retrying.
func restoreError(key string, err error) error {
	if errors.Is(err, ErrUnsafeArchive) || errors.Is(err, ErrBadKey) || errors.Is(err, ErrCorruptObject) || errors.Is(err, ErrBadManifest) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("sandbox: restore %s: %v", key, err), ErrTypeRestoreFailed, nil)
	}
	return classify("restore "+key, err)
}

// restoreManifest fills a sandbox from a manifest: directly on a Tree
// backend, through Import elsewhere.
func (a *Activities) restoreManifest(ctx context.Context, b Backend, h Handle, m *Manifest) error {
	if t, ok := b.(Tree); ok {
		dir, staging, err := t.TreeDirs(h)
		if err != nil {
			return err
		}
		_, err = applyTree(ctx, dir, staging, m, nil, a.Store)
		return err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := writeManifestArchive(ctx, m, a.Store, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	err := b.Import(ctx, h, pr)
	pr.CloseWithError(err)
	if werr := <-done; werr != nil {
		return werr // the cause of whatever Import saw
	}
	return err
}
