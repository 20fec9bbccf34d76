package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
)

// PgUp scrolls back through the transcript and stays there while new
// lines arrive; Ctrl-End follows the end again. The window is always the
// transcript's height.
func TestScrollbackHoldsItsPlace(t *testing.T) {
	m, _ := newTestModel(t)
	for i := range 100 {
		m.Update(noticeMsg{text: fmt.Sprintf("line %03d", i)})
	}
	if s := screen(m); !strings.Contains(s, "line 099") || strings.Contains(s, "line 050") {
		t.Fatalf("not following the end:\n%s", s)
	}
	m.Update(tea.KeyPressMsg{Code: tea.KeyPgUp})
	m.Update(tea.KeyPressMsg{Code: tea.KeyPgUp})
	s := screen(m)
	if strings.Contains(s, "line 099") || !strings.Contains(s, "line 055") || strings.Contains(s, "line 056") {
		t.Fatalf("PgUp twice did not scroll back two screens:\n%s", s)
	}
	m.Update(noticeMsg{text: "line 100"})
	if s2 := screen(m); s2 != s {
		t.Errorf("a new line moved the scrolled-back window:\n%s", s2)
	}
	m.Update(tea.KeyPressMsg{Code: tea.KeyHome, Mod: tea.ModCtrl})
	if s := screen(m); !strings.Contains(s, "line 000") {
		t.Errorf("Ctrl-Home is not the top:\n%s", s)
	}
	m.Update(tea.KeyPressMsg{Code: tea.KeyEnd, Mod: tea.ModCtrl})
	if s := screen(m); !strings.Contains(s, "line 100") {
		t.Errorf("Ctrl-End is not the end:\n%s", s)
	}
	if n := len(strings.Split(screen(m), "\n")); n != 24 {
		t.Errorf("screen has %d lines, want 24", n)
	}
	// A transcript shorter than the window still fills it.
	m2, _ := newTestModel(t)
	if n := len(strings.Split(screen(m2), "\n")); n != 24 {
		t.Errorf("empty app: %d lines, want 24", n)
	}
}
