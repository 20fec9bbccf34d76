package tui

import "strings"

// scroller is the transcript's window: the lines of every item and an
// offset. Unlike the Bubbles viewport it does not measure every line's
// width when the content changes (each line is already wrapped to the
// screen), which was half the cost of a frame in a 1,000-turn session.
type scroller struct {
	lines  []string
	off, h int
}

func (s *scroller) setHeight(h int) { s.h = max(h, 1); s.clamp() }

func (s *scroller) setLines(lines []string) { s.lines = lines; s.clamp() }

func (s *scroller) maxOff() int { return max(len(s.lines)-s.h, 0) }

func (s *scroller) clamp() { s.off = min(max(s.off, 0), s.maxOff()) }

func (s *scroller) scroll(n int) { s.off += n; s.clamp() }

func (s *scroller) top()    { s.off = 0 }
func (s *scroller) bottom() { s.off = s.maxOff() }

func (s *scroller) atBottom() bool { return s.off >= s.maxOff() }

// view is the window, h lines (blank ones under a short transcript).
func (s *scroller) view() string {
	win := make([]string, s.h)
	copy(win, s.lines[s.off:min(s.off+s.h, len(s.lines))])
	return strings.Join(win, "\n")
}
