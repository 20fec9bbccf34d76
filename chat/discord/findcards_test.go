package discord_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/chat/discord"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// keyed is a status card of turn key, with the footer every turn card has
// (a card's key rides on its embed).
func keyed(title, key string) chat.Card {
	return chat.Card{Title: title, Key: key, Blocks: []chat.Block{{Kind: chat.BlockContext, Text: "turn 1 · gpt"}}}
}

// FindCards finds this bot's status cards of one turn by the key its
// embed's url carries (discordgo reading GET messages?after= from the
// fake, which sorts each page newest first as Discord does): after an
// edit too, across pages, only cards newer than the message named, never
// another turn's card or a card without a key; the key is shown nowhere.
func TestFindCardsByKey(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)
	ctx := t.Context()
	post := func(c chat.Card) string {
		t.Helper()
		ref, err := a.Post(ctx, th, c)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	before := post(keyed("⏳ Working", "t1-100")) // an earlier one, same key
	msg, err := f.UserMessage(th.Thread, fakediscord.Member{User: fakediscord.User{ID: "1000000000000000002", Username: "ada"}}, "again")
	if err != nil {
		t.Fatal(err)
	}
	first := post(keyed("⏳ Working", "t1-100"))
	post(keyed("⏳ Working", "t2-200"))
	post(chat.Card{Title: "no key", Blocks: []chat.Block{{Kind: chat.BlockContext, Text: "x"}}})
	for range 120 { // the next card is on the second page
		if _, err := a.PostText(ctx, th, "filler"); err != nil {
			t.Fatal(err)
		}
	}
	second := post(keyed("⏳ Working", "t1-100"))
	if err := a.Edit(ctx, th, first, chat.Card{Title: "✅ Done", Key: "t1-100", Blocks: []chat.Block{{Kind: chat.BlockText, Text: "`make`"}, {Kind: chat.BlockContext, Text: "turn 1"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := a.FindCards(ctx, th, "t1-100", msg.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{first, second}; !slices.Equal(got, want) {
		t.Errorf("FindCards after the user's message = %q, want %q", got, want)
	}
	got, err = a.FindCards(ctx, th, "t1-100", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{before, first, second}; !slices.Equal(got, want) {
		t.Errorf("FindCards in the whole thread = %q, want %q", got, want)
	}
	if got, err := a.FindCards(ctx, th, "t3-300", ""); err != nil || len(got) != 0 {
		t.Errorf("FindCards of a key never posted = %q, %v", got, err)
	}
	m, _ := f.Message(first)
	if text := m.Content + m.EmbedText() + strings.Join(m.EmbedFooters(), ""); text == "" || strings.Contains(text, "t1-100") {
		t.Errorf("the card shows its key, or nothing: %q", text)
	}
}

// Attack: another app in the channel posts a message whose embed carries
// a status card's key url. FindCards takes only this bot's messages, so
// the core never records, draws on or offers approval buttons in a
// message someone else wrote and can edit.
func TestFindCardsIgnoresForgedCards(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)
	forged, _ := json.Marshal([]map[string]any{{"type": "rich", "description": "⏳ Working", "url": discord.CardKeyURL("t1-100")}})
	if _, err := f.AppMessage(th.Thread, fakediscord.User{ID: "1000000000000000777", Username: "otherbot"}, "⏳ Working", forged); err != nil {
		t.Fatal(err)
	}
	ours, err := a.Post(t.Context(), th, keyed("⏳ Working", "t1-100"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.FindCards(t.Context(), th, "t1-100", "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{ours}) {
		t.Errorf("FindCards = %q, want only the bot's own card %q", got, ours)
	}
}

// FindAnswer finds this bot's answer by the content of the first message
// PostText posts for it (discordgo reading GET messages?after= from the
// fake), only between the messages named: an equal answer of a later
// turn, past before, is not this turn's; a user's message with the same
// text is never the bot's answer; an answer too long for its parts is
// found by its preview.
func TestFindAnswerByItsFirstMessage(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)
	ctx := t.Context()
	say := func(text string) string {
		t.Helper()
		m, err := f.UserMessage(th.Thread, fakediscord.Member{User: fakediscord.User{ID: "1000000000000000002", Username: "ada"}}, text)
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	postText := func(md string) string {
		t.Helper()
		ref, err := a.PostText(ctx, th, md)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	const answer = "**Done.** All tests pass."
	long := strings.Repeat("A long answer line.\n", 600) // past 4 parts of 2,000
	turn1 := say("first")
	say(answer) // a user quoting it: not the bot's
	ours := postText(answer)
	turn2 := say("again")
	later := postText(answer) // the next turn's, equal
	longRef := postText(long)

	find := func(md, after, before string) string {
		t.Helper()
		ref, err := a.FindAnswer(ctx, th, md, after, before)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	if got := find(answer, turn1, turn2); got != ours {
		t.Errorf("FindAnswer between turn 1's message and turn 2's = %q, want the bot's answer %q", got, ours)
	}
	if got := find(answer, ours, turn2); got != "" {
		t.Errorf("FindAnswer after the bot's answer, before turn 2's message = %q, want none (turn 2's equal answer is past the bound)", got)
	}
	if got := find(answer, turn2, ""); got != later {
		t.Errorf("FindAnswer after turn 2's message = %q, want turn 2's answer %q", got, later)
	}
	if got := find("Not posted.", turn1, ""); got != "" {
		t.Errorf("FindAnswer of an answer never posted = %q, want none", got)
	}
	if got := find(long, turn2, ""); got != longRef {
		t.Errorf("FindAnswer of a long answer = %q, want its preview message %q", got, longRef)
	}
}
