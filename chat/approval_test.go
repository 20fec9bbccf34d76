package chat_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

func TestApprovalRoundTrip(t *testing.T) {
	discord := chat.Thread{Platform: "discord", Workspace: "1184759316318441472", Channel: "1184759317027262536", Thread: "1290418820165537862"}
	slack := chat.Thread{Platform: "slack", Workspace: "T0123ABCD", Channel: "C0456EFGH", Thread: "1700000000.000100"}
	odd := chat.Thread{Platform: "matrix", Workspace: "", Channel: "#room.with~dots%", Thread: "007"}
	for _, tc := range []struct {
		name   string
		th     chat.Thread
		callID string
	}{
		{"discord", discord, "call_Xy12AbCdEfGhIjKlMnOpQrSt"},
		{"slack", slack, "call_1"},
		{"odd characters", odd, "call.with.dots#and~tilde%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := chat.EncodeApproval(tc.th.ID(), tc.callID)
			if strings.ContainsAny(v, " :") {
				t.Errorf("value %q contains a space or ':'", v)
			}
			id, call, err := chat.DecodeApproval(v)
			if err != nil {
				t.Fatal(err)
			}
			if id != tc.th.ID() || call != tc.callID {
				t.Errorf("decoded (%q, %q), want (%q, %q)", id, call, tc.th.ID(), tc.callID)
			}
		})
	}
	// A Discord session and an OpenAI-style call ID fit Discord's custom_id
	// in the full form.
	v := chat.EncodeApproval(discord.ID(), "call_Xy12AbCdEfGhIjKlMnOpQrSt")
	if len(v) > chat.MaxDiscordButtonValue {
		t.Errorf("discord value is %d chars (%q), want <= %d", len(v), v, chat.MaxDiscordButtonValue)
	}
	if len(chat.ActionApproveAlways)+1+chat.MaxDiscordButtonValue != 100 {
		t.Errorf("MaxDiscordButtonValue does not leave room for the action ID")
	}
}

func TestEncodeApprovalCompactFallbacks(t *testing.T) {
	th := chat.Thread{Platform: "discord", Workspace: "1184759316318441472", Channel: "1184759317027262536", Thread: "1290418820165537862"}
	long := "chatcmpl-tool-" + strings.Repeat("a", 40)
	v, err := chat.EncodeApprovalCompact(th.ID(), long, chat.MaxDiscordButtonValue)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) > chat.MaxDiscordButtonValue || !strings.HasPrefix(v, "2.") {
		t.Fatalf("value %q (%d chars): want the thread-relative form within %d", v, len(v), chat.MaxDiscordButtonValue)
	}
	id, call, err := chat.DecodeApproval(v)
	if err != nil || id != "" || call != long {
		t.Fatalf("decoded (%q, %q, %v), want (\"\", %q, nil)", id, call, err, long)
	}

	huge := strings.Repeat("z", 200)
	v, err = chat.EncodeApprovalCompact(th.ID(), huge, chat.MaxDiscordButtonValue)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 18 || !strings.HasPrefix(v, "3.") {
		t.Fatalf("value %q: want the 18-char digest form", v)
	}
	_, call, err = chat.DecodeApproval(v)
	if err != nil || !strings.HasPrefix(call, chat.DigestPrefix) {
		t.Fatalf("digest decoded to (%q, %v)", call, err)
	}
	got, ok := chat.ResolveDigest(session.TurnState{Pending: &session.PendingApproval{CallID: huge}}, strings.TrimPrefix(call, chat.DigestPrefix))
	if !ok || got != huge {
		t.Fatalf("digest did not resolve to the pending call")
	}

	if _, err := chat.EncodeApprovalCompact(th.ID(), huge, 10); err == nil {
		t.Fatal("a limit below the digest form must fail")
	}
}

func TestDecodeApprovalRejectsGarbage(t *testing.T) {
	for _, v := range []string{"", "x", "1.s.a.b", "1.q.a.b.c.d", "9.abc", "2.", "1.s.a.b.c.", "1.s.a.b.c.d%ZZ", "1.s.#!!.b.c.d"} {
		if id, call, err := chat.DecodeApproval(v); err == nil {
			t.Errorf("DecodeApproval(%q) = (%q, %q), want an error", v, id, call)
		}
	}
}

func TestHandleActionUnauthorizedRepliesOnly(t *testing.T) {
	f := &chattest.Sessions{
		ApproveFn: func(string, session.ApproveRequest) (session.ApproveResponse, error) {
			return session.ApproveResponse{}, &chat.UserError{Msg: "@bob may not approve commands in this session"}
		},
	}
	c := newTestCore(t, f, newAutoClock(), nil)
	p := &recPoster{}
	var replies []string
	a := chat.Action{
		ID: chat.ActionApprove, Value: chat.EncodeApproval(testThread.ID(), "call_1"),
		User: chat.User{ID: "U2", Name: "bob"}, Thread: testThread,
		Reply: func(_ context.Context, text string) error { replies = append(replies, text); return nil },
	}
	if err := c.HandleAction(context.Background(), p, a); err != nil {
		t.Fatalf("a refused approval is not an internal error: %v", err)
	}
	if len(replies) != 1 || replies[0] != "@bob may not approve commands in this session" {
		t.Errorf("ephemeral replies = %q", replies)
	}
	// The bot's pre-check reads the session's info; this fake has none, so
	// the workflow judges.
	if got := f.Calls(); len(got) != 2 || got[0] != "info" || got[1] != "approve call_1 approve U2" {
		t.Errorf("session calls = %q, want the info pre-check and the approve update", got)
	}
	if ev := p.Events(); len(ev) != 0 {
		t.Errorf("thread changed after a refused approval: %+v", ev)
	}
}

