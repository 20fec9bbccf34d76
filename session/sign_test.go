package session_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sandbot/sandbot/session"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func TestSignatureBindsEverythingItCovers(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const wf = "session/slack/T1/C1/1.2"
	signed := func() *session.ApproveRequest {
		r := &session.ApproveRequest{CallID: "c1", Decision: session.DecisionApprove, User: session.User{ID: "U1", Roles: []string{"b", "a"}}}
		session.Sign(key, wf, session.UpdateApprove, r, now)
		return r
	}
	if err := session.Verify(key, wf, session.UpdateApprove, signed(), now.Add(time.Minute)); err != nil {
		t.Fatalf("a fresh signature must verify: %v", err)
	}
	// Role order does not matter; the set does.
	r := signed()
	r.User.Roles = []string{"a", "b"}
	if err := session.Verify(key, wf, session.UpdateApprove, r, now); err != nil {
		t.Fatalf("reordered roles: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(r *session.ApproveRequest) (wf, update string, k []byte, at time.Time)
		want   error
	}{
		{"another user", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			r.User.ID = "U2"
			return wf, session.UpdateApprove, key, now
		}, session.ErrBadSignature},
		{"an added role", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			r.User.Roles = append(r.User.Roles, "admin")
			return wf, session.UpdateApprove, key, now
		}, session.ErrBadSignature},
		{"another decision", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			r.Decision = session.DecisionApproveAlways
			return wf, session.UpdateApprove, key, now
		}, session.ErrBadSignature},
		{"another call", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			r.CallID = "c2"
			return wf, session.UpdateApprove, key, now
		}, session.ErrBadSignature},
		{"another session", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			return "session/slack/T1/C1/9.9", session.UpdateApprove, key, now
		}, session.ErrBadSignature},
		{"another update", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			return wf, session.UpdateDestroy, key, now
		}, session.ErrBadSignature},
		{"another key", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			return wf, session.UpdateApprove, []byte("ffffffffffffffffffffffffffffffff"), now
		}, session.ErrBadSignature},
		{"a moved time", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			r.Auth.At = r.Auth.At.Add(time.Second)
			return wf, session.UpdateApprove, key, now
		}, session.ErrBadSignature},
		{"stale", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			return wf, session.UpdateApprove, key, now.Add(session.SignatureMaxAge + time.Second)
		}, session.ErrStaleSignature},
		{"unsigned", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			r.Auth = session.Signature{}
			return wf, session.UpdateApprove, key, now
		}, session.ErrUnsigned},
		{"no key on the worker", func(r *session.ApproveRequest) (string, string, []byte, time.Time) {
			return wf, session.UpdateApprove, nil, now
		}, session.ErrBadSignature},
	} {
		r := signed()
		w, u, k, at := tc.mutate(r)
		if err := session.Verify(k, w, u, r, at); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestEveryRequestTypeIsSignable(t *testing.T) {
	for _, req := range []any{
		session.MessageRequest{}, session.ApproveRequest{}, session.PauseRequest{}, session.ResumeRequest{},
		session.StopRequest{}, session.DestroyRequest{}, session.SetBackendRequest{}, session.ForkRequest{},
		session.ChatRefRequest{}, session.ClaimFinalRequest{}, session.ClaimWatchRequest{},
	} {
		if _, ok := session.SignedRequest(req); !ok {
			t.Errorf("%T cannot be signed", req)
		}
	}
}

// A watch lease claimed with a message is not part of its signature: a
// worker of an older build, which does not know the field, verifies the
// message a new bot signed (the rolling-upgrade test caught every such
// message refused when it was).
func TestMessageSignatureLeavesTheWatchClaimOut(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const wf = "session/slack/T1/C1/1.2"
	r := &session.MessageRequest{EventID: "e1", Text: "hi", Watch: &session.WatchClaim{Claimer: "bot-a", For: 15 * time.Second}}
	session.Sign(key, wf, session.UpdateSendMessage, r, now)
	old := *r
	old.Watch = nil // what an older worker decodes
	if err := session.Verify(key, wf, session.UpdateSendMessage, &old, now); err != nil {
		t.Fatalf("an older worker refuses a new bot's message: %v", err)
	}
	r.Text = "tampered"
	if err := session.Verify(key, wf, session.UpdateSendMessage, r, now); !errors.Is(err, session.ErrBadSignature) {
		t.Fatalf("the text is still signed: got %v", err)
	}
}
