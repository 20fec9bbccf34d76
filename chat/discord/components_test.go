package discord

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// golden compares v's JSON with testdata/name.json.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s differs from the golden file:\n got %s\nwant %s", path, got, want)
	}
}

func approvalValue(t *testing.T) string {
	t.Helper()
	loc := session.Location{Platform: "discord", Workspace: "4000000000000000001", Channel: "5000000000000000001", Thread: "1300000000000000042"}
	v, err := chat.EncodeApprovalCompact(loc.ID(), "call_9f8e7d6c5b4a", chat.MaxDiscordButtonValue)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func statusCard(t *testing.T) chat.Card {
	v := approvalValue(t)
	return chat.Card{Title: "✋ Waiting for approval", Blocks: []chat.Block{
		{Kind: chat.BlockText, Text: "✅ `go test ./...` · 2.1s · exit 0"},
		{Kind: chat.BlockCode, Text: "ok  \tgithub.com/acme/widgets\t0.4s\n"},
		{Kind: chat.BlockDivider},
		{Kind: chat.BlockText, Text: "✋ **Approval needed** to run this command"},
		{Kind: chat.BlockCode, Text: "rm -rf build && echo ```done```"},
		{Kind: chat.BlockContext, Text: "Can approve: <@7000000000000000001> (owner)"},
		{Kind: chat.BlockActions, Buttons: []chat.Button{
			{ID: chat.ActionApprove, Label: "Approve", Style: chat.StylePrimary, Value: v},
			{ID: chat.ActionApproveAlways, Label: "Approve always", Value: v},
			{ID: chat.ActionReject, Label: "Reject", Style: chat.StyleDanger, Value: v},
		}},
		{Kind: chat.BlockContext, Text: "Turn 1 · local · 2 tool calls"},
	}}
}

func TestToMessageGolden(t *testing.T) {
	cases := map[string]chat.Card{
		"status_approval": statusCard(t),
		"status_fields": {Title: "📋 Fix the flaky test", Blocks: []chat.Block{
			{Kind: chat.BlockFields, Fields: []chat.Field{{Label: "Backend", Value: "docker"}, {Label: "Turns", Value: "3"}}},
			{Kind: chat.BlockText, Text: "[Open in the Temporal UI](http://localhost:8233/namespaces/default/workflows/x)"},
			{Kind: chat.BlockContext, Text: "Workflow `session/discord/4/5/6`"},
		}},
		"title_only": {Title: "💭 Thinking"},
	}
	for name, card := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := ToMessage(card)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "tomessage_"+name, m.Send())
		})
	}
}

