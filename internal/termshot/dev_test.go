package termshot

import (
	"bytes"
	"context"
	"image/png"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildDev builds cmd/dev as a newcomer runs it (`go run ./cmd/dev`): the
// real binary, not this test's code.
func buildDev(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command builds cmd/dev for this test: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "sandbot-dev")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/sandbot/sandbot/cmd/dev").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/dev: %v\n%s", err, out)
	}
	return bin
}

// TestDevFullScreenEndToEnd runs cmd/dev -demo in a pseudo-terminal, the
// way a newcomer first meets sandbot: the full-screen app opens with the
// dev banner inside it, a typed task asks for approval in the approval
// bar, the bar's key approves it, the answer and "Done" appear, a second
// task brings the bar back; its call opens in the details view (Tab,
// Enter), the session is in the picker (Ctrl-S), and Ctrl-C leaves with
// status 0 and the banner printed on the normal screen. The screen at the second approval
// is the README's screenshot; it is rendered here too.
func TestDevFullScreenEndToEnd(t *testing.T) {
	bin := buildDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	term, err := StartDev(ctx, bin, t.TempDir(), 100, 30)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if err := Demo(ctx, term); err != nil {
		t.Fatalf("%v\nlast output: %q", err, tailOf(term.Output(), 2000))
	}
	s := term.Screen()
	// The first turn stays in the transcript above the second's bar: its
	// call line with status and exit code, and the answer quoting the
	// output (wc -c counts 23 bytes).
	for _, want := range []string{"✅ echo 'hello from the sandbox' > hello.txt && wc -c hello.txt", "23 hello.txt", "can approve:", "expires in"} {
		if !strings.Contains(s, want) {
			t.Errorf("screen lacks %q:\n%s", want, s)
		}
	}
	for i, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "\x1b") {
			t.Errorf("row %d holds a raw escape: %q", i, l)
		}
	}
	img, err := Render(term.Snapshot(), RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}

	// Approve the second task, inspect its tool call, then find the
	// session in the picker: what a newcomer does next, from the hints on
	// screen.
	steps := []struct {
		what, keys string
		cond       func(string) bool
	}{
		{"the second answer", "y", func(s string) bool {
			return strings.Contains(s, "mkdir -p notes && mv hello.txt notes/ && ls -l notes · ") && strings.Contains(s, "exit 0") && !strings.Contains(s, "Approval needed")
		}},
		{"the tool-call picker", "\t", all("pick a tool call")},
		{"the details view", "\r", all("Tool call 1 of 1: shell (completed)", "Command 1:", "Output:", "hello.txt", "Esc back")},
		{"the tool-call picker again", "\x1b", all("pick a tool call")},
		{"the input line again", "\x1b", all("Type a task")},
		{"the session picker", "\x13", all("Sessions", "+ New session", "default ", "2 turns", "idle")},
		{"the conversation again", "\x1b", all("Type a task", "session default")},
	}
	for _, st := range steps {
		if err := term.Type(st.keys); err != nil {
			t.Fatal(err)
		}
		if err := term.WaitFor(ctx, st.what, st.cond); err != nil {
			t.Fatal(err)
		}
	}

	if err := term.Type("\x03"); err != nil {
		t.Fatal(err)
	}
	if err := term.Wait(ctx); err != nil {
		t.Fatalf("Ctrl-C: dev exited with %v\n%s", err, term.Screen())
	}
	after := term.Screen()
	if !strings.Contains(after, "sandbot dev") || !strings.Contains(after, "sandbot-dev.log") {
		t.Errorf("the banner is not on the screen after exit:\n%s", after)
	}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
