package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	fakediscord "github.com/sandbot/sandbot/internal/fake/discord"
)

// The adapter takes no HTTP interactions (no Ed25519 endpoint): every
// event, interactions included, arrives over the gateway, where discordgo
// decodes a dispatch's d field into the event's type, hands it to its
// state cache, then to the adapter's handlers (SyncEvents: in order, on the
// read loop, where a panic ends the process). dispatch does exactly that
// for a fuzzed d.

// fuzzEvents are the gateway dispatches the adapter handles.
var fuzzEvents = []string{"MESSAGE_CREATE", "INTERACTION_CREATE", "THREAD_CREATE"}

// dispatch hands raw to the adapter as discordgo's read loop hands a
// dispatch of type typ: decoded into the event struct (passed on even if
// decoding fails, as discordgo does), through the state cache, to the
// handler. It returns once the work the event started has finished, or
// false if discordgo's own state cache panicked on the event before the
// adapter saw it (discordgo v0.29.0 does on THREAD_CREATE with d: null, in
// State.ChannelAdd): that is outside the adapter's reach.
func (a *Adapter) dispatch(typ string, raw []byte) bool {
	var ev any
	switch typ {
	case "MESSAGE_CREATE":
		ev = &discordgo.MessageCreate{}
	case "INTERACTION_CREATE":
		ev = &discordgo.InteractionCreate{}
	case "THREAD_CREATE":
		ev = &discordgo.ThreadCreate{}
	default:
		return true
	}
	_ = json.Unmarshal(raw, ev)
	if !stateSurvives(a.s, ev) {
		return false
	}
	switch ev := ev.(type) {
	case *discordgo.MessageCreate:
		a.onMessageCreate(a.s, ev)
	case *discordgo.InteractionCreate:
		a.onInteractionCreate(a.s, ev)
	case *discordgo.ThreadCreate:
		a.onThreadCreate(a.s, ev)
	}
	a.inflight.Wait()
	a.queues.wait()
	return true
}

// stateSurvives runs discordgo's state handler on ev and reports whether
// it returned without panicking.
func stateSurvives(s *discordgo.Session, ev any) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_ = s.State.OnInterface(s, ev)
	return true
}

// gatewayFuzz is one adapter on a fake Discord, shared by every input.
type gatewayFuzz struct {
	fake *fakediscord.Server
	a    *Adapter
	core *chattest.Core

	mu   sync.Mutex
	seen [][2]string // dispatches captured off the gateway: type, d
}

func newGatewayFuzz(f testing.TB) *gatewayFuzz {
	f.Helper()
	g := &gatewayFuzz{fake: fakediscord.Start(f, fakediscord.Options{}), core: &chattest.Core{}}
	a, err := New(Config{
		Token: g.fake.Token(), ApplicationID: g.fake.AppID(), GuildID: fakediscord.DefaultGuildID,
		MessageContentIntent: true, APIBase: g.fake.URL(), Backends: []string{"local"},
	}, nil)
	if err != nil {
		f.Fatal(err)
	}
	g.a = a
	// Every dispatch's raw d, as the gateway sent it: the seeds.
	a.s.AddHandler(func(_ *discordgo.Session, e *discordgo.Event) {
		g.mu.Lock()
		g.seen = append(g.seen, [2]string{e.Type, string(e.RawData)})
		g.mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, g.core) }()
	f.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-a.Ready():
	case err := <-done:
		f.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		f.Fatal("adapter not ready")
	}
	return g
}

