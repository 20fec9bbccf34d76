package slack

import (
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestMrkdwn(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"bold", "**bold** and __also__", "*bold* and *also*"},
		{"italic", "*it* and _it_", "_it_ and _it_"},
		{"bold with italic inside", "**a _b_ c**", "*a _b_ c*"},
		{"snake_case stays", "call snake_case_name now", "call snake_case_name now"},
		{"lone stars stay", "2 * 3 * 4", "2 * 3 * 4"},
		{"strike", "~~gone~~", "~gone~"},
		{"link", "see [the docs](https://x.io/a?b=1&c=2)", "see <https://x.io/a?b=1&amp;c=2|the docs>"},
		{"link text cannot end the link", "[a|b > c](http://x)", "<http://x|a¦b &gt; c>"},
		{"link url cannot end the link", "[t](http://x/a|b>c)", "<http://x/a%7Cb%3Ec|t>"},
		{"autolink", "<https://example.com/x>", "<https://example.com/x>"},
		{"headings", "# Title\n### **Bold** part ###", "*Title*\n*Bold part*"},
		{"bullets", "- one\n* two\n+ three\n  - nested", "• one\n• two\n• three\n  • nested"},
		{"ordered", "1. first\n2) second", "1. first\n2. second"},
		{"tasks", "- [ ] todo\n- [x] done", "• ☐ todo\n• ☑ done"},
		{"quote", "> quoted **b**", "> quoted *b*"},
		{"rule", "---", "──────────"},
		{"escapes", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"no broadcast or mention", "<!channel> <@U123> <#C1>", "&lt;!channel&gt; &lt;@U123&gt; &lt;#C1&gt;"},
		{"inline code kept", "run `x <y> *z* _w_` now", "run `x &lt;y&gt; *z* _w_` now"},
		{"double-backtick code", "``a`b``", "`aˋb`"},
		{"unmatched backticks", "a ```b", "a ``\u200b`b"},
		{"backslash escape", `\*literal\* and \<`, "*literal* and &lt;"},
		{"fenced code drops language", "```go\nx := *p // <nil>\n```", "```\nx := *p // &lt;nil&gt;\n```"},
		{"tilde fence", "~~~\ncode\n~~~", "```\ncode\n```"},
		{"indented fence in list", "- step:\n  ```sh\n  make test\n  ```", "• step:\n```\nmake test\n```"},
		{"unclosed fence is closed", "```\nunclosed", "```\nunclosed\n```"},
		{"fence inside longer fence", "````\n```\ninner\n```\n````", "```\n``\u200b`\ninner\n``\u200b`\n```"},
		{"markdown inside code untouched", "```\n**not bold** [x](y)\n# not heading\n```", "```\n**not bold** [x](y)\n# not heading\n```"},
		{"table becomes code", "| a | b |\n|---|---|\n| 1 | 2 |\nafter", "```\n| a | b |\n|---|---|\n| 1 | 2 |\n```\nafter"},
		{"blank lines kept", "one\n\ntwo\r\nthree", "one\n\ntwo\nthree"},
		{"unicode", "**héllo** 😀 _ñ_", "*héllo* 😀 _ñ_"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Mrkdwn(tc.in); got != tc.want {
				t.Fatalf("Mrkdwn(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// checkMrkdwnSafe asserts what must hold for any converted text: balanced
// fences, valid UTF-8, and no '<' that opens anything but a web link (so no
// mention or broadcast can be formed by model output).
func checkMrkdwnSafe(t *testing.T, in, out string) {
	t.Helper()
	if strings.Count(out, fence)%2 != 0 {
		t.Fatalf("unbalanced fences in %q (from %q)", out, in)
	}
	if utf8.ValidString(in) && !utf8.ValidString(out) {
		t.Fatalf("invalid UTF-8 out of valid input %q: %q", in, out)
	}
	for i := 0; i < len(out); i++ {
		if out[i] != '<' {
			continue
		}
		rest := out[i+1:]
		if !strings.HasPrefix(rest, "http://") && !strings.HasPrefix(rest, "https://") && !strings.HasPrefix(rest, "mailto:") {
			t.Fatalf("raw '<' not opening a link at %d in %q (from %q)", i, out, in)
		}
	}
}

func FuzzMrkdwn(f *testing.F) {
	for _, s := range []string{
		"**b** *i* _i_ ~~s~~ `c` [l](http://x) <https://y> <!here>",
		"```go\ncode\n```\n# h\n- a\n1. b\n> q\n| a |\n|---|\n",
		"````\n```\n````", "``a`b``", "***x***", "[a](<b>)", "\\`\\`\\`", "&amp;<>", "\x00\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Mrkdwn(in)
		checkMrkdwnSafe(t, in, out)
	})
}

// A moment the adapter formats becomes Slack's <!date>, in each reader's
// time zone; the same markers from anyone else's text become nothing.
func TestTimesBecomeSlackDates(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 45, 0, 0, time.UTC)
	got := Mrkdwn("Expires at " + (&Adapter{}).FormatTime(at))
	want := "Expires at <!date^" + strconv.FormatInt(at.Unix(), 10) + "^{date_short_pretty} {time}|Dec 2 16:45 UTC>"
	if got != want {
		t.Fatalf("Mrkdwn = %q, want %q", got, want)
	}
	for _, forged := range []string{timeOpen + "12|<!channel>" + timeClose, timeOpen + "abc|x" + timeClose, timeOpen + "no close"} {
		if got := Mrkdwn(forged); strings.Contains(got, "<!") && !strings.Contains(got, "&lt;!channel&gt;") {
			t.Errorf("Mrkdwn(%q) = %q: a forged marker must not reach Slack as markup", forged, got)
		}
	}
}
