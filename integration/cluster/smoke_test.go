package cluster

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/botapp"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/workerapp"
	"github.com/sandbot/sandbot/session"
)

func TestSmoke(t *testing.T) {
	c := sharedCluster(t)
	ctx := testContext(t)
	if err := c.CreateNamespace(ctx, "smoke"); err != nil {
		t.Fatal(err)
	}
	cl, err := c.Dial(ctx, "smoke")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	model := fakeopenai.New()
	defer model.Close()
	cfg := config.Load()
	dir := t.TempDir()
	cfg.Temporal.TaskQueue = "smoke"
	cfg.Temporal.Namespace = "smoke"
	cfg.Model.BaseURL, cfg.Model.Name, cfg.Model.APIKey = model.URL(), "fake-model", "sk-test-secret-key-0123456789"
	cfg.Sandbox.LocalRoot = filepath.Join(dir, "ws")
	cfg.Sandbox.SnapshotURL = "file://" + filepath.Join(dir, "snap")
	cfg.Sandbox.HostID = "h"
	cfg.Sandbox.Backends = []string{"local"}
	cfg.Session.ApprovalMode = "never"
	cfg.EnsureDecisionKey()
	if err := cfg.Validate(config.RoleDev); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := workerapp.Start(ctx, cl, cfg, workerapp.Options{}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	b, err := botapp.New(ctx, cl, cfg, botapp.Options{}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	model.Push(fakeopenai.ToolCallStep("c1", "shell", `{"commands":["echo hi"]}`), fakeopenai.FinalStep("done"))
	th := chat.Thread{Platform: "console", Channel: "c", Thread: "t1"}
	p := &nopPoster{}
	if err := b.Core.HandleMessage(ctx, p, chat.Message{EventID: "e1", Thread: th, User: chat.User{ID: "u"}, Text: "go"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		v, err := cl.QueryWorkflow(ctx, th.ID(), "", session.QueryTurnState)
		if err == nil {
			var ts session.TurnState
			_ = v.Get(&ts)
			if ts.Status == session.StatusComplete {
				// The session lives in PostgreSQL.
				n, err := c.pg.SQL("temporal", "SELECT count(*) FROM executions")
				if err != nil || strings.TrimSpace(n) == "0" {
					t.Fatalf("executions in PostgreSQL: %q, %v", n, err)
				}
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("timeout")
}

type nopPoster struct{}

func (nopPoster) Post(context.Context, chat.Thread, chat.Card) (string, error)  { return "m1", nil }
func (nopPoster) Edit(context.Context, chat.Thread, string, chat.Card) error    { return nil }
func (nopPoster) PostText(context.Context, chat.Thread, string) (string, error) { return "m2", nil }
