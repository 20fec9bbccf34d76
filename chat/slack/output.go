package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
)

// The View output modal.
const (
	outputCallback = "sandbot_output"
	outputTitle    = "Tool output"
	// maxModalBlocks is Slack's limit on a modal's blocks.
	maxModalBlocks = 100
)

// outputMeta travels in the output modal's private_metadata: the thread
// the modal was opened from, which a click inside the modal (where Slack
// names no channel) acts on.
type outputMeta struct {
	Team    string `json:"w"`
	Channel string `json:"c"`
	Thread  string `json:"t"`
}

// outputViewer is the core's View output answer (chat.Core.ViewOutput).
type outputViewer interface {
	ViewOutput(ctx context.Context, a chat.Action) chat.OutputView
}

// ShowsOutput implements chat.OutputShower: status cards carry the View
// output button, answered with a modal.
func (a *Adapter) ShowsOutput() bool {
	_, ok := a.core.(outputViewer)
	return ok
}

// onViewOutput answers a View output click, on a card or inside the
// modal's picker. The trigger expires 3 s after the click, so a modal
// that says "Loading…" is opened (or, inside the modal, pushed) at once,
// and filled in with views.update once the session answered.
func (a *Adapter) onViewOutput(ctx context.Context, cb slackgo.InteractionCallback, action chat.Action) error {
	th := action.Thread
	inModal := cb.View.ID != ""
	if inModal {
		var meta outputMeta
		if err := json.Unmarshal([]byte(cb.View.PrivateMetadata), &meta); err != nil {
			return fmt.Errorf("slack: output modal: bad private_metadata: %w", err)
		}
		th = a.thread(meta.Team, meta.Channel, meta.Thread)
		action.Thread = th
		action.Reply = func(ctx context.Context, text string) error {
			return a.ephemeral(ctx, th.Channel, th.Thread, cb.User.ID, text)
		}
	}
	if !located(th) {
		return errors.New("slack: a View output click names no thread; ignored")
	}
	if !located(th) {
		return fmt.Errorf("slack: a View output click names no thread (modal %t); ignored", inModal)
	}
	viewer, ok := a.core.(outputViewer)
	if !ok {
		return action.Reply(ctx, "This bot cannot show tool output here; use /history.")
	}
	meta, err := json.Marshal(outputMeta{Team: th.Workspace, Channel: th.Channel, Thread: th.Thread})
	if err != nil {
		return err
	}
	loading := outputModal(string(meta), []slackgo.Block{section("_Loading the output…_")})
	var viewID string
	method := "views.open"
	if inModal {
		method = "views.push"
	}
	err = a.call(ctx, method, func(ctx context.Context) error {
		var resp *slackgo.ViewResponse
		var err error
		if inModal {
			resp, err = a.api.PushViewContext(ctx, cb.TriggerID, loading)
		} else {
			resp, err = a.api.OpenViewContext(ctx, cb.TriggerID, loading)
		}
		if err == nil {
			viewID = resp.View.ID
		}
		return err
	})
	if err != nil {
		// The trigger lapsed or Slack refused the modal: say so privately
		// rather than lose the click.
		a.log.Warn("slack: output modal failed", "thread_id", th.ID(), "err", err)
		return action.Reply(ctx, "I could not open the output window (Slack allows 3 seconds after a click); click View output again, or use /history.")
	}
	view := viewer.ViewOutput(ctx, action)
	blocks, file := outputBlocks(view, true)
	if file != nil {
		if err := a.Attach(ctx, th, *file); err != nil {
			a.log.Warn("slack: attach the whole output", "thread_id", th.ID(), "err", err)
			blocks, _ = outputBlocks(view, false)
		}
	}
	return a.call(ctx, "views.update", func(ctx context.Context) error {
		_, err := a.api.UpdateViewContext(ctx, outputModal(string(meta), blocks), "", "", viewID)
		return err
	})
}

func outputModal(meta string, blocks []slackgo.Block) slackgo.ModalViewRequest {
	return slackgo.ModalViewRequest{
		Type:            slackgo.VTModal,
		Title:           plain(outputTitle),
		Close:           plain("Close"),
		CallbackID:      outputCallback,
		PrivateMetadata: meta,
		Blocks:          slackgo.Blocks{BlockSet: blocks},
	}
}

// outputBlocks renders a View output answer as modal blocks, within
// Slack's limits (3,000 characters a section, 100 blocks): the commands
// and the output are split over as many code sections as they need,
// never cut. An output that would not fit even so (the session keeps at
// most 16 KiB of one, so it takes an unusual amount of escaping) shows its
// head and tail, and the whole call comes back as a file for the thread,
// which the modal names.
//
// attached says whether that file reached the thread (the modal says so,
// or that it did not).
func outputBlocks(v chat.OutputView, attached bool) ([]slackgo.Block, *chat.Attachment) {
	switch {
	case v.Picker != nil:
		bs, _ := ToBlocks(*v.Picker)
		return bs, nil
	case v.Call == nil:
		return []slackgo.Block{section(Mrkdwn(v.Text))}, nil
	}
	c := *v.Call
	bs := []slackgo.Block{section("*" + escape(c.Heading()) + "*")}
	switch {
	case len(c.Commands) == 1:
		bs = append(bs, section("*Command*"))
	case len(c.Commands) > 1:
		bs = append(bs, section(fmt.Sprintf("*Commands (%d)*", len(c.Commands))))
	default:
		bs = append(bs, section("*Arguments* (`"+escape(c.Name)+"`)"))
	}
	for _, cmd := range c.Commands {
		for _, s := range codeSections(cmd, maxSectionText) {
			bs = append(bs, section(s))
		}
	}
	if len(c.Commands) == 0 {
		for _, s := range codeSections(c.Arguments, maxSectionText) {
			bs = append(bs, section(s))
		}
	}
	if !c.HasOutput {
		return append(bs, section("*Output*"), section("_"+chat.NoOutputText+"_")), nil
	}
	bs = append(bs, section(fmt.Sprintf("*Output* · %d characters, as the model was given it", len([]rune(c.Output)))))
	for _, s := range codeSections(c.Output, maxSectionText) {
		bs = append(bs, section(s))
	}
	note := slackgo.NewContextBlock("", mrkdwn("_Secrets the worker knows were replaced before the session kept this._"))
	if len(bs)+1 <= maxModalBlocks {
		return append(bs, note), nil
	}
	// The head and the tail, with a line between them naming the file
	// that holds everything.
	file := chat.Attachment{Name: c.FileName(), Title: c.Heading() + ": arguments and output", Content: c.FileText()}
	keep := maxModalBlocks - 2 // the line and the note
	head, tail := keep/2, keep-keep/2
	out := append([]slackgo.Block(nil), bs[:head]...)
	where := fmt.Sprintf("the whole call, arguments and output, is attached to the thread as `%s`", file.Name)
	if !attached {
		where = "the whole call could not be attached to the thread; /history shows the end of its output"
	}
	out = append(out, section(fmt.Sprintf("_… %d of %d parts are not shown here: %s._", len(bs)-head-tail, len(bs), where)))
	out = append(out, bs[len(bs)-tail:]...)
	return append(out, note), &file
}
