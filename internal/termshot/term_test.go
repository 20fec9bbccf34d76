package termshot

import (
	"bytes"
	"context"
	"image/color"
	"image/png"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The screen is what the program drew, after cursor moves and erases, and
// typed keys reach the program as input.
func TestTermShowsTheScreenAndTakesKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command("sh", "-c", `printf 'garbage\033[2J\033[3;5Hhello \033[1;31mred\033[0m'; read line; printf '\r\ngot:%s' "$line"`)
	term, err := Start(cmd, 40, 6)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if err := term.WaitFor(ctx, "the greeting", func(s string) bool { return strings.Contains(s, "hello red") }); err != nil {
		t.Fatal(err)
	}
	s := term.Screen()
	lines := strings.Split(s, "\n")
	if len(lines) != 6 || lines[2] != "    hello red" || strings.Contains(s, "garbage") {
		t.Fatalf("screen = %q", s)
	}
	if c := term.Snapshot().At(10, 2); c.Text != "r" || !c.Bold || c.Fg == nil {
		t.Errorf("styled cell = %+v", c)
	}
	if err := term.Type("typed\r"); err != nil {
		t.Fatal(err)
	}
	if err := term.WaitFor(ctx, "the echo", func(s string) bool { return strings.Contains(s, "got:typed") }); err != nil {
		t.Fatal(err)
	}
	if err := term.Wait(ctx); err != nil {
		t.Errorf("exit: %v", err)
	}
	// Waiting on a program that has exited fails at once, with the screen.
	err = term.WaitFor(ctx, "something never drawn", func(s string) bool { return strings.Contains(s, "never") })
	if err == nil || !strings.Contains(err.Error(), "got:typed") {
		t.Errorf("WaitFor after exit = %v", err)
	}
}

// A tmux-style capture replays to the same screen, and renders to a PNG of
// the screen's size with the cells' colours.
func TestCaptureRendersToPNG(t *testing.T) {
	capture := []byte("plain line\n\x1b[44m\x1b[97mwhite on blue\x1b[0m ✅ ok\n")
	snap, err := FromANSI(capture, 30, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := ScreenText(snap); got != "plain line\nwhite on blue ✅ ok\n\n" {
		t.Fatalf("text = %q", got)
	}
	img, err := Render(snap, RenderOptions{Size: 16, Pad: 10})
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	if b.Dx() < 30*8+20 || b.Dy() < 4*16+20 {
		t.Errorf("image %v too small for 30x4 cells", b)
	}
	// The first cell of row 2 has a blue background; row 4 is empty.
	cw := (b.Dx() - 20) / 30
	chh := (b.Dy() - 20) / 4
	if r, g, bl, _ := img.At(10+1, 10+chh+1).RGBA(); !(bl > r && bl > g) {
		t.Errorf("row 2 background is not blue: %v", img.At(10+1, 10+chh+1))
	}
	if got := img.At(10+cw*5, 10+chh*3+chh/2); got != (color.RGBA{0x18, 0x18, 0x1b, 0xff}) {
		t.Errorf("empty row is %v, want the default background", got)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&buf); err != nil {
		t.Errorf("the PNG does not decode: %v", err)
	}
	if _, err := FromANSI(capture, 0, 4); err == nil || !strings.Contains(err.Error(), "at least 1") {
		t.Errorf("0 columns: %v", err)
	}
}
