package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// age makes a workspace look created before the sweep grace.
func age(t *testing.T, b *Backend, h sandbox.Handle) {
	t.Helper()
	old := time.Now().Add(-2 * sandbox.SweepGrace)
	if err := os.Chtimes(filepath.Join(b.root, sessionsDir, h.ID), old, old); err != nil {
		t.Fatal(err)
	}
}

func TestSweepRemovesEndedSessionsOnly(t *testing.T) {
	b := newBackend(t, Options{Deployment: "cluster-a/default/sandbot"})
	ctx := context.Background()
	ended := sandboxtest.NewSandbox(t, b)
	live := sandboxtest.NewSandbox(t, b)
	unsure := sandboxtest.NewSandbox(t, b)
	fresh := sandboxtest.NewSandbox(t, b)
	for _, h := range []sandbox.Handle{ended, live, unsure} {
		sandboxtest.Sh(t, b, h, "echo work > f.txt")
		age(t, b, h)
	}
	asked := map[string]int{}
	removed, err := b.Sweep(ctx, func(id string) (bool, error) {
		asked[id]++
		switch id {
		case live.SessionID:
			return true, nil
		case unsure.SessionID:
			return false, errors.New("temporal unreachable")
		}
		return false, nil
	})
	if err == nil {
		t.Error("Sweep hid the failed look-up")
	}
	if !slices.Equal(removed, []string{ended.ID}) {
		t.Fatalf("Sweep removed %q, want only the ended session's %q", removed, ended.ID)
	}
	if asked[fresh.SessionID] != 0 {
		t.Error("Sweep asked about a workspace made within the grace period")
	}
	for _, h := range []sandbox.Handle{live, unsure, fresh} {
		if ok, _ := b.Alive(ctx, h); !ok {
			t.Errorf("workspace of %s was removed", h.SessionID)
		}
	}
	if ok, _ := b.Alive(ctx, ended); ok {
		t.Error("the ended session's workspace survived")
	}
	if _, err := os.Stat(filepath.Join(b.root, sessionsDir, ended.ID)); !os.IsNotExist(err) {
		t.Errorf("the ended session's note survived: %v", err)
	}
}

// TestSweepSparesAnotherDeploymentsRoot: a root first used by one
// deployment is never swept by another, even one that finds every session
// unknown.
func TestSweepSparesAnotherDeploymentsRoot(t *testing.T) {
	root := t.TempDir()
	mine := newBackend(t, Options{Root: root, Deployment: "cluster-a/default/sandbot"})
	h := sandboxtest.NewSandbox(t, mine)
	age(t, mine, h)
	other := newBackend(t, Options{Root: root, Deployment: "cluster-b/default/sandbot"})
	removed, err := other.Sweep(context.Background(), func(string) (bool, error) { return false, nil })
	if err != nil || len(removed) != 0 {
		t.Fatalf("another deployment's sweep removed %q (%v)", removed, err)
	}
	if ok, _ := mine.Alive(context.Background(), h); !ok {
		t.Fatal("another deployment's sweep removed a workspace")
	}
	// Without a deployment a backend never sweeps.
	anon := newBackend(t, Options{Root: root})
	if removed, _ := anon.Sweep(context.Background(), func(string) (bool, error) { return false, nil }); len(removed) != 0 {
		t.Fatalf("a backend without a deployment swept %q", removed)
	}
	// The owner does.
	if removed, _ := mine.Sweep(context.Background(), func(string) (bool, error) { return false, nil }); !slices.Equal(removed, []string{h.ID}) {
		t.Fatalf("the owner's sweep removed %q, want %q", removed, h.ID)
	}
}
