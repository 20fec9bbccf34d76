package tui

import (
	"encoding/json"

	"github.com/sandbot/sandbot/session"
)

// historyItems turns a session's visible transcript into transcript
// items: what people wrote, the model's answers in Markdown, and the
// commands it ran (their output is in the turn's details, not repeated).
func historyItems(entries []session.HistoryEntry) []*item {
	var out []*item
	for _, e := range entries {
		msg := e.Msg
		switch msg.Role {
		case "user":
			if msg.Content != "" {
				out = append(out, &item{kind: "user", text: msg.Content})
			}
		case "assistant":
			for _, c := range msg.ToolCalls {
				var args session.ShellArgs
				if json.Unmarshal([]byte(c.Arguments), &args) == nil && len(args.Commands) > 0 {
					for _, cmd := range args.Commands {
						out = append(out, &item{kind: "ran", text: cmd})
					}
				} else {
					out = append(out, &item{kind: "ran", text: c.Name + " " + c.Arguments})
				}
			}
			if msg.Content != "" {
				out = append(out, &item{kind: "text", text: msg.Content})
			}
		}
	}
	return out
}

// prepend puts the earlier transcript before what this run of the app has
// shown (after the intro). A message typed while the history was on its
// way may be in both; the copy from history is dropped.
func (t *thread) prepend(hist []*item) {
	if len(hist) == 0 {
		return
	}
	at := 0
	for at < len(t.items) && t.items[at].kind == "intro" {
		at++
	}
	rest := t.items[at:]
	for len(hist) > 0 && len(rest) > 0 {
		last := hist[len(hist)-1]
		if last.kind == "user" && containsUser(rest, last.text) {
			hist = hist[:len(hist)-1]
			continue
		}
		break
	}
	items := append(append(append([]*item{}, t.items[:at]...), hist...), rest...)
	t.items = items
	t.dirty = true
}

func containsUser(items []*item, text string) bool {
	for _, it := range items {
		if it.kind == "user" && it.text == text {
			return true
		}
	}
	return false
}
