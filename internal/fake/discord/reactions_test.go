package fakediscord_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/bwmarrin/discordgo"

	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

func TestBotReactionsAddRemoveAndShow(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, allIntents|discordgo.IntentsGuildMessageReactions)
	adds := make(chan *discordgo.MessageReactionAdd, 8)
	removes := make(chan *discordgo.MessageReactionRemove, 8)
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.MessageReactionAdd) { adds <- r })
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.MessageReactionRemove) { removes <- r })
	open(t, s)
	um, err := f.UserMessage(fakediscord.DefaultChannelID, alice, "hello")
	if err != nil {
		t.Fatal(err)
	}
	// The emoji travels URL-encoded; the fake sees it decoded. A keycap
	// starts with '#', which unescaped would end the path.
	for _, e := range []string{"👀", "#️⃣", "sandbot:1200000000000000001"} {
		if err := s.MessageReactionAdd(fakediscord.DefaultChannelID, um.ID, url.PathEscape(e)); err != nil {
			t.Fatalf("react %s: %v", e, err)
		}
	}
	// Reacting again is a no-op, as on Discord.
	if err := s.MessageReactionAdd(fakediscord.DefaultChannelID, um.ID, url.PathEscape("👀")); err != nil {
		t.Fatal(err)
	}
	rs := f.Reactions(um.ID)
	if len(rs) != 3 || rs[0].Emoji != "👀" || rs[1].Emoji != "#️⃣" || rs[2].Emoji != "sandbot:1200000000000000001" ||
		len(rs[0].Users) != 1 || rs[0].Users[0] != f.AppID() || !rs[0].Me {
		t.Fatalf("reactions = %+v", rs)
	}
	if ev := recv(t, adds, "MESSAGE_REACTION_ADD"); ev.MessageID != um.ID || ev.UserID != f.AppID() || ev.Emoji.Name != "👀" || ev.GuildID != fakediscord.DefaultGuildID {
		t.Fatalf("add event = %+v", ev.MessageReaction)
	}
	if ev := recv(t, adds, "second MESSAGE_REACTION_ADD"); ev.Emoji.Name != "#️⃣" {
		t.Fatalf("add event = %+v", ev.MessageReaction)
	}
	if ev := recv(t, adds, "custom MESSAGE_REACTION_ADD"); ev.Emoji.Name != "sandbot" || ev.Emoji.ID != "1200000000000000001" {
		t.Fatalf("custom add event = %+v", ev.Emoji)
	}
	// The message object carries them, "me" set for the bot's own.
	got, err := s.ChannelMessage(fakediscord.DefaultChannelID, um.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Reactions) != 3 || got.Reactions[0].Count != 1 || !got.Reactions[0].Me || got.Reactions[0].Emoji.Name != "👀" {
		t.Fatalf("message reactions = %+v", got.Reactions)
	}

	if err := s.MessageReactionRemove(fakediscord.DefaultChannelID, um.ID, url.PathEscape("👀"), "@me"); err != nil {
		t.Fatal(err)
	}
	// Taking back a reaction the bot does not have is 204 too.
	if err := s.MessageReactionRemove(fakediscord.DefaultChannelID, um.ID, url.PathEscape("✅"), "@me"); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, removes, "MESSAGE_REACTION_REMOVE"); ev.Emoji.Name != "👀" || ev.UserID != f.AppID() {
		t.Fatalf("remove event = %+v", ev.MessageReaction)
	}
	if rs := f.Reactions(um.ID); len(rs) != 2 || rs[0].Emoji != "#️⃣" {
		t.Fatalf("after removal = %+v", rs)
	}
	evs := f.ReactionEvents()
	if len(evs) != 4 || evs[3].Emoji != "👀" || !evs[3].Removed || evs[0].Removed || evs[0].At.IsZero() || evs[0].ChannelID != fakediscord.DefaultChannelID {
		t.Fatalf("reaction log = %+v", evs)
	}
}