func TestToMessageEditRemovesButtons(t *testing.T) {
	m, err := ToMessage(chat.Card{Title: "✅ Done", Blocks: []chat.Block{{Kind: chat.BlockText, Text: "approved by alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m.Edit("5", "6"))
	for _, want := range []string{`"components":[]`, `"content":"✅ Done"`, `"allowed_mentions":{"parse":[]`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("edit body %s lacks %s", b, want)
		}
	}
}

func TestToMessageLimits(t *testing.T) {
	huge := strings.Repeat("line of output\n", 1000) // 15,000 chars
	card := chat.Card{Title: strings.Repeat("T", 300), Blocks: []chat.Block{
		{Kind: chat.BlockText, Text: "before"},
		{Kind: chat.BlockCode, Text: huge},
		{Kind: chat.BlockContext, Text: strings.Repeat("f", 3000)},
	}}
	m, err := ToMessage(card)
	if err != nil {
		t.Fatal(err)
	}
	e := m.Embeds[0]
	total := textLen(e.Description) + textLen(e.Footer.Text)
	switch {
	case textLen(m.Content) > MaxContent:
		t.Errorf("content %d > %d", textLen(m.Content), MaxContent)
	case textLen(e.Description) > MaxEmbedDescription:
		t.Errorf("description %d > %d", textLen(e.Description), MaxEmbedDescription)
	case total > MaxEmbedTotal:
		t.Errorf("embed total %d > %d", total, MaxEmbedTotal)
	case strings.Count(e.Description, "```")%2 != 0:
		t.Errorf("cut description leaves a code block open")
	}

	// Six buttons take two rows; 26 cannot fit.
	var btns []chat.Button
	for i := 0; i < 26; i++ {
		btns = append(btns, chat.Button{ID: "b" + strings.Repeat("x", i), Label: "B", Value: "v"})
	}
	m, err = ToMessage(chat.Card{Blocks: []chat.Block{{Kind: chat.BlockActions, Buttons: btns[:6]}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Components) != 2 || len(m.Components[0].(discordgo.ActionsRow).Components) != 5 {
		t.Fatalf("rows = %+v", m.Components)
	}
	if _, err := ToMessage(chat.Card{Blocks: []chat.Block{{Kind: chat.BlockActions, Buttons: btns}}}); err == nil || !strings.Contains(err.Error(), "at most 5") {
		t.Fatalf("26 buttons: err = %v", err)
	}
	dup := []chat.Button{{ID: "a", Value: "1"}, {ID: "a", Value: "1"}}
	if _, err := ToMessage(chat.Card{Blocks: []chat.Block{{Kind: chat.BlockActions, Buttons: dup}}}); err == nil {
		t.Fatal("duplicate custom_id accepted")
	}
}

func TestCustomID(t *testing.T) {
	long := session.Location{Platform: "discord", Workspace: "4000000000000000001", Channel: "5000000000000000001", Thread: "1300000000000000042"}
	full := chat.EncodeApproval(long.ID(), "call_"+strings.Repeat("z", 60))
	cases := []struct {
		name, action, value string
		wantErr             string
		check               func(t *testing.T, id string)
	}{
		{name: "plain", action: "approve", value: "2.call1", check: func(t *testing.T, id string) {
			if id != "approve:2.call1" {
				t.Fatalf("id = %q", id)
			}
		}},
		{name: "exactly 100", action: "a", value: strings.Repeat("v", 98)},
		{name: "long approval re-encoded", action: chat.ActionApproveAlways, value: full, check: func(t *testing.T, id string) {
			a, v, err := ParseCustomID(id)
			if err != nil || a != chat.ActionApproveAlways {
				t.Fatalf("parse %q: %v", id, err)
			}
			if _, call, err := chat.DecodeApproval(v); err != nil || call == "" {
				t.Fatalf("re-encoded value %q does not decode: %v", v, err)
			}
		}},
		{name: "too long, not an approval", action: "a", value: strings.Repeat("v", 99), wantErr: "Discord allows 100"},
		{name: "empty action", action: "", value: "x", wantErr: "non-empty"},
		{name: "colon in action", action: "a:b", value: "x", wantErr: "free of"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := CustomID(tc.action, tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if textLen(id) > MaxCustomID {
				t.Fatalf("id %d chars", textLen(id))
			}
			if tc.check != nil {
				tc.check(t, id)
			}
			a, v, err := ParseCustomID(id)
			if err != nil || a != tc.action || (tc.check == nil && v != tc.value) {
				t.Fatalf("round trip: %q %q %v", a, v, err)
			}
		})
	}
}

// An approval's expiry is Discord's timestamp markup, in the embed's
// description (which renders it in each reader's time zone), not the
// plain-text footer.
func TestExpiryIsADiscordTimestamp(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 45, 0, 0, time.UTC)
	ts := session.TurnState{Turn: 1, Status: session.StatusAwaitingApproval,
		ToolCalls: []session.ToolCallState{{CallID: "c1", Name: "shell", Commands: []string{"make"}, Status: session.CallAwaitingApproval}},
		Pending:   &session.PendingApproval{CallID: "c1", Command: "make", AskedAt: at.Add(-time.Minute), ExpiresAt: at}}
	a := &Adapter{}
	m, err := ToMessage(chat.RenderTurn(ts, chat.RenderOptions{FormatTime: a.FormatTime}))
	if err != nil {
		t.Fatal(err)
	}
	want := "<t:" + strconv.FormatInt(at.Unix(), 10) + ":f>"
	if len(m.Embeds) == 0 || !strings.Contains(m.Embeds[0].Description, want) {
		t.Fatalf("embed %+v lacks %s in its description", m.Embeds, want)
	}
}
