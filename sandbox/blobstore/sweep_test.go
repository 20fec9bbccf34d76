package blobstore

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// TestClaimKeepsTheFirstOwner: the first deployment to claim a store owns
// it; a later claim by another returns the first.
func TestClaimKeepsTheFirstOwner(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if owner, err := s.Claim(ctx, "cluster-a/default/sandbot"); err != nil || owner != "cluster-a/default/sandbot" {
				t.Fatalf("first claim = %q, %v", owner, err)
			}
			if owner, err := s.Claim(ctx, "cluster-b/default/sandbot"); err != nil || owner != "cluster-a/default/sandbot" {
				t.Fatalf("second deployment's claim = %q, %v; want the first owner", owner, err)
			}
			if owner, err := s.Claim(ctx, "cluster-a/default/sandbot"); err != nil || owner != "cluster-a/default/sandbot" {
				t.Fatalf("owner's own claim again = %q, %v", owner, err)
			}
			if _, err := s.Claim(ctx, ""); err == nil {
				t.Error("an empty deployment could claim the store")
			}
		})
	}
}

func TestSessionIDsAndDeleteOlder(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ids := []string{"slack:T1:C1:1700000000.0001", "a/b", "100%"}
			for _, id := range ids {
				for turn := 1; turn <= 2; turn++ {
					if _, err := s.Put(ctx, sandbox.SnapshotKey(id, turn), strings.NewReader("tar")); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := s.Claim(ctx, "d"); err != nil { // not a session
				t.Fatal(err)
			}
			got, err := s.SessionIDs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			want := slices.Clone(ids)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("SessionIDs = %q, want %q", got, want)
			}
			// A cutoff before the writes deletes nothing; one after, all
			// of that session and nothing of the others.
			if n, err := s.DeleteOlder(ctx, sandbox.SessionPrefix("a/b"), time.Now().Add(-time.Hour)); err != nil || n != 0 {
				t.Fatalf("DeleteOlder with a past cutoff = %d, %v", n, err)
			}
			if n, err := s.DeleteOlder(ctx, sandbox.SessionPrefix("a/b"), time.Now().Add(time.Hour)); err != nil || n != 2 {
				t.Fatalf("DeleteOlder = %d, %v; want 2", n, err)
			}
			for _, id := range ids {
				ok, _ := s.Exists(ctx, sandbox.SnapshotKey(id, 1))
				if ok == (id == "a/b") {
					t.Errorf("after deleting a/b: %s exists = %v", id, ok)
				}
			}
		})
	}
}
