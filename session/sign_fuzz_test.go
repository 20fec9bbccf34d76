package session

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"
)

// signedCase is a request the bot signed, as the worker's DecisionGuard
// receives it: JSON, decoded into the update's request type.
type signedCase struct {
	update string
	req    Signed
	fresh  func() Signed // a zero request of the same type to decode into
}

// FuzzVerifySigned feeds the decision guard's check (Verify, after
// Temporal's JSON decoding) with any bytes, seeded with requests the bot
// really signed. Whatever an attacker who can read signed requests (they
// are in workflow history) makes of one, Verify must not panic, must
// refuse with one of its three errors, and may accept only a request that
// means exactly what was signed: the same signed fields (user, roles,
// decision, call, text…).
func FuzzVerifySigned(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	const wf = "session/slack/T1/C1/1700000000.000100"
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	alice := User{ID: "U1", Name: "alice", Roles: []string{"ops", "dev"}}
	cases := []signedCase{
		{UpdateApprove, &ApproveRequest{CallID: "call_1", Decision: DecisionApprove, User: alice}, func() Signed { return &ApproveRequest{} }},
		{UpdateApprove, &ApproveRequest{CallID: "call_1", Decision: DecisionReject, Reason: "not on main", User: alice}, func() Signed { return &ApproveRequest{} }},
		{UpdateSendMessage, &MessageRequest{EventID: "slack:C1:1700000000.000200", User: alice, Text: "run the tests", Model: "gpt-x", Context: "bob: it fails",
			Repo: &RepoSpec{URL: "https://github.com/acme/w", Branch: "main"}, Attachments: []Attachment{{Platform: "slack", ID: "F1", Name: "log.txt", Size: 10}}},
			func() Signed { return &MessageRequest{} }},
		{UpdateDestroy, &DestroyRequest{User: alice}, func() Signed { return &DestroyRequest{} }},
		{UpdateSetBackend, &SetBackendRequest{Backend: "docker", User: alice}, func() Signed { return &SetBackendRequest{} }},
		{UpdateFork, &ForkRequest{Location: Location{Platform: "slack", Workspace: "T1", Channel: "C1", Thread: "1700000000.000900"}, Title: "try b", AtTurn: 3, User: alice},
			func() Signed { return &ForkRequest{} }},
		{UpdateClaimWatch, &ClaimWatchRequest{Claimer: "bot-1", For: WatchLease}, func() Signed { return &ClaimWatchRequest{} }},
		{UpdateSetModel, &SetModelRequest{Model: "gpt-x", User: alice}, func() Signed { return &SetModelRequest{} }},
	}
	// signed holds, per update, what the bot signed: a request that
	// verifies must mean one of these.
	signed := map[string][][]string{}
	for i, c := range cases {
		Sign(key, wf, c.update, c.req, now)
		signed[c.update] = append(signed[c.update], c.req.signedFields())
		b, err := json.Marshal(c.req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	f.Add(uint8(0), []byte(`{"call_id":"call_1","decision":"approve","user":{"id":"U1"},"auth":{"at":"2026-12-01T12:00:00Z","mac":"AAAA"}}`))
	f.Add(uint8(0), []byte(`{"auth":{"at":"0001-01-01T00:00:00Z","mac":"x"}}`))
	f.Add(uint8(3), []byte(`{"user":{"id":"U1"},"auth":{"at":"9999-12-31T23:59:59Z","mac":""}}`))
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		c := cases[int(which)%len(cases)]
		r := c.fresh()
		if err := json.Unmarshal(raw, r); err != nil {
			return // Temporal refuses the update before any handler runs
		}
		err := Verify(key, wf, c.update, r, now.Add(time.Minute))
		if err != nil {
			if !errors.Is(err, ErrUnsigned) && !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrStaleSignature) {
				t.Fatalf("Verify refused with an unexpected error: %v", err)
			}
			return
		}
		got := r.signedFields()
		if !slices.ContainsFunc(signed[c.update], func(want []string) bool { return slices.Equal(got, want) }) {
			t.Fatalf("a request the bot never signed verified: %q (signed: %q)", got, signed[c.update])
		}
		// The same signature must not verify for another session or update.
		if Verify(key, wf+"x", c.update, r, now) == nil || Verify(key, wf, c.update+"x", r, now) == nil {
			t.Fatal("the signature verified for another session or update")
		}
	})
}
