package chat_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// attachPoster is a recPoster that can attach files; attach fails while
// fail is set.
type attachPoster struct {
	*recPoster
	fail atomic.Bool
}

func (p *attachPoster) Attach(_ context.Context, _ chat.Thread, a chat.Attachment) error {
	if p.fail.Load() {
		return errBoom
	}
	p.add(posterEvent{Op: "attach", Ref: a.Name, Text: a.Content})
	return nil
}

// TestWatcherAttachesBeforeShowingTheApproval: the card of a command too
// long to show goes up only after its file, and not while the file cannot
// be attached, so no one is offered an approval of text they cannot read.
func TestWatcherAttachesBeforeShowingTheApproval(t *testing.T) {
	long := "echo " + strings.Repeat("a", 3000) + " ; touch LONGTAIL.txt"
	pending := awaiting(long)
	pending.Version = 2
	states := []session.TurnState{{Turn: 0, Status: session.StatusIdle}}
	for range 6 {
		states = append(states, pending)
	}
	fin := done(1, 3, "ok")
	states = append(states, fin)
	s := &script{states: states}
	p := &attachPoster{recPoster: &recPoster{}}
	p.fail.Store(true)
	var polls atomic.Int64
	f := &chattest.Sessions{SendFn: sendTurn(1, false), TurnStateFn: func(id string) (session.TurnState, error) {
		if polls.Add(1) == 4 {
			p.fail.Store(false) // the platform recovers
		}
		return s.next(id)
	}}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, nil)
	if err := c.HandleMessage(context.Background(), p, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)

	ev := p.Events()
	attached := -1
	for i, e := range ev {
		switch {
		case e.Op == "attach":
			if attached >= 0 {
				t.Fatalf("attached twice: %+v", ev)
			}
			attached = i
			if !strings.Contains(e.Text, long) {
				t.Fatalf("the file does not hold the whole command")
			}
		case (e.Op == "post" || e.Op == "edit") && hasApproveButton(e.Card):
			if attached < 0 {
				t.Fatalf("event %d shows the approval before its file was attached: %+v", i, ev)
			}
			if !strings.Contains(allText(e.Card), "Long command (3026 characters)") {
				t.Fatalf("approval card without the notice:\n%s", allText(e.Card))
			}
		}
	}
	if attached < 0 {
		t.Fatalf("nothing attached: %+v", ev)
	}
}

// TestWatcherAttachmentFallback: a Poster that cannot attach gets the
// file's text as a message, before the card, in a fence it cannot close.
func TestWatcherAttachmentFallback(t *testing.T) {
	long := "echo ``` " + strings.Repeat("b", 3000) + " ; touch LONGTAIL.txt"
	pending := awaiting(long)
	s := &script{states: []session.TurnState{{Turn: 0, Status: session.StatusIdle}, pending, pending, done(1, 3, "ok")}}
	p := &recPoster{}
	f := &chattest.Sessions{SendFn: sendTurn(1, false), TurnStateFn: s.next}
	c := newTestCore(t, f, newAutoClock(), nil)
	if err := c.HandleMessage(context.Background(), p, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	ev := p.Events()
	text := -1
	for i, e := range ev {
		if e.Op == "text" && strings.Contains(e.Text, long) {
			text = i
			if !strings.Contains(e.Text, "````\n") {
				t.Errorf("the fence can be closed by the command:\n%.200s", e.Text)
			}
		}
		if (e.Op == "post" || e.Op == "edit") && hasApproveButton(e.Card) && text < 0 {
			t.Fatalf("approval shown before the command's text: %+v", ev)
		}
	}
	if text < 0 {
		t.Fatalf("the command's text was never posted: %+v", ev)
	}
}
