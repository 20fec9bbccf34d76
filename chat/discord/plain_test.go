package discord

import "testing"

func TestPlainText(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Workflow `discord:4:5:6`", "Workflow discord:4:5:6"},
		{"Turn 3 · local · 2 tool calls", "Turn 3 · local · 2 tool calls"},
		{"**bold**, *it*, _it_, __under__, ~~gone~~, ||secret||", "bold, it, it, under, gone, secret"},
		{"***both*** and *a **b** c*", "both and a b c"},
		{"[Open in the Temporal UI](http://localhost:8233/x)", "Open in the Temporal UI (http://localhost:8233/x)"},
		{"[https://e.com/a](https://e.com/a)", "https://e.com/a"},
		{"[**PR #7**](<https://github.com/o/r/pull/7> \"title\")", "PR #7 (https://github.com/o/r/pull/7)"},
		{"see <https://e.com/a_b>", "see https://e.com/a_b"},
		{"snake_case_name and 2 * 3 * 4", "snake_case_name and 2 * 3 * 4"},
		{"`a_b*c*` stays literal inside code", "a_b*c* stays literal inside code"},
		{"`` a `tick` ``", "a `tick`"},
		{"an unclosed `tick and **star", "an unclosed `tick and **star"},
		{`\*not italic\* and a\_b`, "*not italic* and a_b"},
		{`C:\path\file`, `C:\path\file`},
		{"-# small\n# Title\n> quoted\n- item", "small\nTitle\nquoted\n• item"},
		{"<@7000000000000000001> and <t:1700000000:R>", "<@7000000000000000001> and <t:1700000000:R>"},
		{"~single~ and | pipes |", "~single~ and | pipes |"},
		{"_snake_ word_", "snake word_"},
		{"**", "**"},
		{"", ""},
	}
	for _, c := range cases {
		if got := plainText(c.in); got != c.want {
			t.Errorf("plainText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
