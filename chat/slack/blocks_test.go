package slack

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func approvalButtons(value string) chat.Block {
	return chat.Block{Kind: chat.BlockActions, Buttons: []chat.Button{
		{ID: chat.ActionApprove, Label: "Approve", Style: chat.StylePrimary, Value: value},
		{ID: chat.ActionApproveAlways, Label: "Approve always", Value: value},
		{ID: chat.ActionReject, Label: "Reject", Style: chat.StyleDanger, Value: value},
	}}
}

var goldenCards = map[string]chat.Card{
	"status_awaiting_approval": {
		Title: "⏸ Waiting for approval — turn 3",
		Blocks: []chat.Block{
			{Kind: chat.BlockText, Text: "✅ `go test ./...` — 2.1s, exit 0\n⏸ `rm -rf build && make`"},
			{Kind: chat.BlockCode, Text: "ok  \tgithub.com/acme/widgets\t0.12s\nFAIL <nil> & more"},
			{Kind: chat.BlockFields, Fields: []chat.Field{{Label: "Backend", Value: "docker"}, {Label: "Turn", Value: "3"}}},
			approvalButtons("1.s.T0001.C0001.1700000000%2E000100.call_abc"),
			{Kind: chat.BlockDivider},
			{Kind: chat.BlockContext, Text: "Session `session/slack/T0001/C0001/1700000000.000100`"},
		},
	},
	"final_markdown": {
		Blocks: []chat.Block{{Kind: chat.BlockText, Text: "## Summary\n**All tests pass.** See [the PR](https://github.com/acme/widgets/pull/7).\n\n- fixed `flaky_test`\n- bumped deps\n\n```go\nif a < b && c > d {}\n```"}},
	},
	"long_content": {
		Title: strings.Repeat("Very long title ", 30),
		Blocks: []chat.Block{
			{Kind: chat.BlockText, Text: strings.Repeat("Lorem ipsum dolor sit amet. ", 250)},
			{Kind: chat.BlockCode, Text: strings.Repeat("log line with some output\n", 200) + "last line"},
			{Kind: chat.BlockFields, Fields: func() []chat.Field {
				var fs []chat.Field
				for i := range 12 {
					fs = append(fs, chat.Field{Label: fmt.Sprintf("F%d", i), Value: strings.Repeat("v", 100*i)})
				}
				return fs
			}()},
		},
	},
	"buttons_edge_cases": {
		Title: "Two approvals",
		Blocks: []chat.Block{
			{Kind: chat.BlockActions, Buttons: []chat.Button{
				{ID: chat.ActionApprove, Label: "Approve first", Value: "2.a"},
				{ID: chat.ActionApprove, Label: "Approve second", Value: "2.b"},
				{ID: chat.ActionReject, Label: strings.Repeat("Reject ", 20), Value: "2.b"},
				{ID: chat.ActionApprove, Label: "Too big", Value: strings.Repeat("x", MaxButtonValue+1)},
			}},
		},
	},
	"overflow": func() chat.Card {
		c := chat.Card{Title: "Many tool calls"}
		for i := range 60 {
			c.Blocks = append(c.Blocks, chat.Block{Kind: chat.BlockText, Text: fmt.Sprintf("call %d", i)})
		}
		c.Blocks = append(c.Blocks, approvalButtons("2.call_60"))
		return c
	}(),
	"empty": {},
}

func TestToBlocksGolden(t *testing.T) {
	for name, card := range goldenCards {
		t.Run(name, func(t *testing.T) {
			blocks, fb := ToBlocks(card)
			raw, err := json.Marshal(blocks)
			if err != nil {
				t.Fatal(err)
			}
			if errs := fakeslack.ValidateBlocks(raw); len(errs) > 0 {
				t.Fatalf("Slack would reject the blocks: %v", errs)
			}
			if n := TextLen(fb); n == 0 || n > 4000 {
				t.Fatalf("fallback text has %d characters", n)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false) // keep &amp; and <url|text> readable
			enc.SetIndent("", "  ")
			if err := enc.Encode(map[string]any{"fallback": fb, "blocks": blocks}); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			path := filepath.Join("testdata", name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestToBlocksGolden -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("blocks differ from %s (rerun with -update if intended):\n%s", path, got)
			}
		})
	}
}

func TestToBlocksProperties(t *testing.T) {
	blocks, _ := ToBlocks(goldenCards["overflow"])
	if len(blocks) != 50 {
		t.Fatalf("overflow card has %d blocks, want 50", len(blocks))
	}
	raw, _ := json.Marshal(blocks)
	s := string(raw)
	if !strings.Contains(s, "Many tool calls") || !strings.Contains(s, "call 59") || strings.Contains(s, `"call 0"`) ||
		!strings.Contains(s, `"action_id":"approve_always"`) || !strings.Contains(s, "earlier block(s) not shown") {
		t.Fatalf("overflow card kept the wrong blocks: %s", s)
	}

	blocks, _ = ToBlocks(goldenCards["buttons_edge_cases"])
	raw, _ = json.Marshal(blocks)
	s = string(raw)
	for _, want := range []string{`"action_id":"approve"`, `"action_id":"approve#2"`, "could not be shown"} {
		if !strings.Contains(s, want) {
			t.Fatalf("missing %s in %s", want, s)
		}
	}
	if strings.Contains(s, "Too big") {
		t.Fatal("a button with an oversized value was shown")
	}
	if got := ActionIDOf("approve#2"); got != chat.ActionApprove {
		t.Fatalf("ActionIDOf = %q", got)
	}

	// Code keeps its tail when cut.
	blocks, _ = ToBlocks(goldenCards["long_content"])
	raw, _ = json.Marshal(blocks)
	if !strings.Contains(string(raw), `last line\n`+"```") || !strings.Contains(string(raw), "```\\n…") {
		t.Fatalf("long code block lost its tail: %.300s", raw)
	}
}

func FuzzToBlocks(f *testing.F) {
	f.Add("title", "**text** `c`", "code\n```", "label", "value", "approve", "v", uint8(3))
	f.Add("", strings.Repeat("x", 5000), "", "", "", "", "", uint8(60))
	f.Fuzz(func(t *testing.T, title, text, code, label, value, id, bval string, n uint8) {
		c := chat.Card{Title: title}
		for i := range int(n % 64) {
			switch i % 6 {
			case 0:
				c.Blocks = append(c.Blocks, chat.Block{Kind: chat.BlockText, Text: text})
			case 1:
				c.Blocks = append(c.Blocks, chat.Block{Kind: chat.BlockCode, Text: code})
			case 2:
				c.Blocks = append(c.Blocks, chat.Block{Kind: chat.BlockFields, Fields: []chat.Field{{Label: label, Value: value}}})
			case 3:
				c.Blocks = append(c.Blocks, chat.Block{Kind: chat.BlockActions, Buttons: []chat.Button{{ID: id, Label: label, Value: bval}, {ID: id, Label: label, Value: bval}}})
			case 4:
				c.Blocks = append(c.Blocks, chat.Block{Kind: chat.BlockContext, Text: text})
			default:
				c.Blocks = append(c.Blocks, chat.Block{Kind: chat.BlockDivider})
			}
		}
		blocks, fb := ToBlocks(c)
		raw, err := json.Marshal(blocks)
		if err != nil {
			t.Fatal(err)
		}
		if errs := fakeslack.ValidateBlocks(raw); len(errs) > 0 {
			t.Fatalf("Slack would reject ToBlocks output: %v\n%s", errs, raw)
		}
		if TextLen(fb) > 4000 || fb == "" {
			t.Fatalf("fallback has %d characters", TextLen(fb))
		}
	})
}
