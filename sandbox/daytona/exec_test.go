package daytona_test

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	fakedaytona "github.com/sandbot/sandbot/internal/fake/daytona"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/daytona"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

func TestOutputFloodIsCappedInTheSandbox(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(t, b)
	const flood = 50 << 20
	const limit = 16 << 10
	from := len(srv.Calls())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "yes | head -c 52428800; echo err >&2", OutputCap: limit})
	runtime.ReadMemStats(&after)
	if res.ExitCode != 0 || !res.Truncated || len(res.Stdout) > limit || res.Stderr != "err\n" {
		t.Fatalf("exit %d truncated %v stdout %d bytes stderr %q", res.ExitCode, res.Truncated, len(res.Stdout), res.Stderr)
	}
	kept := int64(len(res.Stdout) - len(sandbox.TruncationMarker))
	if res.DroppedBytes != flood-kept {
		t.Errorf("DroppedBytes = %d, want %d (50 MiB less the %d kept)", res.DroppedBytes, flood-kept, kept)
	}
	if !strings.HasPrefix(res.Stdout, "y\ny\n") || !strings.HasSuffix(res.Stdout, "y\ny\n") || !strings.Contains(res.Stdout, sandbox.TruncationMarker) {
		t.Errorf("stdout lost its head, tail or marker: %.20q ... %.20q", res.Stdout, res.Stdout[len(res.Stdout)-20:])
	}
	// The whole process (client and fake) allocated far less than the
	// flood: only the capped head and tail crossed the wire.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("Exec allocated %d bytes for a 50 MiB flood", alloc)
	}
	var downloads []string
	for _, c := range srv.Calls()[from:] {
		if strings.HasSuffix(c.Path, "/files/download") {
			downloads = append(downloads, c.Query)
		}
	}
	// The three are fetched concurrently, so in any order.
	has := func(suffix string) bool {
		return slices.ContainsFunc(downloads, func(q string) bool { return strings.HasSuffix(q, suffix) })
	}
	if len(downloads) != 3 || !has(".out.h") || !has(".out.t") || !has(".err") {
		t.Errorf("downloads %q: want the head and tail of stdout, and stderr whole", downloads)
	}
	if left, _ := os.ReadDir(filepath.Join(srv.Sandboxes()[0].Dir, "tmp")); len(left) != 0 {
		t.Errorf("temporary files left in the sandbox's /tmp: %v", left)
	}
}

func TestTimeoutKillsBackgroundChildren(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(t, b)
	start := time.Now()
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{
		Command: "(sleep 300; echo late > late.txt) & echo $! > bg.pid; setsid sleep 300 & echo $! > bg2.pid; echo started; sleep 300",
		Timeout: 300 * time.Millisecond,
	})
	if !res.TimedOut || res.ExitCode != 137 || res.Stdout != "started\n" {
		t.Fatalf("result %+v: want a timeout with exit 137 and the output so far", res)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("Exec took %s after a 300 ms timeout", d)
	}
	// The subshell is in the command's group and dies; a child that ran
	// setsid itself escapes the group kill, as documented.
	out := sandboxtest.Sh(t, b, h, `pid=$(cat bg.pid); i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
kill -0 "$pid" 2>/dev/null && echo alive || echo gone`)
	if out != "gone\n" {
		t.Errorf("background child of a timed-out command: %q", out)
	}
	sandboxtest.Sh(t, b, h, `kill "$(cat bg2.pid)" 2>/dev/null; true`)
}
