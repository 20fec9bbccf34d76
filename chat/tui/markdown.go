package tui

import (
	"strings"

	"charm.land/glamour/v2"
)

// markdown renders answers with Glamour, one renderer per width. Text is
// neutralised before it is rendered, so the only escape sequences on
// screen are Glamour's own styling.
type markdown struct {
	w int
	r *glamour.TermRenderer
}

func newMarkdown() *markdown { return &markdown{} }

func (md *markdown) render(text string, w int) string {
	text = safe(text)
	if md.r == nil || md.w != w {
		r, err := glamour.NewTermRenderer(glamour.WithStandardStyle("dark"), glamour.WithWordWrap(max(w-4, 20)))
		if err != nil {
			return wrap(text, w)
		}
		md.r, md.w = r, w
	}
	out, err := md.r.Render(text)
	if err != nil {
		return wrap(text, w)
	}
	return strings.Trim(out, "\n")
}
