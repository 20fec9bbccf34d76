package chat_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// ctxPoster is a recPoster whose text posts fail on a cancelled context,
// as a real platform client's HTTP call does.
type ctxPoster struct{ *recPoster }

func (p *ctxPoster) PostText(ctx context.Context, th chat.Thread, md string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return p.recPoster.PostText(ctx, th, md)
}

// TestApprovalNoticeSurvivesShutdown: the bot starts shutting down right
// after it recorded that it tells the approvers of a turn. The record is
// what keeps the next bot from telling them again, so the post must
// still go out: a notice recorded but never posted is a ping nobody gets
// (CI caught TestSlackRestartMidTurn counting none).
func TestApprovalNoticeSurvivesShutdown(t *testing.T) {
	pending := awaiting("rm -rf build")
	states := []session.TurnState{{Turn: 0, Status: session.StatusIdle}, pending, pending, pending}
	s := &script{states: states}
	var (
		mu       sync.Mutex
		watchCtx context.Context
		closed   = make(chan struct{})
		core     *chat.Core
	)
	lim := limiterFunc(func(ctx context.Context) error {
		mu.Lock()
		watchCtx = ctx
		mu.Unlock()
		return nil
	})
	f := &chattest.Sessions{
		SendFn:      sendTurn(1, false),
		TurnStateFn: s.next,
		InfoFn: func(id string) (session.Info, error) {
			return session.Info{WorkflowID: id, Owner: chat.User{ID: "U1", Name: "ann"}}, nil
		},
		RecordFn: func(_ string, req session.ChatRefRequest) error {
			if req.Kind != session.ChatRefApprovalNotice {
				return nil
			}
			// Shutdown begins between the record and the post: Close
			// cancels the watcher's context, then waits for it.
			go func() { core.Close(); close(closed) }()
			mu.Lock()
			ctx := watchCtx
			mu.Unlock()
			<-ctx.Done()
			return nil
		},
	}
	clock := newAutoClock()
	core = newTestCore(t, f, clock, func(cfg *chat.CoreConfig) {
		cfg.Budgets["test"] = chat.Budget{MinEditInterval: 0, Limiter: lim}
	})
	p := &ctxPoster{recPoster: &recPoster{clock: clock}}
	if err := core.HandleMessage(context.Background(), p, msg("e1", "clean up")); err != nil {
		t.Fatal(err)
	}
	<-closed
	notices := 0
	for _, txt := range texts(p.recPoster) {
		if strings.Contains(txt, "waits for approval") {
			notices++
		}
	}
	if notices != 1 {
		t.Fatalf("approval notices posted: %d (texts %q), want 1: recorded as told, so it must be told", notices, texts(p.recPoster))
	}
}