func TestReactionErrorsAreDiscords(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, 0)
	um, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, "hello")
	cases := []struct {
		name              string
		channel, message  string
		emoji             string
		wantStatus, wantC int
	}{
		{"unknown message", fakediscord.DefaultChannelID, "1399999999999999999", "👀", http.StatusNotFound, fakediscord.CodeUnknownMessage},
		{"message of another channel", f.AddDM(alice.User), um.ID, "👀", http.StatusNotFound, fakediscord.CodeUnknownMessage},
		{"unknown channel", "5999999999999999999", um.ID, "👀", http.StatusNotFound, fakediscord.CodeUnknownChannel},
		{"shortcode", fakediscord.DefaultChannelID, um.ID, ":eyes:", http.StatusBadRequest, fakediscord.CodeUnknownEmoji},
		{"word", fakediscord.DefaultChannelID, um.ID, "eyes", http.StatusBadRequest, fakediscord.CodeUnknownEmoji},
	}
	for _, c := range cases {
		err := s.MessageReactionAdd(c.channel, c.message, url.PathEscape(c.emoji))
		if st, code := restCode(t, err); st != c.wantStatus || code != c.wantC {
			t.Errorf("%s: add answered %d/%d, want %d/%d", c.name, st, code, c.wantStatus, c.wantC)
		}
		err = s.MessageReactionRemove(c.channel, c.message, url.PathEscape(c.emoji), "@me")
		if st, code := restCode(t, err); st != c.wantStatus || code != c.wantC {
			t.Errorf("%s: remove answered %d/%d, want %d/%d", c.name, st, code, c.wantStatus, c.wantC)
		}
	}
	// A deleted message is unknown too.
	bm, err := s.ChannelMessageSend(fakediscord.DefaultChannelID, "bye")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ChannelMessageDelete(fakediscord.DefaultChannelID, bm.ID); err != nil {
		t.Fatal(err)
	}
	if st, code := restCode(t, s.MessageReactionAdd(fakediscord.DefaultChannelID, bm.ID, url.PathEscape("👀"))); st != http.StatusNotFound || code != fakediscord.CodeUnknownMessage {
		t.Fatalf("deleted message: %d/%d", st, code)
	}
	// Messages leaves it out; DeletedMessages keeps it, with when it went.
	for _, m := range f.Messages(fakediscord.DefaultChannelID) {
		if m.ID == bm.ID {
			t.Errorf("Messages lists the deleted message %s", bm.ID)
		}
	}
	if gone := f.DeletedMessages(fakediscord.DefaultChannelID); len(gone) != 1 || gone[0].ID != bm.ID || gone[0].Content != "bye" || gone[0].DeletedAt.Before(gone[0].Created) {
		t.Errorf("deleted messages = %+v, want %s with its delete time", gone, bm.ID)
	}
	if len(f.ReactionEvents()) != 0 || len(f.Reactions(um.ID)) != 0 {
		t.Fatalf("refused reactions were stored: %+v", f.ReactionEvents())
	}

	// At most 20 different emoji on one message. (Plain requests: discordgo
	// paces reactions at 5 a second per channel.)
	for i := range fakediscord.MaxReactions {
		u := f.URL() + "/api/v9/channels/" + fakediscord.DefaultChannelID + "/messages/" + um.ID + "/reactions/" +
			url.PathEscape("e"+strconv.Itoa(i)+":"+strconv.Itoa(1200000000000000000+i)) + "/@me"
		req, _ := http.NewRequest(http.MethodPut, u, nil)
		req.Header.Set("Authorization", "Bot "+f.Token())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("reaction %d: %s", i, resp.Status)
		}
	}
	if st, code := restCode(t, s.MessageReactionAdd(fakediscord.DefaultChannelID, um.ID, url.PathEscape("👀"))); st != http.StatusBadRequest || code != fakediscord.CodeMaxReactions {
		t.Fatalf("21st emoji: %d/%d", st, code)
	}
}

func TestReactionRateLimitIsWaitedOut(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	s := session(t, f, 0)
	um, _ := f.UserMessage(fakediscord.DefaultChannelID, alice, "hello")
	f.RateLimitNext(fakediscord.RouteAddReaction, 1, 0, false)
	if err := s.MessageReactionAdd(fakediscord.DefaultChannelID, um.ID, url.PathEscape("👀")); err != nil {
		t.Fatal(err)
	}
	if f.RateLimited() != 1 || len(f.Reactions(um.ID)) != 1 {
		t.Fatalf("429s %d, reactions %+v", f.RateLimited(), f.Reactions(um.ID))
	}
}
