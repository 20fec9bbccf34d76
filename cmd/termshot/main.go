// Command termshot renders a terminal screen to a PNG, in Go Mono. It
// makes the README's screenshot of the full-screen app (docs/tui.png):
//
//	go build -o /tmp/sandbot-dev ./cmd/dev
//	go run ./cmd/termshot -dev /tmp/sandbot-dev -o docs/tui.png
//
// runs that binary with -demo in a 100×30 pseudo-terminal, in a throwaway
// data directory on free ports, plays the scene of the end-to-end test
// (internal/termshot: a task, its approval, the answer, a second task
// waiting for approval) and draws the screen at the end. It also renders
// a capture made by hand:
//
//	tmux capture-pane -e -p -t SESSION > screen.ans
//	go run ./cmd/termshot -ansi screen.ans -cols 100 -rows 30 -o shot.png
//
// -txt writes the same screen as plain text beside the image.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"io"
	"net"
	"os"
	"os/signal"
	"time"

	"github.com/sandbot/sandbot/internal/termshot"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "termshot:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("termshot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dev := fs.String("dev", "", "a cmd/dev binary: run its -demo scene in a pseudo-terminal and shoot the screen")
	capture := fs.String("ansi", "", "a screen capture with colour sequences (tmux capture-pane -e -p) to render")
	out := fs.String("o", "", "the PNG to write (required)")
	txt := fs.String("txt", "", "also write the screen as plain text to this file")
	cols := fs.Int("cols", 100, "terminal width in cells")
	rows := fs.Int("rows", 30, "terminal height in cells")
	size := fs.Float64("size", 16, "font size in pixels")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long the -dev scene may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || (*dev == "") == (*capture == "") {
		return errors.New("give -o FILE.png and exactly one of -dev BINARY or -ansi FILE")
	}
	var snap termshot.Snapshot
	if *capture != "" {
		data, err := os.ReadFile(*capture)
		if err != nil {
			return err
		}
		if snap, err = termshot.FromANSI(data, *cols, *rows); err != nil {
			return err
		}
	} else {
		var err error
		if snap, err = shootDev(ctx, *dev, *cols, *rows, *timeout); err != nil {
			return err
		}
	}
	img, err := termshot.Render(snap, termshot.RenderOptions{Size: *size})
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", *out, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if *txt != "" {
		if err := os.WriteFile(*txt, []byte(termshot.ScreenText(snap)+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// shootDev plays the demo scene on a fresh dev app and returns the screen.
func shootDev(ctx context.Context, binary string, cols, rows int, timeout time.Duration) (termshot.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	data, err := os.MkdirTemp("", "termshot-dev-")
	if err != nil {
		return termshot.Snapshot{}, err
	}
	defer os.RemoveAll(data)
	// The Temporal UI is on, as in a plain `go run ./cmd/dev`, so the
	// status bar links to it; it takes a free port.
	uiPort, err := freePort()
	if err != nil {
		return termshot.Snapshot{}, err
	}
	term, err := termshot.StartDev(ctx, binary, data, cols, rows, fmt.Sprintf("SANDBOT_DEV_UI_PORT=%d", uiPort))
	if err != nil {
		return termshot.Snapshot{}, err
	}
	defer term.Close()
	if err := termshot.Demo(ctx, term); err != nil {
		return termshot.Snapshot{}, err
	}
	snap := term.Snapshot()
	_ = term.Type("\x03")
	_ = term.Wait(ctx)
	return snap, nil
}

// freePort is a TCP port nothing listens on just now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
