package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// Workspaces are named by a hash of their session ID, so the ID itself is
// kept beside them, out of the sandbox's reach: root/.sessions/<name>
// holds it. The sweeper reads it to ask whether the session still runs.
// Workspaces made before this file existed have none and are never swept.
const sessionsDir = ".sessions"

// ownerFile names the file holding the deployment that owns the root.
const ownerFile = ".deployment"

// recordSession notes which session a workspace belongs to.
func (b *Backend) recordSession(name, sessionID string) error {
	dir := filepath.Join(b.root, sessionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+name+"."+randomSuffix())
	if err := os.WriteFile(tmp, []byte(sessionID), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// forgetSession drops the note of a removed workspace.
func (b *Backend) forgetSession(name string) error {
	err := os.Remove(filepath.Join(b.root, sessionsDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// claimRoot records deployment as the root's owner unless another already
// is, and returns the owner (the first to claim wins; see rootInstance).
func claimRoot(root, deployment string) (string, error) {
	path := filepath.Join(root, ownerFile)
	tmp := path + "." + randomSuffix()
	if err := os.WriteFile(tmp, []byte(deployment), 0o600); err != nil {
		return "", err
	}
	err := os.Link(tmp, path)
	os.Remove(tmp)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

// Sweep removes the workspaces of sessions that ended without /destroy
// (terminated, timed out, or gone from the cluster): for every workspace
// whose session alive reports as not running, it kills what still runs
// there and deletes the workspace. It sweeps only when the root belongs to
// this backend's deployment (Options.Deployment), so two installations
// sharing a directory never remove each other's workspaces, and it spares
// workspaces created or reused within sandbox.SweepGrace, which a new
// session of the same ID may own. A workspace is kept whenever alive fails
// for its session; those failures are joined into the error. It returns
// the removed workspaces' names.
func (b *Backend) Sweep(ctx context.Context, alive func(sessionID string) (bool, error)) (removed []string, err error) {
	if b.opts.Deployment == "" {
		return nil, nil
	}
	if b.owner != b.opts.Deployment {
		b.log.Warn("local: not sweeping workspaces of another deployment", "root", b.root, "owner", b.owner, "deployment", b.opts.Deployment)
		return nil, nil
	}
	dir := filepath.Join(b.root, sessionsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("local: sweep: %w", err)
	}
	cutoff := time.Now().Add(-sandbox.SweepGrace)
	var errs []error
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return removed, fmt.Errorf("local: sweep: %w", err)
		}
		name := e.Name()
		if !validID.MatchString(name) {
			continue // a temporary file of recordSession, or not ours
		}
		note := filepath.Join(dir, name)
		data, err := os.ReadFile(note)
		if err != nil {
			continue // removed meanwhile
		}
		sessionID := string(data)
		if dirName(sessionID) != name {
			b.log.Warn("local: sweep: session note does not match its workspace; leaving it", "note", note)
			continue
		}
		if young(note, cutoff) {
			continue
		}
		live, err := alive(sessionID)
		if err != nil {
			errs = append(errs, fmt.Errorf("session %q: %w", sessionID, err))
			continue
		}
		if live || young(note, cutoff) {
			continue
		}
		h := sandbox.Handle{Backend: Name, ID: name, SessionID: sessionID, Meta: map[string]string{metaInstance: b.instance}}
		if err := b.Destroy(ctx, h); err != nil {
			errs = append(errs, err)
			continue
		}
		b.log.Info("local: removed the workspace of an ended session", "workflow_id", sessionID, "workspace", name)
		removed = append(removed, name)
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("local: sweep: %w", errors.Join(errs...))
	}
	return removed, nil
}

// young reports whether path was written after cutoff (or cannot be read,
// which is taken as young: keep when unsure).
func young(path string, cutoff time.Time) bool {
	fi, err := os.Stat(path)
	return err != nil || fi.ModTime().After(cutoff)
}
