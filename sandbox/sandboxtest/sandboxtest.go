// Package sandboxtest is the conformance kit for sandbox backends, in the
// spirit of testing/slogtest: every backend's tests call Run with a
// factory, and the kit checks the behaviour the session workflow relies on
// (exit codes, timeouts that kill whole process trees, bounded output,
// persistent workspaces, snapshot round trips, safe import, idempotent
// destroy).
//
// Commands use only POSIX sh and tools busybox also has, so the same kit
// runs against a local directory, a container or a remote VM.
package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sandbot/sandbot/sandbox"
)

// opTimeout bounds every backend call, so a backend that hangs fails the
// test instead of stalling the run.
const opTimeout = 2 * time.Minute

// Run runs the conformance suite. newBackend is called once per subtest;
// the kit creates and destroys its own sandboxes on what it returns.
func Run(t *testing.T, newBackend func(t *testing.T) sandbox.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b sandbox.Backend)
	}{
		{"ExitCodes", testExitCodes},
		{"StdoutStderrSeparate", testStreams},
		{"FreshWorkspaceIsEmpty", testFreshEmpty},
		{"WorkspacePersists", testPersists},
		{"CwdIsWorkspaceRoot", testCwd},
		{"SandboxesAreIsolated", testIsolated},
		{"Timeout", testTimeout},
		{"TimeoutKillsBackgroundChildren", testTimeoutKillsChildren},
		{"CancelKills", testCancel},
		{"OutputCap", testOutputCap},
		{"InvalidUTF8", testInvalidUTF8},
		{"ExportImportRoundTrip", testRoundTrip},
		{"ImportReplacesWorkspace", testImportReplaces},
		{"ImportRejectsUnsafe", testImportUnsafe},
		{"DestroyIdempotent", testDestroy},
		{"Fingerprint", testFingerprint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newBackend(t))
		})
	}
}

var sessionSeq atomic.Int64

// NewSandbox creates a sandbox for a unique session and destroys it when
// the test ends.
func NewSandbox(t testing.TB, b sandbox.Backend) sandbox.Handle {
	t.Helper()
	id := fmt.Sprintf("sandboxtest/%s/%d", t.Name(), sessionSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	h, err := b.Create(ctx, sandbox.Spec{SessionID: id, Labels: map[string]string{"test": "sandboxtest"}})
	if err != nil {
		t.Fatalf("Create(%q): %v", id, err)
	}
	if h.Backend != b.Name() {
		t.Errorf("Create: handle backend %q, want %q", h.Backend, b.Name())
	}
	if h.SessionID != id {
		t.Errorf("Create: handle session %q, want %q", h.SessionID, id)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := b.Destroy(ctx, h); err != nil {
			t.Errorf("cleanup: Destroy: %v", err)
		}
	})
	return h
}

// Exec runs a command and fails the test if it cannot be run.
func Exec(t testing.TB, b sandbox.Backend, h sandbox.Handle, c sandbox.Cmd) sandbox.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := b.Exec(ctx, h, c)
	if err != nil {
		t.Fatalf("Exec(%q): %v", c.Command, err)
	}
	return res
}

// Sh runs a command that must succeed and returns its stdout.
func Sh(t testing.TB, b sandbox.Backend, h sandbox.Handle, command string) string {
	t.Helper()
	res := Exec(t, b, h, sandbox.Cmd{Command: command})
	if res.ExitCode != 0 {
		t.Fatalf("Exec(%q): exit %d, stderr %q", command, res.ExitCode, res.Stderr)
	}
	return res.Stdout
}

func testExitCodes(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	for _, tc := range []struct {
		cmd  string
		want int
	}{{"true", 0}, {"exit 3", 3}, {"false", 1}, {"exit 0", 0}} {
		if res := Exec(t, b, h, sandbox.Cmd{Command: tc.cmd}); res.ExitCode != tc.want {
			t.Errorf("%q: exit code %d, want %d", tc.cmd, res.ExitCode, tc.want)
		}
	}
}

func testStreams(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	res := Exec(t, b, h, sandbox.Cmd{Command: "echo out; echo err >&2; exit 2"})
	if res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 2 {
		t.Errorf("got stdout %q stderr %q exit %d; want \"out\\n\", \"err\\n\", 2", res.Stdout, res.Stderr, res.ExitCode)
	}
	if res.Truncated || res.TimedOut || res.Binary {
		t.Errorf("flags set on a small clean command: %+v", res)
	}
}

