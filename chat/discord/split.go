package discord

import "github.com/sandbot/sandbot/chat/internal/split"

// measure is how the adapter counts Discord's limits: in UTF-16 code
// units. Discord itself counts code points (its API measures strings with
// Python's len), so UTF-16, which is never less, keeps every message
// within the limit, and it is also what the in-project fake enforces.
const measure = split.UTF16

// textLen measures s against Discord's limits (see measure).
func textLen(s string) int { return measure.Len(s) }

// SplitMarkdown splits a Markdown answer into messages of at most limit
// characters (MaxContent for Discord) with the shared splitter: it breaks
// at paragraph ends, then line ends, then spaces, and never inside a run
// of backticks. A part that ends inside a code block closes it, and the
// next part reopens it with the same language tag, so every part renders
// on its own; an unclosed block at the end is closed. Parts that would be
// blank are left out.
func SplitMarkdown(text string, limit int) []string {
	return split.Markdown(text, split.Options{Limit: limit, Measure: measure, KeepLanguage: true})
}
