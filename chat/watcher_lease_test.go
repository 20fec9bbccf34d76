package chat_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// A watcher that stood by while another replica held the watch lease and
// answered two turns, then got the lease, must not post those turns'
// answers again. The soak (400 turns, no faults) posted turns 109 and 152
// twice this way: the catch-up posted every turn but the previous one
// unclaimed. The scripted session answers claims as the workflow does: it
// keeps claims for the current and the previous turn only.
func TestStandbyWatcherDoesNotRepostAnsweredTurns(t *testing.T) {
	hist := []session.HistoryEntry{
		{Turn: 5, Msg: session.Message{Role: session.RoleUser, Content: "do it"}},
		{Turn: 5, Msg: session.Message{Role: session.RoleAssistant, Content: "turn five answer"}},
		{Turn: 6, Msg: session.Message{Role: session.RoleUser, Content: "more"}},
		{Turn: 6, Msg: session.Message{Role: session.RoleAssistant, Content: "turn six answer"}},
		{Turn: 7, Msg: session.Message{Role: session.RoleUser, Content: "again"}},
	}
	seven := running(7, 9)
	seven.Previous = &session.TurnEnd{Turn: 6, Status: session.StatusComplete, FinalText: "turn six answer", FinalRef: "m6", FinalClaim: "bot-b"}
	var mu sync.Mutex
	claims := 0
	f := &chattest.Sessions{
		SendFn:      sendTurn(5, false),
		TurnStateFn: (&script{states: []session.TurnState{running(5, 1), running(6, 5), seven}}).next,
		HistoryFn:   func(string, session.HistoryRequest) ([]session.HistoryEntry, error) { return hist, nil },
		// bot-b holds the lease for the first two claims (turns 5 and 6,
		// which it answers), then lets it go.
		WatchFn: func(_ string, req session.ClaimWatchRequest) (session.ClaimWatchResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			if req.Release {
				return session.ClaimWatchResponse{}, nil
			}
			if claims++; claims <= 2 {
				return session.ClaimWatchResponse{Holder: "bot-b"}, nil
			}
			return session.ClaimWatchResponse{Granted: true, Holder: req.Claimer}, nil
		},
		ClaimFn: func(_ string, req session.ClaimFinalRequest) (session.ClaimFinalResponse, error) {
			switch req.Turn {
			case 6:
				return session.ClaimFinalResponse{Posted: true, Holder: "bot-b"}, nil
			case 7:
				return session.ClaimFinalResponse{Granted: true}, nil
			}
			return session.ClaimFinalResponse{}, fmt.Errorf("turn %d is not the current turn (7)", req.Turn)
		},
	}
	clock := newAutoClock()
	c := newTestCore(t, f, clock, func(cfg *chat.CoreConfig) { cfg.ReplicaID = "bot-a" })
	p := &recPoster{clock: clock}
	if err := c.HandleMessage(context.Background(), p, msg("e5", "do it")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	if got := texts(p); len(got) != 0 {
		t.Errorf("answers posted by the replica that stood by: %q; bot-b posted them", got)
	}
}