func testFreshEmpty(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	if entries := exportEntries(t, b, h); len(entries) != 0 {
		t.Errorf("fresh workspace exports %d entries, want none: %v", len(entries), entries)
	}
	if out := Sh(t, b, h, "ls -A"); out != "" {
		t.Errorf("fresh workspace lists %q, want nothing", out)
	}
}

func testPersists(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	Sh(t, b, h, "mkdir -p sub && echo hello > sub/f.txt")
	if got := Sh(t, b, h, "cat sub/f.txt"); got != "hello\n" {
		t.Errorf("second Exec reads %q, want \"hello\\n\"", got)
	}
}

func testCwd(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	Sh(t, b, h, "echo probe > probe.txt")
	entries := exportEntries(t, b, h)
	if _, ok := entries["probe.txt"]; !ok || len(entries) != 1 {
		t.Errorf("a file written in the command's cwd exports as %v, want just probe.txt at the root", entries)
	}
	if h.Workdir != "" {
		got := Sh(t, b, h, fmt.Sprintf(`[ "$(pwd -P)" = "$(cd '%s' && pwd -P)" ] && echo same`, h.Workdir))
		if got != "same\n" {
			t.Errorf("cwd is not handle Workdir %q", h.Workdir)
		}
	}
}

func testIsolated(t *testing.T, b sandbox.Backend) {
	h1, h2 := NewSandbox(t, b), NewSandbox(t, b)
	Sh(t, b, h1, "echo one > mine.txt")
	if got := Sh(t, b, h2, "ls -A"); got != "" {
		t.Errorf("second sandbox sees %q from the first", got)
	}
}

func testTimeout(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	res := Exec(t, b, h, sandbox.Cmd{Command: "echo before; sleep 30; echo after", Timeout: 500 * time.Millisecond})
	if !res.TimedOut {
		t.Errorf("TimedOut is false: %+v", res)
	}
	if !strings.Contains(res.Stdout, "before") {
		t.Errorf("output printed before the timeout was lost: stdout %q", res.Stdout)
	}
	if strings.Contains(res.Stdout, "after") {
		t.Errorf("the command ran past its timeout: stdout %q", res.Stdout)
	}
	if res.ExitCode == 0 {
		t.Errorf("a killed command reports exit code 0")
	}
}

// pidGone waits (inside the sandbox, up to about 20 s) until the process
// whose PID is in the file pidfile no longer exists, treating a zombie as
// gone, and prints "gone" or "alive".
func pidGone(pidfile string) string {
	return `pid=$(cat ` + pidfile + `)
i=0
while [ $i -lt 400 ]; do
	if ! kill -0 "$pid" 2>/dev/null; then echo gone; exit 0; fi
	case "$(cat /proc/$pid/stat 2>/dev/null)" in *") Z "*) echo gone; exit 0;; esac
	sleep 0.05
	i=$((i+1))
done
echo alive`
}

func testTimeoutKillsChildren(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	res := Exec(t, b, h, sandbox.Cmd{
		Command: "sleep 100 & echo $! > bg.pid; sleep 100",
		Timeout: 500 * time.Millisecond,
	})
	if !res.TimedOut {
		t.Fatalf("TimedOut is false: %+v", res)
	}
	if got := Sh(t, b, h, pidGone("bg.pid")); got != "gone\n" {
		t.Errorf("background child of a timed-out command is still running (%q)", got)
	}
}

func testCancel(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := b.Exec(ctx, h, sandbox.Cmd{
			Command: "echo partial; echo started > started.flag; sleep 30; echo never",
			Timeout: time.Minute,
		})
		done <- outcome{res, err}
	}()
	waitFor(t, "the command to start", func() bool {
		return Exec(t, b, h, sandbox.Cmd{Command: "cat started.flag 2>/dev/null"}).Stdout == "started\n"
	})
	cancel()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(opTimeout):
		t.Fatal("Exec did not return after its context was canceled")
	}
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("Exec after cancel: error %v, want one wrapping context.Canceled", o.err)
	}
	if !strings.Contains(o.res.Stdout, "partial") || strings.Contains(o.res.Stdout, "never") {
		t.Errorf("canceled command stdout %q: want the partial output and not the rest", o.res.Stdout)
	}
}

