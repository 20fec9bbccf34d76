package sandbox_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/sandbot/sandbot/redact"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/local"
)

const (
	leaked     = "sk-live-DO-NOT-LEAK-4242-abcdef"
	leakedName = "SANDBOT_MODEL_API_KEY"
)

var secrets = redact.New(redact.Secret{Name: leakedName, Value: leaked})

// holds reports whether s holds the secret in any form the redactor knows
// (plain, base64 at any alignment, hex, URL-encoded).
func holds(s string) bool { return secrets.Redact(s) != s }

// leakyBackend is the local backend whose failures quote the secret, as a
// backend error might quote a URL or a daemon's answer.
type leakyBackend struct {
	*local.Backend
	failCreate bool
	failExec   error
}

func (b *leakyBackend) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Handle, error) {
	if b.failCreate {
		return sandbox.Handle{}, fmt.Errorf("daemon at https://u:%s@docker.test refused: %w", leaked, sandbox.ErrUnavailable)
	}
	return b.Backend.Create(ctx, spec)
}

func (b *leakyBackend) Exec(ctx context.Context, h sandbox.Handle, cmd sandbox.Cmd) (sandbox.Result, error) {
	if b.failExec != nil && strings.HasPrefix(cmd.Command, "fail") {
		return sandbox.Result{Stdout: "partial " + leaked}, b.failExec
	}
	return b.Backend.Exec(ctx, h, cmd)
}

func newLeakyFixture(t *testing.T, b *leakyBackend) *fixture {
	t.Helper()
	f := newFixture(t)
	b.Backend = f.local
	backends, err := sandbox.NewBackends(b)
	if err != nil {
		t.Fatal(err)
	}
	f.acts.Backends = backends
	f.acts.Redactor = secrets
	return f
}

// TestExecRedactsSecrets is the attack: commands print the worker's secret
// plainly, base64-encoded, URL-encoded and on stderr. Nothing of it may come
// back in the result or in the heartbeat details (which Temporal stores and
// hands to the workflow when a worker dies).
func TestExecRedactsSecrets(t *testing.T) {
	f := newLeakyFixture(t, &leakyBackend{})
	var mu sync.Mutex
	var beats []string
	f.env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p sandbox.ExecProgress
		if details.HasValues() && details.Get(&p) == nil {
			mu.Lock()
			beats = append(beats, fmt.Sprint(p))
			mu.Unlock()
		}
	})
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	// The commands hold the secret only in pieces, as a command that read
	// it from somewhere would: the output is what must be scrubbed.
	half := len(leaked) / 2
	glue := fmt.Sprintf("printf %%s%%s '%s' '%s'", leaked[:half], leaked[half:])
	req := sandbox.ExecRequest{Handle: h, CallID: "c", Commands: []string{
		glue,
		glue + " | base64",
		glue + " >&2",
		"printf %s '" + url.QueryEscape(leaked[:half]) + "' '" + url.QueryEscape(leaked[half:]) + "'",
		"echo clean",
		// Outlasts the heartbeat interval (at most HeartbeatEvery; the
		// first beat goes out one interval after the start), so a beat
		// carries the scrubbed results above.
		fmt.Sprintf("sleep %.1f", (sandbox.HeartbeatEvery + 500*time.Millisecond).Seconds()),
	}}
	res, err := run[sandbox.ExecResult](f.env, f.acts.Exec, req)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	for i, r := range res.Results {
		if holds(r.Stdout) || holds(r.Stderr) || holds(r.Error) {
			t.Errorf("result %d leaks the secret: %+v", i, r)
		}
	}
	if r := res.Results[0]; r.Stdout != redact.Marker(leakedName) {
		t.Errorf("plain: stdout %q, want the marker", r.Stdout)
	}
	if r := res.Results[1]; !strings.Contains(r.Stdout, redact.Marker(leakedName)) {
		t.Errorf("base64: stdout %q, want the marker", r.Stdout)
	}
	if r := res.Results[2]; r.Stderr != redact.Marker(leakedName) {
		t.Errorf("stderr %q, want the marker", r.Stderr)
	}
	if r := res.Results[4]; r.Stdout != "clean\n" {
		t.Errorf("clean output changed: %q", r.Stdout)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(beats) == 0 {
		t.Fatal("no heartbeat recorded")
	}
	for _, b := range beats {
		if holds(b) || strings.Contains(b, base64.StdEncoding.EncodeToString([]byte(leaked))) {
			t.Errorf("heartbeat details leak the secret: %s", b)
		}
	}
}

// A backend error quoting the secret: the first command's (nothing ran, the
// activity fails, keeping its type) and a later command's (its Error text).
func TestExecRedactsBackendErrors(t *testing.T) {
	b := &leakyBackend{failExec: fmt.Errorf("container said %s: %w", leaked, sandbox.ErrUnavailable)}
	f := newLeakyFixture(t, b)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle

	_, err := run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h, CallID: "c1", Commands: []string{"fail now"}})
	ae := appErr(t, err, sandbox.ErrTypeUnavailable)
	if holds(err.Error()) || !strings.Contains(ae.Message(), redact.Marker(leakedName)) {
		t.Errorf("first-command error %q leaks or lost its marker", err)
	}

	res, err := run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h, CallID: "c2", Commands: []string{"true", "fail later"}})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	r := res.Results[1]
	if holds(r.Error) || holds(r.Stdout) || !strings.Contains(r.Error, "could not run") {
		t.Errorf("later command's error leaks: %+v", r)
	}
}

