package integration

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/internal/devcmd"
)

// syncBuffer is an io.Writer tests can wait on.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{})} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) waitFor(t *testing.T, what string, cond func(string) bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		b.mu.Lock()
		ch := b.changed
		s := b.buf.String()
		b.mu.Unlock()
		if cond(s) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; output:\n%s", what, s)
		}
	}
}

// runDev starts cmd/dev's code path with -demo and returns its terminal.
func runDev(t *testing.T, dataDir string) (in io.WriteCloser, out *syncBuffer, wait func() error) {
	t.Helper()
	t.Setenv("SANDBOT_DEV_DATA_DIR", dataDir)
	t.Setenv("SANDBOT_DEV_TEMPORAL_PORT", "0")
	t.Setenv("SANDBOT_DEV_UI_PORT", "0")
	pr, pw := io.Pipe()
	out = newSyncBuffer()
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { errc <- devcmd.Run(ctx, []string{"-demo"}, pr, out, out) }()
	var once sync.Once
	var err error
	wait = func() error {
		once.Do(func() {
			select {
			case err = <-errc:
			case <-time.After(waitTimeout):
				cancel()
				err = <-errc
			}
			cancel()
		})
		return err
	}
	t.Cleanup(func() { _ = pw.Close(); cancel(); _ = wait() })
	return pw, out, wait
}

func TestDevCommandEndToEndAndRestart(t *testing.T) {
	data := t.TempDir()

	in, out, wait := runDev(t, data)
	out.waitFor(t, "the console prompt", func(s string) bool { return strings.Contains(s, "sandbot console") })
	if !strings.Contains(out.String(), "temporal.db") {
		t.Fatalf("cmd/dev must print where its state lives:\n%s", out.String())
	}
	if _, err := io.WriteString(in, "run: echo persisted > note.txt\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "an approval prompt", func(s string) bool {
		return strings.Contains(s, "echo persisted > note.txt") && strings.Contains(strings.ToLower(s), "approve")
	})
	if _, err := io.WriteString(in, "a\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "the answer quoting the command's result", func(s string) bool { return strings.Contains(s, "exit code: 0") })
	if _, err := io.WriteString(in, "/quit\n"); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatalf("dev exited with %v\n%s", err, out.String())
	}

	// A second start on the same data directory finds the session and its
	// workspace.
	in2, out2, wait2 := runDev(t, data)
	out2.waitFor(t, "the console prompt", func(s string) bool { return strings.Contains(s, "sandbot console") })
	if _, err := io.WriteString(in2, "run: cat note.txt\n"); err != nil {
		t.Fatal(err)
	}
	out2.waitFor(t, "the file from before the restart", func(s string) bool { return strings.Contains(s, "persisted") && strings.Contains(s, "exit code: 0") })
	if _, err := io.WriteString(in2, "/history\n"); err != nil {
		t.Fatal(err)
	}
	out2.waitFor(t, "history from before the restart", func(s string) bool {
		return strings.Count(s, "echo persisted > note.txt") >= 1
	})
	_, _ = io.WriteString(in2, "/quit\n")
	if err := wait2(); err != nil {
		t.Fatalf("second dev run: %v\n%s", err, out2.String())
	}
}