// captured waits until n dispatches of typ were seen and returns them.
// The capture is discordgo's, not the fake's, so it polls (bounded).
func (g *gatewayFuzz) captured(f *testing.F, typ string, n int) []string {
	f.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out []string
		g.mu.Lock()
		for _, s := range g.seen {
			if s[0] == typ {
				out = append(out, s[1])
			}
		}
		g.mu.Unlock()
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			f.Fatalf("saw %d %s dispatches, want %d", len(out), typ, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// discordState is what an input may change: what the core was handed and
// what the adapter wrote to Discord.
type discordState struct{ messages, commands, actions, writes int }

func (g *gatewayFuzz) state() discordState {
	r := g.core.Record()
	s := discordState{messages: len(r.Messages), commands: len(r.Commands), actions: len(r.Actions)}
	for _, q := range g.fake.Requests() {
		if q.Method != http.MethodGet {
			s.writes++
		}
	}
	return s
}

// FuzzGatewayDispatch hands the adapter fuzzed MESSAGE_CREATE,
// INTERACTION_CREATE and THREAD_CREATE dispatches, seeded with what the
// fake gateway really sent for a mention, a reply in the session thread, a
// DM, a slash command, button clicks and a modal submit. Whatever d holds
// (it is JSON: the frame around it must parse), the adapter must not panic
// (that would end the bot) or leak goroutines, and may hand the core only
// messages and decisions with an event ID, a user and a place.
func FuzzGatewayDispatch(f *testing.F) {
	g := newGatewayFuzz(f)
	fake := g.fake
	alice := fakediscord.Member{User: fakediscord.User{ID: "7000000000000000001", Username: "alice"}}
	bot := "<@" + fake.AppID() + "> "
	if _, err := fake.UserMessage(fakediscord.DefaultChannelID, alice, bot+"run the tests"); err != nil {
		f.Fatal(err)
	}
	g.captured(f, "MESSAGE_CREATE", 1)
	// A card with buttons to click, in the session thread.
	th := g.core.WaitFor(f, "the mention", func(r chattest.Record) bool { return len(r.Messages) == 1 }).Messages[0].Thread
	v := "2.call_1"
	ref, err := g.a.Post(context.Background(), th, chat.Card{Title: "Waiting for approval", Blocks: []chat.Block{
		{Kind: chat.BlockCode, Text: "rm -rf build"},
		{Kind: chat.BlockActions, Buttons: []chat.Button{
			{ID: chat.ActionApprove, Label: "Approve", Value: v},
			{ID: chat.ActionReject, Label: "Reject", Value: v},
		}},
	}})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := fake.UserMessage(th.Thread, alice, "and the docs"); err != nil {
		f.Fatal(err)
	}
	approve, _ := CustomID(chat.ActionApprove, v)
	reject, _ := CustomID(chat.ActionReject, v)
	if _, err := fake.ClickButton(ref, alice, approve); err != nil {
		f.Fatal(err)
	}
	rid, err := fake.ClickButton(ref, alice, reject)
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fake.Wait(ctx, "the reject modal", func() bool {
		in, ok := fake.Interaction(rid)
		return ok && in.ResponseType == fakediscord.CallbackModal
	}); err != nil {
		f.Fatal(err)
	}
	if _, err := fake.SubmitModal(rid, alice, map[string]string{reasonInput: "not on main"}); err != nil {
		f.Fatal(err)
	}
	if _, err := fake.SlashCommand(th.Thread, alice, "status"); err != nil {
		f.Fatal(err)
	}
	// Everything the seeds started is over before the first input.
	g.core.WaitFor(f, "the seeds handled", func(r chattest.Record) bool {
		return len(r.Messages) == 2 && len(r.Commands) == 1 && len(r.Actions) == 2
	})
	g.a.inflight.Wait()
	g.a.queues.wait()
	msgs := g.captured(f, "MESSAGE_CREATE", 2)
	inters := g.captured(f, "INTERACTION_CREATE", 4)
	for _, m := range msgs {
		f.Add(uint8(0), []byte(m))
	}
	for _, i := range inters {
		f.Add(uint8(1), []byte(i))
	}
	for _, t := range g.captured(f, "THREAD_CREATE", 1) {
		f.Add(uint8(2), []byte(t))
	}
	for _, s := range []string{`null`, `{}`, `[]`, `5`, `{"author":null}`, `{"member":{}}`, `{"type":3,"data":null}`,
		`{"type":2,"data":{"name":"status"},"channel_id":"1"}`, `{"type":5,"data":{"custom_id":"reject:x"}}`, `{"id":"1","type":3}`} {
		for i := range fuzzEvents {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		if !json.Valid(raw) {
			return // the frame around it would not parse; discordgo drops it
		}
		typ := fuzzEvents[int(which)%len(fuzzEvents)]
		var named struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &named)
		cachedBefore, _ := g.a.chans.Get(named.ID)
		before, was := runtime.NumGoroutine(), g.state()
		if !g.a.dispatch(typ, raw) {
			return // discordgo itself failed on it (see dispatch)
		}
		rec := g.core.Record()
		gatewayGone(t, before)
		for _, m := range rec.Messages[was.messages:] {
			if typ != "MESSAGE_CREATE" || m.EventID == "" || m.User.ID == "" || m.Thread.Channel == "" || m.Thread.Thread == "" {
				t.Fatalf("a %s gave the core a message with no event, user or place: %+v", typ, m)
			}
		}
		for _, a := range rec.Actions[was.actions:] {
			if typ != "INTERACTION_CREATE" || a.User.ID == "" || a.Thread.Channel == "" || a.Thread.Thread == "" {
				t.Fatalf("a %s gave the core an action with no user or place: %+v", typ, a)
			}
		}
		for _, c := range rec.Commands[was.commands:] {
			if typ != "INTERACTION_CREATE" || c.User.ID == "" || c.Thread.Channel == "" {
				t.Fatalf("a %s gave the core a command with no user or place: %+v", typ, c)
			}
		}
		if typ == "THREAD_CREATE" {
			if g.state() != was {
				t.Fatalf("a THREAD_CREATE changed state: %+v → %+v", was, g.state())
			}
			// What routing learns from it must be a thread.
			if c, ok := g.a.chans.Get(named.ID); ok && c != cachedBefore && !c.thread() {
				t.Fatalf("a THREAD_CREATE made the adapter take %s for a channel of type %d", named.ID, c.Type)
			}
		}
	})
}

// gatewayGone fails t if, within a bounded wait, the process does not get
// back to at most before goroutines.
func gatewayGone(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the input:\n%s", n, before, bytes.TrimSpace(buf[:runtime.Stack(buf, true)]))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A slash command whose payload names no user, or no channel (a DM
// interaction without its channel), is answered and dropped: the core must
// never run a command from nobody or for no place. CI's gateway fuzzing
// found one that reached the core.
func TestCommandWithoutUserOrPlaceIsDropped(t *testing.T) {
	g := newGatewayFuzz(t)
	for i, raw := range []string{
		`{"type":2,"data":{"name":"status"},"id":"9100000000000000001"}`,
		`{"type":2,"data":{"name":"status"},"id":"9100000000000000002","channel_id":"1"}`,
		`{"type":2,"data":{"name":"status"},"id":"9100000000000000003","user":{"id":"7000000000000000001","username":"alice"}}`,
	} {
		was := g.state()
		if !g.a.dispatch("INTERACTION_CREATE", []byte(raw)) {
			t.Fatalf("input %d: discordgo refused the dispatch", i)
		}
		if got := g.core.Record().Commands[was.commands:]; len(got) != 0 {
			t.Errorf("input %d (%s) reached the core as %+v", i, raw, got)
		}
	}
}