func TestEnsureRedactsErrorsAndKeepsTheirType(t *testing.T) {
	f := newLeakyFixture(t, &leakyBackend{failCreate: true})
	_, err := run[sandbox.EnsureResult](f.env, f.acts.Ensure, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name})
	appErr(t, err, sandbox.ErrTypeUnavailable)
	if holds(err.Error()) {
		t.Errorf("Ensure error leaks: %v", err)
	}
}

type fakeRedactor struct{}

func (fakeRedactor) Redact(s string) string { return strings.ReplaceAll(s, "SECRET", "[x]") }

func TestRedactError(t *testing.T) {
	r := fakeRedactor{}
	if got := sandbox.RedactError(r, nil); got != nil {
		t.Errorf("nil error became %v", got)
	}
	clean := errors.New("nothing to hide")
	if got := sandbox.RedactError(r, clean); got != clean {
		t.Errorf("an error without secrets must pass unchanged, got %v", got)
	}
	if got := sandbox.RedactError(nil, errors.New("SECRET")); got.Error() != "SECRET" {
		t.Errorf("a nil redactor changed the error")
	}

	app := temporal.NewApplicationErrorWithOptions("bad SECRET", "SomeType", temporal.ApplicationErrorOptions{
		NonRetryable: true, NextRetryDelay: 3 * time.Second, Cause: errors.New("cause SECRET"),
	})
	var ae *temporal.ApplicationError
	got := sandbox.RedactError(r, app)
	if !errors.As(got, &ae) || got != error(ae) {
		t.Fatalf("ApplicationError became %T", got)
	}
	if ae.Message() != "bad [x]" || ae.Type() != "SomeType" || !ae.NonRetryable() || ae.NextRetryDelay() != 3*time.Second ||
		ae.Unwrap() == nil || ae.Unwrap().Error() != "cause [x]" {
		t.Errorf("ApplicationError rebuilt wrongly: %v (delay %s)", ae, ae.NextRetryDelay())
	}

	// A secret only in the cause, behind an error whose text hides it.
	hidden := &opaque{cause: fmt.Errorf("inner SECRET: %w", sandbox.ErrNotFound)}
	got = sandbox.RedactError(r, hidden)
	for e := got; e != nil; e = errors.Unwrap(e) {
		if strings.Contains(e.Error(), "SECRET") {
			t.Errorf("chain still holds the secret: %q", e.Error())
		}
	}
	if !errors.Is(got, sandbox.ErrNotFound) {
		t.Error("the scrubbed error no longer matches its sentinel")
	}

	canceled := temporal.NewCanceledError("details")
	if got := sandbox.RedactError(r, canceled); got != canceled {
		t.Errorf("a cancellation must pass unchanged, got %v", got)
	}
}

// opaque is an error whose text does not include its cause's.
type opaque struct{ cause error }

func (e *opaque) Error() string { return "opaque" }
func (e *opaque) Unwrap() error { return e.cause }

// TestExecRedactsSecretsCutByTheOutputCap is the attack on the output cap:
// output long enough to be cut, with the secret placed so the cut falls
// inside it, at every offset. Each half alone is no longer the secret, so
// plain redaction misses both; no piece of 8 bytes of it may come back.
func TestExecRedactsSecretsCutByTheOutputCap(t *testing.T) {
	f := newLeakyFixture(t, &leakyBackend{})
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	const limit = 1000
	half := len(leaked) / 2
	secret := fmt.Sprintf("printf %%s%%s '%s' '%s'", leaked[:half], leaked[half:])
	var cmds []string
	// The head cut: about (limit - len(marker)) / 2 bytes in.
	headCut := (limit - len(sandbox.TruncationMarker)) / 2
	for off := headCut - len(leaked); off <= headCut; off++ {
		cmds = append(cmds, fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; %s; head -c 5000 /dev/zero | tr '\\0' y", off, secret))
	}
	// The tail cut: the same distance from the end.
	tailCut := limit - len(sandbox.TruncationMarker) - headCut
	for off := tailCut - len(leaked); off <= tailCut; off++ {
		cmds = append(cmds, fmt.Sprintf("head -c 5000 /dev/zero | tr '\\0' x; %s; head -c %d /dev/zero | tr '\\0' y", secret, off))
	}
	res, err := run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h, CallID: "c", Commands: cmds, OutputCap: limit})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	cuts := 0
	for i, r := range res.Results {
		if strings.Contains(r.Stdout, redact.Marker(leakedName)) {
			cuts++
		}
		for k := 0; k+8 <= len(leaked); k++ {
			if piece := leaked[k : k+8]; strings.Contains(r.Stdout, piece) {
				t.Errorf("command %d: output keeps %q of the secret: ...%s...", i, piece, around(r.Stdout, piece))
				break
			}
		}
	}
	if cuts == 0 {
		t.Fatal("no output held the secret's marker: the test did not place the secret at the cut")
	}
}

func around(s, piece string) string {
	i := strings.Index(s, piece)
	return s[max(i-40, 0):min(i+len(piece)+40, len(s))]
}
