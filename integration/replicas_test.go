package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/botapp"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// replica is one bot process of a deployment with several.
type replica struct {
	id  string
	bot *botapp.Bot
	p   *replicaPoster
	c   tclient.Client // its own connection to the cluster
}

// kill makes the replica die: its connection to the cluster goes first, so
// it can neither renew nor give up its watch lease, then its watchers stop.
func (r *replica) kill() {
	r.c.Close()
	r.bot.Close()
}

// replicaPoster is one replica's connection to the shared chat (the
// threadEnv's poster). It can be made to hang on a post, as a replica does
// that dies just before the final answer reaches the platform.
type replicaPoster struct {
	chat.Poster
	mu     sync.Mutex
	hangOn string
	hung   chan struct{}
	once   sync.Once
}

func (p *replicaPoster) PostText(ctx context.Context, th chat.Thread, md string) (string, error) {
	p.mu.Lock()
	hang := p.hangOn != "" && strings.Contains(md, p.hangOn)
	p.mu.Unlock()
	if hang {
		p.once.Do(func() { close(p.hung) })
		<-ctx.Done()
		return "", ctx.Err()
	}
	return p.Poster.PostText(ctx, th, md)
}

func (p *replicaPoster) hangOnText(s string) {
	p.mu.Lock()
	p.hangOn = s
	p.mu.Unlock()
}

// startReplicas starts n bots on the stack's cluster, each scanning for
// sessions of platform that need a bot (Resume), with a short watch lease
// so a takeover takes seconds. A platform of the test's own keeps the
// scans away from other tests' sessions, whose workers are gone.
func startReplicas(t *testing.T, e *threadEnv, n int, platform string) []*replica {
	t.Helper()
	var rs []*replica
	for i := range n {
		id := fmt.Sprintf("replica-%d", i+1)
		c, err := srv.NewClient(e.ctx, tclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		b, err := botapp.New(e.ctx, c, e.cfg, botapp.Options{Settings: settingsHook, ReplicaID: id,
			WatchLease: 2 * time.Second, ScanEvery: 200 * time.Millisecond, PollMax: 200 * time.Millisecond}, e.log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		r := &replica{id: id, bot: b, c: c, p: &replicaPoster{Poster: e.p, hung: make(chan struct{})}}
		if err := b.Core.Resume(e.ctx, r.p, platform); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// finalPosts counts the posts of text in th.
func (e *threadEnv) finalPosts(th chat.Thread, text string) int {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	n := 0
	for _, s := range e.p.said {
		if s.Thread == th && strings.Contains(s.Text, text) {
			n++
		}
	}
	return n
}

// TestWatchTakeover runs a turn with two and with three bot replicas and
// kills the replica holding the session's watch lease at each stage of the
// turn: while the model thinks, while a command runs, while an approval
// waits, and just before the final answer is posted. Another replica takes
// the watch over, the turn goes on (the approval button still works), and
// the answer is posted exactly once. Every replica scans all along, so a
// replica that was not sent the message still finds the turn; before the
// lease, such a replica posted the answer a second time, and a turn whose
// only watcher died was never answered.
func TestWatchTakeover(t *testing.T) {
	for _, n := range []int{2, 3} {
		for _, stage := range []string{"thinking", "running", "approval", "final"} {
			t.Run(fmt.Sprintf("%d-replicas/%s", n, stage), func(t *testing.T) { watchTakeover(t, n, stage) })
		}
	}
}

func watchTakeover(t *testing.T, n int, stage string) {
	e := newThreadEnv(t, false, func(c *config.Config) {
		if stage != "approval" {
			c.Session.ApprovalMode = "never"
		}
	})
	platform := fmt.Sprintf("replicas-%d-%s", n, stage)
	rs := startReplicas(t, e, n, platform)
	th := chat.Thread{Platform: platform, Channel: e.channel, Thread: "takeover"}
	answer := fmt.Sprintf("the answer after a takeover at %s with %d replicas", stage, n)
	hold := make(chan struct{})
	switch stage {
	case "thinking":
		e.model.Push(fakeopenai.Step{Content: answer, Hold: hold})
	case "running":
		e.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("while [ ! -f go ]; do sleep 0.05; done; echo ran")), fakeopenai.FinalStep(answer))
	case "approval":
		e.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("touch approved.txt")), fakeopenai.FinalStep(answer))
	case "final":
		e.model.Push(fakeopenai.FinalStep(answer))
		for _, r := range rs {
			r.p.hangOnText(answer)
		}
	}
	if err := rs[0].bot.Core.HandleMessage(e.ctx, rs[0].p, chatMessage(th, "takeover-"+stage, "go")); err != nil {
		t.Fatal(err)
	}

	var owner *replica
	byID := func(id string) *replica {
		for _, r := range rs {
			if r.id == id {
				return r
			}
		}
		t.Fatalf("no replica %q", id)
		return nil
	}
	switch stage {
	case "thinking":
		ts := e.waitState(th, "the model thinking, watched", func(ts session.TurnState) bool { return ts.Status == session.StatusThinking && ts.Watcher != "" })
		owner = byID(ts.Watcher)
	case "running":
		ts := e.waitState(th, "the command running, watched", func(ts session.TurnState) bool {
			return len(ts.ToolCalls) == 1 && ts.ToolCalls[0].Status == session.CallRunning && ts.Watcher != ""
		})
		owner = byID(ts.Watcher)
	case "approval":
		ts := e.waitState(th, "an approval waiting, watched", func(ts session.TurnState) bool { return ts.Pending != nil && ts.Watcher != "" && ts.StatusRef != "" })
		owner = byID(ts.Watcher)
	case "final":
		deadline := time.After(waitTimeout)
		for owner == nil {
			for _, r := range rs {
				select {
				case <-r.p.hung:
					owner = r
				default:
				}
			}
			if owner == nil {
				select {
				case <-deadline:
					t.Fatal("no replica tried to post the answer")
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		for _, r := range rs {
			if r != owner {
				r.p.hangOnText("")
			}
		}
	}
	owner.kill() // its lease and its claim are left to run out

	switch stage {
	case "thinking":
		close(hold)
	case "running":
		ws := workspacesOf(t, e.cfg.Sandbox.LocalRoot)[th.ID()]
		if ws == "" {
			t.Fatal("no workspace for the session")
		}
		if err := os.WriteFile(filepath.Join(e.cfg.Sandbox.LocalRoot, ws, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	case "approval":
		ts := e.state(th)
		if err := e.approve(th, ts.Pending.CallID, session.DecisionApprove, alice, ""); err != nil {
			t.Fatalf("the approval after the takeover: %v", err)
		}
	}

	ts := e.waitState(th, "the answer posted", func(ts session.TurnState) bool { return ts.FinalRef != "" })
	for _, r := range rs {
		if r != owner {
			if err := r.bot.Core.WaitThread(e.ctx, th); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := e.finalPosts(th, answer); got != 1 {
		t.Fatalf("the answer was posted %d times, want once", got)
	}
	if ts.FinalClaim == owner.id || ts.FinalClaim == "" {
		t.Errorf("the answer was claimed by %q; want a surviving replica (the dead owner was %s)", ts.FinalClaim, owner.id)
	}
	if ts.AwaitingPost || ts.Status != session.StatusComplete {
		t.Errorf("after the post: status %s, awaiting post %v", ts.Status, ts.AwaitingPost)
	}
}
