package sandbox

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
)

// SnapshotDir stores the directory dir, which lives on the worker's own
// host, as an incremental snapshot at key: the way work done outside any
// sandbox (a repository the worker cloned with its credentials) becomes a
// session's workspace, which every backend then restores from the store.
// limit caps the content written (0: none).
func SnapshotDir(ctx context.Context, store SnapshotStore, dir, key string, limit int64) (files int, size int64, err error) {
	if err := CheckKey(key); err != nil {
		return 0, 0, fmt.Errorf("sandbox: snapshot %s: %w", dir, err)
	}
	w := newObjectWriter(ctx, store, nil, limit)
	m, err := snapshotTree(ctx, dir, nil, w, &quota{}, func(string, error) {})
	if werr := w.wait(); err == nil {
		err = werr
	}
	if err == nil && w.over.Load() {
		err = fmt.Errorf("the snapshot is over its %s cap", FormatBytes(limit))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("sandbox: snapshot %s: %w", dir, err)
	}
	if _, err := storeManifest(ctx, w, key, m); err != nil {
		return 0, 0, fmt.Errorf("sandbox: store snapshot %s: %w", key, err)
	}
	files, size = m.Files()
	return files, size, nil
}

// ExtractManifest writes the entries of m for which keep returns true (all
// when keep is nil) into dir, an empty directory on the worker's host:
// how the worker reads a workspace (for a diff or a commit) without
// entering its sandbox. Every content is checked against its hash as it is
// read, so a corrupt object fails the extraction instead of reaching a
// commit.
func ExtractManifest(ctx context.Context, store SnapshotStore, m *Manifest, dir string, keep func(*ManifestEntry) bool) error {
	sub := &Manifest{}
	if keep == nil {
		sub.Entries = m.Entries
	} else {
		kept := map[string]bool{}
		for _, e := range m.Entries {
			if keep(&e) {
				kept[e.Path] = true
			}
		}
		// A kept hard link needs the file it names.
		for _, e := range m.Entries {
			if e.Type == EntryHardlink && kept[e.Path] {
				kept[e.Link] = true
			}
		}
		for _, e := range m.Entries {
			if kept[e.Path] {
				sub.Entries = append(sub.Entries, e)
			}
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("sandbox: extract: %w", err)
	}
	defer root.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeManifestArchive(ctx, sub, store, pw)) }()
	err = extractTo(root, tar.NewReader(bufio.NewReaderSize(pr, 1<<20)))
	pr.CloseWithError(err)
	if err != nil {
		return fmt.Errorf("sandbox: extract into %s: %w", dir, err)
	}
	return nil
}

// extractTo writes a tar stream this package produced under root. os.Root
// keeps every write inside it whatever the names and links say.
func extractTo(root *os.Root, tr *tar.Reader) error {
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name, err := CheckArchiveName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		mode := fs.FileMode(hdr.Mode) & fs.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return err
			}
		case tar.TypeLink:
			target, err := CheckHardlinkTarget(hdr.Name, hdr.Linkname)
			if err != nil {
				return err
			}
			if err := root.Link(target, name); err != nil {
				return err
			}
		}
	}
}
