package slack_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/slack/slacktest"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
)

// FindCards finds this bot's status cards of one turn by the key the card
// carries in its first block's block_id (the real slack-go client reading
// conversations.replies from the fake): after an edit too, only cards
// posted after the message named, never another turn's card or a card
// without a key.
func TestFindCardsByKey(t *testing.T) {
	ctx := testCtx(t)
	env, th := posterEnv(t, slacktest.Options{})
	a := env.Adapter
	post := func(c chat.Card) string {
		t.Helper()
		ref, err := a.Post(ctx, th, c)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	before := post(chat.Card{Title: "⏳ Working", Key: "t1-100"}) // an earlier one, same key
	msg := env.Fake.Say(fakeslack.UserMessage{Channel: th.Channel, ThreadTS: th.Thread, User: "U0001", Text: "again"}).Message.TS
	first := post(chat.Card{Title: "⏳ Working", Key: "t1-100"})
	post(chat.Card{Title: "⏳ Working", Key: "t2-200"})
	post(chat.Card{Title: "no key"})
	second := post(chat.Card{Title: "⏳ Working", Key: "t1-100"})
	if err := a.Edit(ctx, th, first, chat.Card{Title: "✅ Done", Key: "t1-100", Blocks: []chat.Block{{Kind: chat.BlockText, Text: "`make`"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := a.FindCards(ctx, th, "t1-100", msg)
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
}

// Attack: another app in the channel (or a user's own token) posts a
// message whose first block carries a status card's block_id. FindCards
// takes only this bot's messages, so the core never records, draws on or
// offers approval buttons in a message someone else wrote and can edit.
func TestFindCardsIgnoresForgedCards(t *testing.T) {
	ctx := testCtx(t)
	env, th := posterEnv(t, slacktest.Options{})
	forged := `[{"type":"section","block_id":"sandbot-card:t1-100","text":{"type":"mrkdwn","text":"⏳ Working"}}]`
	env.Fake.Say(fakeslack.UserMessage{Channel: th.Channel, ThreadTS: th.Thread, BotID: "BOTHER", SubType: "bot_message", Text: "⏳ Working", Blocks: forged})
	env.Fake.Say(fakeslack.UserMessage{Channel: th.Channel, ThreadTS: th.Thread, User: "U0002", Text: "⏳ Working", Blocks: forged})
	ours, err := env.Adapter.Post(ctx, th, chat.Card{Title: "⏳ Working", Key: "t1-100"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := env.Adapter.FindCards(ctx, th, "t1-100", "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{ours}) {
		t.Errorf("FindCards = %q, want only the bot's own card %q", got, ours)
	}
}

// FindAnswer finds this bot's answer by the text of the first message
// PostText posts for it (the real slack-go client reading
// conversations.replies from the fake), only between the messages named:
// an equal answer of a later turn, past before, is not this turn's; a
// user's message with the same text is never the bot's answer; a long
// answer is found by its summary.
func TestFindAnswerByItsFirstMessage(t *testing.T) {
	ctx := testCtx(t)
	env, th := posterEnv(t, slacktest.Options{})
	a := env.Adapter
	say := func(text string) string {
		return env.Fake.Say(fakeslack.UserMessage{Channel: th.Channel, ThreadTS: th.Thread, User: "U0001", Text: text}).Message.TS
	}
	postText := func(md string) string {
		t.Helper()
		ref, err := a.PostText(ctx, th, md)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	turn1 := say("first")
	say("**Done.** All tests pass.") // a user quoting it: not the bot's
	ours := postText("**Done.** All tests pass.")
	turn2 := say("again")
	later := postText("**Done.** All tests pass.") // the next turn's, equal
	long := postText(strings.Repeat("A long answer line.\n", 800))

	find := func(md, after, before string) string {
		t.Helper()
		ref, err := a.FindAnswer(ctx, th, md, after, before)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	if got := find("**Done.** All tests pass.", turn1, turn2); got != ours {
		t.Errorf("FindAnswer between turn 1's message and turn 2's = %q, want the bot's answer %q", got, ours)
	}
	if got := find("**Done.** All tests pass.", ours, turn2); got != "" {
		t.Errorf("FindAnswer after the bot's answer, before turn 2's message = %q, want none (turn 2's equal answer is past the bound)", got)
	}
	if got := find("**Done.** All tests pass.", turn2, ""); got != later {
		t.Errorf("FindAnswer after turn 2's message = %q, want turn 2's answer %q", got, later)
	}
	if got := find("Not posted.", turn1, ""); got != "" {
		t.Errorf("FindAnswer of an answer never posted = %q, want none", got)
	}
	if got := find(strings.Repeat("A long answer line.\n", 800), turn2, ""); got != long {
		t.Errorf("FindAnswer of a long answer = %q, want its summary message %q", got, long)
	}
}
