package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/session"
)

var goldenThread = chat.Thread{Platform: "slack", Workspace: "T0001", Channel: "C0001", Thread: "1700000000.000100"}

// goldenJSON compares v's JSON with testdata/name.golden.json (rewritten
// with -update).
func goldenJSON(t *testing.T, name string, v any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./chat/slack -run Golden -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("%s differs (rerun with -update if intended):\n%s", path, buf.Bytes())
	}
}

// TestStatusCardsGolden pins the status cards issue 14 added, as Slack
// blocks: Stop and View output on a running card, the approval (expiry
// in each reader's time), the stopped card, the usage footer with cost,
// and the approval notice.
func TestStatusCardsGolden(t *testing.T) {
	a := &Adapter{}
	opts := chattest.CardOptions(goldenThread, MaxButtonValue, a.Mention, a.FormatTime)
	for name, ts := range chattest.CardStates() {
		t.Run(name, func(t *testing.T) {
			blocks, fb := ToBlocks(chat.RenderTurn(ts, opts))
			raw, _ := json.Marshal(blocks)
			if errs := fakeslack.ValidateBlocks(raw); len(errs) > 0 {
				t.Fatalf("Slack would reject the card: %v", errs)
			}
			goldenJSON(t, "card_"+name, map[string]any{"fallback": fb, "blocks": blocks})
		})
	}
	t.Run("approval_notice", func(t *testing.T) {
		parts := SplitMessages(Mrkdwn(chat.ApprovalNoticeText(3, opts.Approvers)), DefaultLimits)
		if len(parts) != 1 {
			t.Fatalf("the notice takes %d messages", len(parts))
		}
		goldenJSON(t, "approval_notice", map[string]any{"text": parts[0].Text, "blocks": sectionBlocks(parts[0].Sections)})
	})
}

// outputCore is a core whose session transcript is
// chattest.OutputTranscript.
func outputCore() *chat.Core {
	return chat.NewCore(chat.CoreConfig{}, &chattest.Sessions{HistoryFn: func(string, session.HistoryRequest) ([]session.HistoryEntry, error) {
		return chattest.OutputTranscript(), nil
	}}, nil)
}

// TestOutputModalGolden pins the View output modal: the picker of a turn's
// calls, one call's commands and output, and a refusal, each as the view
// views.update sends.
func TestOutputModalGolden(t *testing.T) {
	c := outputCore()
	ctx := context.Background()
	bob := chat.User{ID: "U0BOB", Name: "bob"}
	meta := `{"w":"T0001","c":"C0001","t":"1700000000.000100"}`
	picker := c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewOutput, Value: chat.EncodeApproval(goldenThread.ID(), "2"), User: bob, Thread: goldenThread})
	if picker.Picker == nil {
		t.Fatalf("turn 2: %+v", picker)
	}
	pick := picker.Picker.Blocks[len(picker.Picker.Blocks)-1].Buttons[1]
	cases := map[string]chat.OutputView{
		"picker":  picker,
		"call":    c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewOutput, Value: chat.EncodeApproval(goldenThread.ID(), "1"), User: bob, Thread: goldenThread}),
		"picked":  c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewCall, Value: pick.Value, User: bob, Thread: goldenThread}),
		"refusal": c.ViewOutput(ctx, chat.Action{ID: chat.ActionViewOutput, Value: "2.9", User: bob, Thread: goldenThread}),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			blocks, file := outputBlocks(v, true)
			if file != nil {
				t.Fatalf("a 4 KiB output needs no file")
			}
			view := outputModal(meta, blocks)
			checkModal(t, view)
			goldenJSON(t, "output_modal_"+name, view)
		})
	}
	if call := cases["call"].Call; call == nil || !strings.Contains(call.Output, "FAIL <main> & done") {
		t.Fatalf("call view: %+v", cases["call"])
	}
}

// checkModal applies the fake's modal checks (Slack's limits) to view.
func checkModal(t *testing.T, view slackgo.ModalViewRequest) {
	t.Helper()
	raw, err := json.Marshal(view)
	if err != nil {
		t.Fatal(err)
	}
	if errs := fakeslack.ValidateView(raw); len(errs) > 0 {
		t.Fatalf("Slack would reject the modal: %v", errs)
	}
}

// An output too big for one modal even when split (100 blocks) shows its
// head and tail, names the file that holds it all, and hands that file
// back for the thread; nothing is cut silently.
func TestOutputModalOverflow(t *testing.T) {
	out := strings.Repeat("<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<\n", 4000)
	call := chat.CallOutput{Turn: 7, CallID: "call_big", Index: 1, Of: 1, Commands: []string{"yes '<' | head"}, Output: out, HasOutput: true}
	blocks, file := outputBlocks(chat.OutputView{Call: &call}, true)
	if file == nil || file.Content != call.FileText() || !strings.Contains(file.Content, out) {
		t.Fatalf("no file with the whole output: %+v", file)
	}
	if len(blocks) > maxModalBlocks {
		t.Fatalf("%d blocks, Slack allows %d", len(blocks), maxModalBlocks)
	}
	checkModal(t, outputModal("{}", blocks))
	raw, _ := json.Marshal(blocks)
	if !strings.Contains(string(raw), "parts are not shown here: the whole call, arguments and output, is attached to the thread as `"+file.Name+"`") {
		t.Fatalf("the modal does not name the file")
	}
	blocks, _ = outputBlocks(chat.OutputView{Call: &call}, false)
	raw, _ = json.Marshal(blocks)
	if !strings.Contains(string(raw), "could not be attached") {
		t.Fatalf("a failed attachment is not said")
	}
}
