package fakeslack

import (
	"encoding/json"
	"testing"

	"github.com/slack-go/slack"
)

func modal(title string, blocks ...slack.Block) slack.ModalViewRequest {
	return slack.ModalViewRequest{Type: slack.VTModal, Title: slack.NewTextBlockObject("plain_text", title, false, false),
		CallbackID: "cb", PrivateMetadata: "meta", Blocks: slack.Blocks{BlockSet: blocks}}
}

// views.push needs a trigger from a click inside an open modal and stacks
// at most three views; views.update replaces a view by ID, checking its
// hash when one is given; the click inside a modal carries the view.
func TestViewsPushAndUpdate(t *testing.T) {
	s, api := newClient(t, Options{})
	ctx := testCtx(t)
	triggerOf := func(p json.RawMessage, err error) string {
		t.Helper()
		var cb slack.InteractionCallback
		if err != nil || json.Unmarshal(p, &cb) != nil {
			t.Fatalf("payload: %v", err)
		}
		return cb.TriggerID
	}
	ts := s.Say(UserMessage{Text: "hi"}).Message.TS
	msgTrigger := triggerOf(s.ShortcutPayload("x", "", "C0001", ts))
	button := slack.NewActionBlock("a", slack.NewButtonBlockElement("pick", "v1", slack.NewTextBlockObject("plain_text", "Pick", false, false)))
	root, err := api.OpenViewContext(ctx, msgTrigger, modal("Root", button))
	if err != nil {
		t.Fatalf("views.open: %v", err)
	}
	other := triggerOf(s.ShortcutPayload("x", "", "C0001", ts))
	if _, err := api.PushViewContext(ctx, other, modal("Pushed", button)); slackErr(err) != "invalid_trigger_id" {
		t.Fatalf("views.push with a message's trigger: %v", err)
	}

	p, err := s.ClickInViewPayload(root.ID, "U0002", "pick", nil)
	var cb slack.InteractionCallback
	if err != nil || json.Unmarshal(p, &cb) != nil {
		t.Fatalf("click in view: %v", err)
	}
	if cb.Type != slack.InteractionTypeBlockActions || cb.Container.Type != "view" || cb.View.ID != root.ID || cb.View.PrivateMetadata != "meta" ||
		cb.ActionCallback.BlockActions[0].Value != "v1" || cb.Channel.ID != "" {
		t.Fatalf("block_actions in a view = %+v", cb)
	}
	second, err := api.PushViewContext(ctx, cb.TriggerID, modal("Pushed", button))
	if err != nil || second.PreviousViewID != root.ID || second.RootViewID != root.ID {
		t.Fatalf("views.push: %v %+v", err, second)
	}
	third, err := api.PushViewContext(ctx, triggerOf(s.ClickInViewPayload(second.ID, "", "pick", nil)), modal("Third", button))
	if err != nil {
		t.Fatalf("views.push onto a pushed view: %v", err)
	}
	if _, err := api.PushViewContext(ctx, triggerOf(s.ClickInViewPayload(third.ID, "", "pick", nil)), modal("Fourth")); slackErr(err) != "push_limit_reached" {
		t.Fatalf("a fourth view: %v", err)
	}

	up, err := api.UpdateViewContext(ctx, modal("Updated", slack.NewDividerBlock()), "", "", second.ID)
	if err != nil {
		t.Fatalf("views.update: %v", err)
	}
	if v, _ := s.View(second.ID); v.Updates != 1 || len(v.ViewButtons()) != 0 || v.Previous != root.ID {
		t.Fatalf("after views.update: %+v", v)
	}
	if _, err := api.UpdateViewContext(ctx, modal("Again"), "", second.Hash, second.ID); slackErr(err) != "hash_conflict" {
		t.Fatalf("a stale hash: %v", err)
	}
	if _, err := api.UpdateViewContext(ctx, modal("Again", slack.NewDividerBlock()), "", up.Hash, second.ID); err != nil {
		t.Fatalf("the current hash: %v", err)
	}
	if _, err := api.UpdateViewContext(ctx, modal("Nope", slack.NewDividerBlock()), "", "", "V404"); slackErr(err) != "not_found" {
		t.Fatalf("an unknown view: %v", err)
	}
	if _, err := api.UpdateViewContext(ctx, modal("A title far longer than twenty-four", slack.NewDividerBlock()), "", "", second.ID); slackErr(err) != "invalid_arguments" {
		t.Fatalf("an invalid view: %v", err)
	}
}