func testOutputCap(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	const limit = 64 << 10
	const outBytes, errBytes = 50 << 20, 10 << 20
	res := Exec(t, b, h, sandbox.Cmd{
		Command:   fmt.Sprintf("yes | head -c %d; yes e | head -c %d >&2", outBytes, errBytes),
		OutputCap: limit,
	})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %.200q", res.ExitCode, res.Stderr)
	}
	if len(res.Stdout) > limit || len(res.Stderr) > limit {
		t.Errorf("kept %d stdout and %d stderr bytes, cap is %d each", len(res.Stdout), len(res.Stderr), limit)
	}
	if !res.Truncated {
		t.Error("Truncated is false")
	}
	if least := int64(outBytes + errBytes - 2*limit); res.DroppedBytes < least {
		t.Errorf("DroppedBytes = %d, want at least %d", res.DroppedBytes, least)
	}
	if !strings.HasPrefix(res.Stdout, "y\ny\n") || !strings.HasSuffix(res.Stdout, "y\ny\n") {
		t.Errorf("stdout should keep the start and the end: %.40q ... %.40q", res.Stdout, res.Stdout[max(0, len(res.Stdout)-40):])
	}
	if !strings.HasPrefix(res.Stderr, "e\n") || !strings.HasSuffix(res.Stderr, "e\n") {
		t.Errorf("stderr should keep the start and the end")
	}
}

func testInvalidUTF8(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	res := Exec(t, b, h, sandbox.Cmd{Command: `printf 'ok\377\376 \000 end'; printf '\300err' >&2`})
	for name, s := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr} {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
			t.Errorf("%s %q is not valid UTF-8 without NULs", name, s)
		}
	}
	if !strings.HasPrefix(res.Stdout, "ok") || !strings.HasSuffix(res.Stdout, " end") || !strings.HasSuffix(res.Stderr, "err") {
		t.Errorf("valid parts lost: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if !res.Binary {
		t.Error("Binary is false for output with invalid bytes")
	}
}

func testDestroy(t *testing.T, b sandbox.Backend) {
	h := NewSandbox(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if alive, err := b.Alive(ctx, h); err != nil || !alive {
		t.Fatalf("Alive before Destroy = %v, %v; want true", alive, err)
	}
	for i := range 2 {
		if err := b.Destroy(ctx, h); err != nil {
			t.Fatalf("Destroy #%d: %v", i+1, err)
		}
	}
	if alive, err := b.Alive(ctx, h); err != nil || alive {
		t.Errorf("Alive after Destroy = %v, %v; want false, nil", alive, err)
	}
	if _, err := b.Exec(ctx, h, sandbox.Cmd{Command: "true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Exec after Destroy: %v, want an error wrapping sandbox.ErrNotFound", err)
	}
}

func testFingerprint(t *testing.T, b sandbox.Backend) {
	fp, ok := b.(sandbox.Fingerprinter)
	if !ok {
		t.Skipf("%s does not implement sandbox.Fingerprinter", b.Name())
	}
	h := NewSandbox(t, b)
	Sh(t, b, h, "mkdir d && printf a > d/f")
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// Fingerprints of just-written files may be deliberately unstable for
	// a moment (racy timestamps); wait until it settles.
	var stable string
	waitFor(t, "the fingerprint to settle", func() bool {
		first, err := fp.Fingerprint(ctx, h)
		if err != nil {
			t.Fatalf("Fingerprint: %v", err)
		}
		second, err := fp.Fingerprint(ctx, h)
		if err != nil {
			t.Fatalf("Fingerprint: %v", err)
		}
		stable = first
		return first == second && first != ""
	})
	Sh(t, b, h, "printf b > d/f")
	changed, err := fp.Fingerprint(ctx, h)
	if err != nil {
		t.Fatalf("Fingerprint: %v", err)
	}
	if changed == stable {
		t.Error("fingerprint unchanged after rewriting a file with different content of the same size")
	}
}

// waitFor polls cond until it holds, failing the test after a generous
// deadline. Conditions, not sleeps, keep the kit free of timing guesses.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
