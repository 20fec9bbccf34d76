package discord_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

func emojis(rs []fakediscord.Reaction) []string {
	var out []string
	for _, r := range rs {
		if r.Me {
			out = append(out, r.Emoji)
		}
	}
	return out
}

func TestReactAndUnreact(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)
	ctx := t.Context()

	// The mention that opened the session lives in the parent channel,
	// under the thread's own ID.
	mention := rec.Record().Messages[0]
	if mention.EventID != th.Thread {
		t.Fatalf("mention %s, thread %s", mention.EventID, th.Thread)
	}
	if err := a.React(ctx, th, mention.EventID, "👀"); err != nil {
		t.Fatal(err)
	}
	if got := emojis(f.Reactions(mention.EventID)); len(got) != 1 || got[0] != "👀" {
		t.Fatalf("reactions on the mention = %v", got)
	}
	// A message in the thread is reacted to in the thread.
	um, err := f.UserMessage(th.Thread, alice, "and run the linter")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.React(ctx, th, um.ID, "👀"); err != nil {
		t.Fatal(err)
	}
	// 👀 → ✅, as the turn ends; the core's other ends; a custom emoji in
	// its message form; a keycap, whose '#' must be escaped to reach the
	// route at all.
	for _, e := range []string{chat.ReactionDone, chat.ReactionFailed, chat.ReactionStopped, "<:sandbot:1200000000000000001>", "#️⃣"} {
		if err := a.React(ctx, th, um.ID, e); err != nil {
			t.Fatalf("react %s: %v", e, err)
		}
	}
	if err := a.Unreact(ctx, th, um.ID, chat.ReactionWorking); err != nil {
		t.Fatal(err)
	}
	// Unreacting what the bot never put there is no error.
	if err := a.Unreact(ctx, th, um.ID, "🚫"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(emojis(f.Reactions(um.ID)), " "); got != "✅ ❌ ⏹️ sandbot:1200000000000000001 #️⃣" {
		t.Fatalf("reactions on the thread message = %q", got)
	}
	var paths []string
	for _, r := range f.Requests() {
		if strings.Contains(r.Path, "/reactions/") {
			paths = append(paths, r.Method+" "+r.Path)
		}
	}
	want := []string{
		"PUT /api/v9/channels/" + th.Channel + "/messages/" + mention.EventID + "/reactions/👀/@me",
		"PUT /api/v9/channels/" + th.Thread + "/messages/" + um.ID + "/reactions/👀/@me",
	}
	if len(paths) != 9 || paths[0] != want[0] || paths[1] != want[1] || !strings.HasPrefix(paths[7], "DELETE ") {
		t.Fatalf("reaction requests = %q", paths)
	}
	evs := f.ReactionEvents()
	if len(evs) != 8 || !evs[7].Removed || evs[7].Emoji != "👀" || evs[7].MessageID != um.ID {
		t.Fatalf("reaction log = %+v", evs)
	}
}

func TestReactErrorsAndPacing(t *testing.T) {
	t.Parallel()
	f := fakediscord.Start(t, fakediscord.Options{})
	rec := &chattest.Core{}
	a := start(t, config(f), rec)
	th := startSession(t, f, rec)
	ctx := t.Context()
	um, _ := f.UserMessage(th.Thread, alice, "hi")

	// A 429 is waited out like on every other route; the reaction lands once.
	f.RateLimitNext(fakediscord.RouteAddReaction, 2, 0, false)
	if err := a.React(ctx, th, um.ID, "👀"); err != nil {
		t.Fatal(err)
	}
	if n, got := f.RateLimited(), emojis(f.Reactions(um.ID)); n != 2 || len(got) != 1 {
		t.Fatalf("429s %d, reactions %v", n, got)
	}

	// Discord's own errors come back wrapped, with their codes.
	cases := []struct {
		name, ref, emoji string
		status, code     int
	}{
		{"unknown message", "1399999999999999999", "✅", http.StatusNotFound, fakediscord.CodeUnknownMessage},
		{"shortcode", um.ID, ":white_check_mark:", http.StatusBadRequest, fakediscord.CodeUnknownEmoji},
	}
	for _, c := range cases {
		for verb, call := range map[string]func() error{
			"React":   func() error { return a.React(ctx, th, c.ref, c.emoji) },
			"Unreact": func() error { return a.Unreact(ctx, th, c.ref, c.emoji) },
		} {
			err := call()
			var re *discordgo.RESTError
			if !errors.As(err, &re) || re.Response.StatusCode != c.status || re.Message == nil || re.Message.Code != c.code {
				t.Fatalf("%s, %s: err = %v, want %d/%d", c.name, verb, err, c.status, c.code)
			}
			if !strings.HasPrefix(err.Error(), "discord: ") {
				t.Fatalf("%s, %s: error %q lacks the operation prefix", c.name, verb, err)
			}
		}
	}

	// What cannot be a reaction is refused before any request.
	before := len(f.Requests())
	if err := a.React(ctx, th, um.ID, " "); err == nil {
		t.Fatal("blank emoji accepted")
	}
	if err := a.Unreact(ctx, th, "", "✅"); err == nil {
		t.Fatal("blank message accepted")
	}
	if n := len(f.Requests()); n != before {
		t.Fatalf("%d requests for refused reactions", n-before)
	}
}
