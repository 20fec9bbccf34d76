package discord

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

var goldenThread = chat.Thread{Platform: "discord", Workspace: "4000000000000000001", Channel: "5000000000000000001", Thread: "1300000000000000042"}

// TestStatusCardsGolden pins the status cards issue 14 added, as Discord
// messages: Stop and View output on a running card, the approval (expiry
// in each reader's time), the stopped card, the usage footer with cost;
// and the approval notice's text.
func TestStatusCardsGolden(t *testing.T) {
	a := &Adapter{}
	opts := chattest.CardOptions(goldenThread, chat.MaxDiscordButtonValue, a.Mention, a.FormatTime)
	for name, ts := range chattest.CardStates() {
		t.Run(name, func(t *testing.T) {
			m, err := ToMessage(chat.RenderTurn(ts, opts))
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range customIDs(m) {
				if textLen(id) > MaxCustomID {
					t.Errorf("custom_id %q is over %d characters", id, MaxCustomID)
				}
			}
			golden(t, "card_"+name, m.Send())
		})
	}
	golden(t, "approval_notice", map[string]string{"content": chat.ApprovalNoticeText(3, opts.Approvers)})
}

func customIDs(m Message) []string {
	b, _ := json.Marshal(m.Send())
	var out []string
	for _, part := range strings.Split(string(b), `"custom_id":"`)[1:] {
		out = append(out, part[:strings.IndexByte(part, '"')])
	}
	return out
}

// TestOutputReplyGolden pins the View output answers: the ephemeral
// picker of a turn's calls, and a call's reply (content with the
// arguments, the file with arguments and whole output).
func TestOutputReplyGolden(t *testing.T) {
	c := chat.NewCore(chat.CoreConfig{Budgets: map[string]chat.Budget{Platform: {MaxButtonValue: chat.MaxDiscordButtonValue}}},
		&chattest.Sessions{HistoryFn: func(string, session.HistoryRequest) ([]session.HistoryEntry, error) {
			return chattest.OutputTranscript(), nil
		}}, nil)
	ctx := context.Background()
	bob := chat.User{ID: "7100000000000000002", Name: "bob"}
	value := func(turn string) string {
		v, err := chat.EncodeApprovalCompact(goldenThread.ID(), turn, chat.MaxDiscordButtonValue)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	picker := c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewOutput, Value: value("2"), User: bob, Thread: goldenThread})
	if picker.Picker == nil {
		t.Fatalf("turn 2: %+v", picker)
	}
	pm, err := ToMessage(*picker.Picker)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "output_picker", pm.WebhookEdit())

	call := c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewOutput, Value: value("1"), User: bob, Thread: goldenThread})
	if call.Call == nil {
		t.Fatalf("turn 1: %+v", call)
	}
	content, file := OutputReply(*call.Call)
	if textLen(content) > MaxContent {
		t.Fatalf("content has %d characters", textLen(content))
	}
	golden(t, "output_reply", map[string]string{"content": content, "file_name": file.Name, "file": file.Content})

	// Arguments too long for a message are named, and are in the file.
	long := *call.Call
	long.Commands = []string{strings.Repeat("echo long; ", 300)}
	content, file = OutputReply(long)
	if textLen(content) > MaxContent || !strings.Contains(content, "at the top of the attached file") || !strings.Contains(file.Content, long.Commands[0]) {
		t.Fatalf("long arguments: %q", content)
	}
}
