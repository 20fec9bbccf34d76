package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// discordAnswer waits until interaction id is answered and returns the
// answer: the deferred response once edited in place (a private answer),
// or the last follow-up (a public answer replaces the private placeholder,
// and refusals of clicks come as follow-ups).
func (e *discordEnv) discordAnswer(id string) fakediscord.Message {
	e.t.Helper()
	var got fakediscord.Message
	e.wait("interaction "+id+" answered", func() bool {
		in, _ := e.f.Interaction(id)
		if n := len(in.FollowUps); n > 0 {
			got, _ = e.f.Message(in.FollowUps[n-1])
			return true
		}
		m, ok := e.f.Message(in.OriginalID)
		got = m
		return ok && in.ResponseType == fakediscord.CallbackDeferMessage && !m.Loading() && !m.Deleted
	})
	return got
}

// publicDeferrals lists the bodies of deferred responses (type 5) sent
// without the ephemeral flag: a public "thinking…" in the channel.
func (e *discordEnv) publicDeferrals() []string {
	var out []string
	for _, r := range e.f.Requests() {
		if !strings.HasSuffix(r.Path, "/callback") {
			continue
		}
		var cb struct {
			Type int `json:"type"`
			Data struct {
				Flags int `json:"flags"`
			} `json:"data"`
		}
		if json.Unmarshal(r.Body, &cb) == nil && cb.Type == fakediscord.CallbackDeferMessage && cb.Data.Flags&fakediscord.FlagEphemeral == 0 {
			out = append(out, string(r.Body))
		}
	}
	return out
}

// TestDiscordEdgeCommandVisibility: slash commands are deferred privately;
// /status (private, as on Slack) and /backend (private when it shows or
// refuses) edit the placeholder, and /stop's public answer replaces it.
// No public "thinking…" ever shows. The /status card's footer is plain
// text (Discord renders no Markdown there) while its body keeps Markdown.
func TestDiscordEdgeCommandVisibility(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch should-not-exist")))
	th := e.mention(discordAlice, "make a file")
	ref := e.statusRef(th, 1)
	e.approvalCard(ref)

	private := func(what, id string) fakediscord.Message {
		t.Helper()
		got := e.discordAnswer(id)
		in := e.interaction(id)
		if in.ResponseType != fakediscord.CallbackDeferMessage || in.ResponseFlags&fakediscord.FlagEphemeral == 0 {
			t.Fatalf("%s: deferred with callback %d flags %d, want a private deferral", what, in.ResponseType, in.ResponseFlags)
		}
		if !got.Ephemeral() || got.ID != in.OriginalID || len(in.FollowUps) != 0 {
			t.Fatalf("%s: want the private placeholder edited into the answer, got %+v (interaction %+v)", what, got, in)
		}
		return got
	}

	status := private("/status", e.slash(th, discordAlice, "status"))
	if fs := status.EmbedFooters(); len(fs) != 1 || !strings.Contains(fs[0], th.ID()) || strings.ContainsAny(fs[0], "`*") {
		t.Fatalf("/status footer = %q, want plain text naming %s", fs, th.ID())
	}
	if !strings.Contains(status.EmbedText(), "**Backend:** local") {
		t.Fatalf("/status body lost its Markdown:\n%s", status.EmbedText())
	}

	if b := private("/backend", e.slash(th, discordAlice, "backend")); !strings.Contains(b.Content, "local") {
		t.Fatalf("/backend answer = %q", b.Content)
	}
	if b := private("/backend local", e.slash(th, discordAlice, "backend", fakediscord.CommandOption{Name: "name", Value: "local"})); !strings.Contains(b.Content, "already") {
		t.Fatalf("/backend local answer = %q", b.Content)
	}

	stop := e.slash(th, discordAlice, "stop")
	e.waitTurn(th, "stopped turn", done)
	got := e.discordAnswer(stop)
	in := e.interaction(stop)
	orig, _ := e.f.Message(in.OriginalID)
	if in.ResponseFlags&fakediscord.FlagEphemeral == 0 || !orig.Ephemeral() || !orig.Deleted {
		t.Fatalf("/stop: the private placeholder was not replaced: %+v, %+v", in, orig)
	}
	if got.Ephemeral() || got.ChannelID != th.Thread || !strings.Contains(got.Content, "Stopped") {
		t.Fatalf("/stop: public answer = %+v", got)
	}

	if pd := e.publicDeferrals(); len(pd) != 0 {
		t.Fatalf("public deferrals were sent: %q", pd)
	}
}

// TestDiscordEdgeRejectModalShapes: a reason modal that comes back without
// its input decides nothing and says so privately, the approval still
// waits; one that comes back without the interaction's message is
// deferred privately, rejects, and that private "thinking…" is replaced by
// a confirmation rather than left pending.
func TestDiscordEdgeRejectModalShapes(t *testing.T) {
	e := newDiscordEnv(t, discordOptions{})
	e.s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("touch rejected-ran")),
		fakeopenai.FinalStep("Not run."),
	)
	th := e.mention(discordAlice, "make a file")
	ref := e.statusRef(th, 1)
	buttons := e.approvalCard(ref)

	openModal := func() string {
		t.Helper()
		rid := e.click(ref, discordAlice, buttons[chat.ActionReject])
		if in := e.waitAcked(rid); in.ResponseType != fakediscord.CallbackModal {
			t.Fatalf("Reject answered with callback %d, want a modal", in.ResponseType)
		}
		return rid
	}

	sid, err := e.f.SubmitModalWith(openModal(), discordAlice, fakediscord.ModalSubmission{
		Values: map[string]string{"why": "an older form"}, Inputs: []string{"why"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.discordAnswer(sid); !got.Ephemeral() || !strings.Contains(got.Content, "nothing was decided") {
		t.Fatalf("answer to a form without its input = %+v", got)
	}
	if ts := e.waitTurn(th, "still awaiting approval", func(session.TurnState) bool { return true }); ts.Pending == nil || ts.Status != session.StatusAwaitingApproval {
		t.Fatalf("a form without its input decided: %s", dump(ts))
	}

	sid, err = e.f.SubmitModalWith(openModal(), discordAlice, fakediscord.ModalSubmission{
		Values: map[string]string{"reason": "not in this repo"}, NoMessage: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	got := e.discordAnswer(sid)
	in := e.interaction(sid)
	if in.ResponseType != fakediscord.CallbackDeferMessage || in.ResponseFlags&fakediscord.FlagEphemeral == 0 {
		t.Fatalf("submit without a message: callback %d flags %d, want a private deferral", in.ResponseType, in.ResponseFlags)
	}
	if !got.Ephemeral() || got.ID != in.OriginalID || !strings.HasPrefix(got.Content, "Rejected") {
		t.Fatalf("submit without a message: answer = %+v", got)
	}
	end := e.waitDone(th, 1)
	c := end.ToolCalls[0]
	if c.Status != session.CallRejected || c.Decision == nil || c.Decision.Decision != session.DecisionReject ||
		c.Decision.Reason != "not in this repo" || c.Decision.User.ID != discordAlice.User.ID {
		t.Fatalf("rejected call: %s", dump(c))
	}
	if _, ok := workspaceFile(t, e.s, th, "rejected-ran"); ok {
		t.Fatal("the rejected command ran")
	}
}