func TestHandleActionDecisionsAndNudge(t *testing.T) {
	ts := &script{states: []session.TurnState{{Turn: 2, Version: 9, Status: session.StatusComplete, StatusRef: "m1", FinalRef: "t1"}}}
	f := &chattest.Sessions{
		ApproveFn: func(string, session.ApproveRequest) (session.ApproveResponse, error) {
			return session.ApproveResponse{}, nil
		},
		TurnStateFn: ts.next,
	}
	c := newTestCore(t, f, newAutoClock(), nil)
	for id, want := range map[string]string{
		chat.ActionApprove:       "approve call_7 approve U1",
		chat.ActionApproveAlways: "approve call_7 approve_always U1",
		chat.ActionReject:        "approve call_7 reject U1",
	} {
		before := len(f.Calls())
		// The thread-relative form needs the Action's thread.
		a := chat.Action{ID: id, Value: "2.call_7", User: chat.User{ID: "U1"}, Thread: testThread, Reply: func(context.Context, string) error {
			t.Errorf("unexpected ephemeral reply")
			return nil
		}}
		if err := c.HandleAction(context.Background(), &recPoster{}, a); err != nil {
			t.Fatal(err)
		}
		if got := f.Calls()[before:]; len(got) < 2 || got[0] != "info" || got[1] != want {
			t.Errorf("%s: calls %q, want the info pre-check, then %q", id, got, want)
		}
	}
	var replies []string
	a := chat.Action{ID: "launch_rockets", Value: "2.call_7", Thread: testThread, Reply: func(_ context.Context, s string) error {
		replies = append(replies, s)
		return nil
	}}
	if err := c.HandleAction(context.Background(), &recPoster{}, a); err != nil || len(replies) != 1 {
		t.Errorf("unknown action: err %v, replies %q", err, replies)
	}
}

// TestMayDecideBeforeAsking: a user who is neither the owner nor an
// approver is refused by the bot, worded for the action, without the
// session's approve update; the owner, a configured approver and an
// approver role holder pass.
func TestMayDecideBeforeAsking(t *testing.T) {
	f := &chattest.Sessions{
		InfoFn: func(id string) (session.Info, error) {
			return session.Info{WorkflowID: id, Owner: chat.User{ID: "U1", Name: "ann"}}, nil
		},
		ApproveFn: func(string, session.ApproveRequest) (session.ApproveResponse, error) {
			return session.ApproveResponse{}, nil
		},
	}
	c := newTestCore(t, f, newAutoClock(), func(cfg *chat.CoreConfig) {
		cfg.Start.Settings.Approvers = []string{"U9"}
		cfg.Start.Settings.ApproverRoles = []string{"R1"}
	})
	act := func(id string, u chat.User) chat.Action {
		return chat.Action{ID: id, Value: chat.EncodeApproval(testThread.ID(), "call_1"), User: u, Thread: testThread}
	}
	ctx := context.Background()
	for _, u := range []chat.User{{ID: "U1"}, {ID: "U9"}, {ID: "U5", Roles: []string{"R0", "R1"}}} {
		if r := c.MayDecide(ctx, act(chat.ActionReject, u)); r != "" {
			t.Errorf("%+v refused: %q", u, r)
		}
	}
	bob := chat.User{ID: "U2", Name: "bob", Roles: []string{"R0"}}
	if r, want := c.MayDecide(ctx, act(chat.ActionReject, bob)), "You may not reject commands in this session: only its owner (ann) and approvers may."; r != want {
		t.Errorf("reject refusal = %q, want %q", r, want)
	}
	if r := c.MayDecide(ctx, act(chat.ActionApprove, bob)); !strings.HasPrefix(r, "You may not approve commands") {
		t.Errorf("approve refusal = %q", r)
	}

	var replies []string
	a := act(chat.ActionReject, bob)
	a.Reply = func(_ context.Context, s string) error { replies = append(replies, s); return nil }
	if err := c.HandleAction(ctx, &recPoster{}, a); err != nil {
		t.Fatal(err)
	}
	for _, call := range f.Calls() {
		if strings.HasPrefix(call, "approve") {
			t.Errorf("the session was asked to decide for an unauthorised user: %q", f.Calls())
		}
	}
	if len(replies) != 1 || !strings.Contains(replies[0], "may not reject") {
		t.Errorf("replies = %q", replies)
	}
}
