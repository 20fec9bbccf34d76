package discord_test

import (
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// Delete takes a status card out of the thread (DELETE message, through
// discordgo against the fake, a 429 waited out): the fake shows it as
// deleted, and deleting it again (Unknown Message) counts as done.
func TestDeleteTakesTheCardOut(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)

	ref, err := a.Post(t.Context(), th, chat.Card{Title: "⚙️ Running"})
	if err != nil {
		t.Fatal(err)
	}
	f.RateLimitNext(fakediscord.RouteDeleteMessage, 1, 0, false)
	if err := a.Delete(t.Context(), th, ref); err != nil {
		t.Fatal(err)
	}
	if m, ok := f.Message(ref); !ok || !m.Deleted {
		t.Fatalf("message after the delete: %+v (known %v), want it deleted", m, ok)
	}
	if f.RateLimited() != 1 {
		t.Errorf("429s answered: %d, want 1", f.RateLimited())
	}
	if err := a.Delete(t.Context(), th, ref); err != nil {
		t.Errorf("deleting a card that is gone already: %v, want done", err)
	}
}
