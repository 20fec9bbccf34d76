package e2b_test

import (
	"errors"
	"slices"
	"testing"

	fakee2b "github.com/sandbot/sandbot/internal/fake/e2b"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/e2b"
)

func TestSweep(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	ctx := ctxT(t)
	prod := newBackend(t, fake, e2b.Options{Deployment: "prod"})
	other := newBackend(t, fake, e2b.Options{Deployment: "staging"})
	mk := func(b *e2b.Backend, session string, old bool) sandbox.Handle {
		h, err := b.Create(ctx, sandbox.Spec{SessionID: session})
		if err != nil {
			t.Fatal(err)
		}
		if old {
			fake.Backdate(h.ID, 2*sandbox.SweepGrace)
		}
		return h
	}
	orphan := mk(prod, "ended", true)
	pausedOrphan := mk(prod, "ended-too", true)
	if err := prod.Suspend(ctx, pausedOrphan); err != nil {
		t.Fatal(err)
	}
	live := mk(prod, "live", true)
	young := mk(prod, "ended-young", false)
	unsure := mk(prod, "unsure", true)
	foreign := mk(other, "ended", true)

	alive := func(session string) (bool, error) {
		switch session {
		case "live":
			return true, nil
		case "unsure":
			return false, errors.New("temporal is down")
		}
		return false, nil
	}
	if removed, err := newBackend(t, fake, e2b.Options{}).Sweep(ctx, alive); err != nil || len(removed) != 0 {
		t.Errorf("Sweep without a deployment removed %v, %v", removed, err)
	}
	removed, err := prod.Sweep(ctx, alive)
	if err == nil {
		t.Error("Sweep hid the failed alive check")
	}
	slices.Sort(removed)
	want := []string{orphan.ID, pausedOrphan.ID}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	var left []string
	for _, s := range fake.Sandboxes() {
		left = append(left, s.ID)
	}
	for _, h := range []sandbox.Handle{live, young, unsure, foreign} {
		if !slices.Contains(left, h.ID) {
			t.Errorf("%s (session %s) was swept", h.ID, h.SessionID)
		}
	}
}
