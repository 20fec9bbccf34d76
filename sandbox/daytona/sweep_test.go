package daytona_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	fakedaytona "github.com/sandbot/sandbot/internal/fake/daytona"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/daytona"
)

func TestSweep(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{TransitionTicks: -1})
	ours := newBackend(t, srv, daytona.Options{Deployment: "prod"})
	theirs := newBackend(t, srv, daytona.Options{Deployment: "staging"})
	ctx := ctxT(t)
	mk := func(b *daytona.Backend, session string, age time.Duration) string {
		h, err := b.Create(ctx, sandbox.Spec{SessionID: session})
		if err != nil {
			t.Fatal(err)
		}
		srv.SetCreated(h.ID, time.Now().Add(-age))
		return h.ID
	}
	old := sandbox.SweepGrace + time.Minute
	dead := mk(ours, "ended", old)
	deadToo := mk(ours, "ended", old)
	live := mk(ours, "running", old)
	young := mk(ours, "ended-young", time.Minute)
	unsure := mk(ours, "unsure", old)
	other := mk(theirs, "ended", old)

	none, err := newBackend(t, srv, daytona.Options{}).Sweep(ctx, func(string) (bool, error) { return false, nil })
	if err != nil || len(none) != 0 {
		t.Fatalf("Sweep without a deployment = %v, %v; want nothing removed", none, err)
	}
	asked := map[string]int{}
	removed, err := ours.Sweep(ctx, func(session string) (bool, error) {
		asked[session]++
		switch session {
		case "running":
			return true, nil
		case "unsure":
			return false, errors.New("temporal unreachable")
		}
		return false, nil
	})
	if err == nil {
		t.Error("Sweep hid the failing alive check")
	}
	slices.Sort(removed)
	want := []string{dead, deadToo}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	if asked["ended"] != 1 || asked["ended-young"] != 0 {
		t.Errorf("alive asked %v: want each old session once and no young one", asked)
	}
	var left []string
	for _, s := range srv.Sandboxes() {
		left = append(left, s.ID)
	}
	slices.Sort(left)
	wantLeft := []string{live, young, unsure, other}
	slices.Sort(wantLeft)
	if !slices.Equal(left, wantLeft) {
		t.Errorf("left %v, want %v", left, wantLeft)
	}
}
