package termshot

import (
	"bytes"
	"fmt"
	"image/color"
	"io"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/vt"
)

// Snapshot is a terminal screen: Cols×Rows cells, row by row.
type Snapshot struct {
	Cols, Rows int
	Cells      []Cell
}

// Cell is one character cell. A wide character (CJK, most emoji) takes
// two cells: the first has Width 2, the second Width 0 and no text.
type Cell struct {
	Text  string
	Width int
	// Fg and Bg are nil for the terminal's default colours.
	Fg, Bg                             color.Color
	Bold, Faint, Italic, Reverse, Line bool // Line: underlined
	// Link is the cell's hyperlink target (OSC 8), "" for none.
	Link string
}

// At is the cell at column x, row y.
func (s Snapshot) At(x, y int) Cell { return s.Cells[y*s.Cols+x] }

type cellReader interface {
	CellAt(x, y int) *uv.Cell
}

func snapshot(e cellReader, cols, rows int) Snapshot {
	s := Snapshot{Cols: cols, Rows: rows, Cells: make([]Cell, cols*rows)}
	for y := range rows {
		for x := range cols {
			c := e.CellAt(x, y)
			if c == nil {
				s.Cells[y*cols+x] = Cell{Width: 1}
				continue
			}
			a := c.Style.Attrs
			s.Cells[y*cols+x] = Cell{
				Text: c.Content, Width: c.Width, Fg: c.Style.Fg, Bg: c.Style.Bg,
				Bold: a&uv.AttrBold != 0, Faint: a&uv.AttrFaint != 0, Italic: a&uv.AttrItalic != 0,
				Reverse: a&uv.AttrReverse != 0, Line: c.Style.Underline != uv.UnderlineNone,
				Link: c.Link.URL,
			}
		}
	}
	return s
}

// FromANSI replays a screen capture (text with SGR colour sequences, such
// as `tmux capture-pane -e -p` prints) on an emulated terminal of
// cols×rows cells and returns the screen. Lines end in "\n"; lines past
// the last row scroll the first ones off, as on a terminal.
func FromANSI(capture []byte, cols, rows int) (Snapshot, error) {
	if cols < 1 || rows < 1 {
		return Snapshot{}, fmt.Errorf("termshot: screen size %dx%d: both must be at least 1", cols, rows)
	}
	e := vt.NewEmulator(cols, rows)
	// Answers to any query in the capture go nowhere, but must be read:
	// the emulator writes them to a pipe.
	go func() { _, _ = io.Copy(io.Discard, e) }()
	defer closeReplies(e)
	// A capture's lines end in a bare newline; on a terminal that moves
	// down without returning to the first column.
	capture = bytes.TrimRight(capture, "\n")
	capture = bytes.ReplaceAll(bytes.ReplaceAll(capture, []byte("\r\n"), []byte("\n")), []byte("\n"), []byte("\r\n"))
	if _, err := e.Write(capture); err != nil {
		return Snapshot{}, fmt.Errorf("termshot: replay capture: %w", err)
	}
	return snapshot(e, cols, rows), nil
}

// closeReplies ends the reader of an emulator's answers (it sees EOF).
// Emulator.Close would do it too, but it sets a flag that the reader's
// goroutine reads unsynchronised.
func closeReplies(e *vt.Emulator) {
	if c, ok := e.InputPipe().(io.Closer); ok {
		_ = c.Close()
	}
}
