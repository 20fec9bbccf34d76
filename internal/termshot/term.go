// Package termshot runs a program in a pseudo-terminal and reads its
// screen through a terminal emulator, as a person at a terminal would see
// it: the end-to-end test of the full-screen app types into cmd/dev and
// waits for what the screen shows, and cmd/termshot draws the same screen
// as the README's screenshot (Render).
//
// The emulator is github.com/charmbracelet/x/vt, a VT/xterm emulator: it
// applies cursor moves, erases, the alternate screen and colours, so what
// Screen returns is the screen, not a stream of escape sequences. It also
// answers the program's terminal queries (cursor position, device
// attributes) back through the pseudo-terminal, as a real terminal does.
package termshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// Term is a program running in a pseudo-terminal of a fixed size, with
// the emulated screen it draws. Its methods may be called from any
// goroutine.
type Term struct {
	cmd  *exec.Cmd
	pty  *os.File
	cols int
	rows int

	// screenMu makes each write to the emulator and each snapshot whole:
	// a snapshot never shows half of an update.
	screenMu sync.Mutex
	emu      *vt.Emulator

	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) on every screen update
	exited  chan struct{} // closed when the program has exited
	waitErr error
	tail    []byte // the last bytes the program wrote, for failure reports
}

// Start runs cmd in a new pseudo-terminal of cols×rows cells. cmd's
// standard streams must be unset: they become the terminal.
func Start(cmd *exec.Cmd, cols, rows int) (*Term, error) {
	if cols < 1 || rows < 1 {
		return nil, fmt.Errorf("termshot: terminal size %dx%d: both must be at least 1", cols, rows)
	}
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		return nil, fmt.Errorf("termshot: start %s in a pseudo-terminal: %w", cmd.Path, err)
	}
	t := &Term{cmd: cmd, pty: f, emu: vt.NewEmulator(cols, rows), cols: cols, rows: rows,
		changed: make(chan struct{}), exited: make(chan struct{})}
	// The emulator's answers to the program's queries go back as input.
	go func() { _, _ = io.Copy(f, t.emu) }()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				t.screenMu.Lock()
				_, _ = t.emu.Write(buf[:n])
				t.screenMu.Unlock()
				t.mu.Lock()
				t.tail = append(t.tail, buf[:n]...)
				if len(t.tail) > 64<<10 {
					t.tail = t.tail[len(t.tail)-64<<10:]
				}
				close(t.changed)
				t.changed = make(chan struct{})
				t.mu.Unlock()
			}
			if err != nil {
				return // EIO once the program and its children have closed the terminal
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		<-readDone // everything it wrote is on the screen before Exited says so
		t.mu.Lock()
		t.waitErr = err
		t.mu.Unlock()
		close(t.exited)
	}()
	return t, nil
}

// Size is the terminal's width and height in cells.
func (t *Term) Size() (cols, rows int) { return t.cols, t.rows }

// Type writes s to the terminal as typed keys: "\r" is Enter, "\x03"
// Ctrl-C, "\x1b" Escape.
func (t *Term) Type(s string) error {
	if _, err := io.WriteString(t.pty, s); err != nil {
		return fmt.Errorf("termshot: type %q: %w", s, err)
	}
	return nil
}

// Screen is the visible screen as text: one line per row, trailing
// spaces trimmed, no styling.
func (t *Term) Screen() string { return ScreenText(t.Snapshot()) }

// Snapshot is the visible screen, cell by cell, with colours.
func (t *Term) Snapshot() Snapshot {
	t.screenMu.Lock()
	defer t.screenMu.Unlock()
	return snapshot(t.emu, t.cols, t.rows)
}

// ErrExited is returned by WaitFor when the program exits before the
// screen shows what was awaited.
var ErrExited = errors.New("termshot: the program exited")

// WaitFor returns when cond holds for the screen, checking after every
// update. It fails when ctx ends or the program exits first; the error
// names what was awaited and holds the screen at that moment.
func (t *Term) WaitFor(ctx context.Context, what string, cond func(screen string) bool) error {
	for {
		t.mu.Lock()
		ch := t.changed
		t.mu.Unlock()
		s := t.Screen()
		if cond(s) {
			return nil
		}
		select {
		case <-ch:
		case <-t.exited:
			if s := t.Screen(); cond(s) {
				return nil
			}
			return fmt.Errorf("%w while waiting for %s (%v); screen:\n%s", ErrExited, what, t.exitErr(), t.Screen())
		case <-ctx.Done():
			return fmt.Errorf("termshot: waiting for %s: %w; screen:\n%s", what, ctx.Err(), t.Screen())
		}
	}
}

// Wait waits for the program to exit and returns its exit error (nil for
// status 0), or ctx's error.
func (t *Term) Wait(ctx context.Context) error {
	select {
	case <-t.exited:
		return t.exitErr()
	case <-ctx.Done():
		return fmt.Errorf("termshot: waiting for %s to exit: %w", t.cmd.Path, ctx.Err())
	}
}

func (t *Term) exitErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waitErr
}

// Output is the last 64 KiB the program wrote, escape sequences and all,
// for a failure report.
func (t *Term) Output() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.tail, []byte("?")))
}

// Close kills the program if it is still running (its whole process
// group: the session the pseudo-terminal started) and releases the
// terminal.
func (t *Term) Close() error {
	select {
	case <-t.exited:
	default:
		if p := t.cmd.Process; p != nil {
			_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		}
		<-t.exited
	}
	closeReplies(t.emu)
	return t.pty.Close()
}

// ScreenText is a snapshot as text, as Term.Screen returns it.
func ScreenText(s Snapshot) string {
	var b strings.Builder
	for y := range s.Rows {
		var line strings.Builder
		for x := range s.Cols {
			c := s.At(x, y)
			if c.Width == 0 { // the second half of a wide character
				continue
			}
			if c.Text == "" {
				line.WriteByte(' ')
			} else {
				line.WriteString(c.Text)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		if y < s.Rows-1 {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
