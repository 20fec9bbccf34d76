package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// shareLog is the shared chat's record of completed file uploads.
type shareLog struct {
	mu    sync.Mutex
	files []chat.SharedFile
}

func (l *shareLog) count(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.files {
		if f.Name == name {
			n++
		}
	}
	return n
}

// sharingPoster is one replica's way to the shared chat, taking files; it
// can be made to hang on an upload, as a replica does that dies mid-upload.
type sharingPoster struct {
	chat.Poster
	log  *shareLog
	hang bool
	hung chan struct{}
	once sync.Once
	mu   sync.Mutex
}

func (p *sharingPoster) ShareFile(ctx context.Context, _ chat.Thread, f chat.SharedFile) error {
	p.mu.Lock()
	hang := p.hang
	p.mu.Unlock()
	if hang {
		p.once.Do(func() { close(p.hung) })
		<-ctx.Done()
		return ctx.Err()
	}
	p.log.mu.Lock()
	p.log.files = append(p.log.files, f)
	p.log.mu.Unlock()
	return nil
}

// TestSharedFileOnceWithReplicas: two bot replicas watch a session whose
// turn shares a file. The file is uploaded once: by the lease holder, and
// not again by the other replica after the holder dies; and when the
// holder dies during the upload, before recording it, the survivor uploads
// it instead (still one completed upload).
func TestSharedFileOnceWithReplicas(t *testing.T) {
	for _, hang := range []bool{false, true} {
		t.Run(fmt.Sprintf("dies-mid-upload=%v", hang), func(t *testing.T) {
			e := newThreadEnv(t, false, func(c *config.Config) { c.Session.ApprovalMode = "never" })
			platform := fmt.Sprintf("share-replicas-%v", hang)
			log := &shareLog{}
			var ps []*sharingPoster
			var bots []*botapp.Bot
			var clients []tclient.Client
			for i := range 2 {
				c, err := srv.NewClient(e.ctx, tclient.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
				b, err := botapp.New(e.ctx, c, e.cfg, botapp.Options{Settings: settingsHook, ReplicaID: fmt.Sprintf("replica-%d", i+1),
					WatchLease: 2 * time.Second, ScanEvery: 200 * time.Millisecond, PollMax: 200 * time.Millisecond}, e.log)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Close)
				p := &sharingPoster{Poster: e.p, log: log, hang: hang, hung: make(chan struct{})}
				if err := b.Core.Resume(e.ctx, p, platform); err != nil {
					t.Fatal(err)
				}
				ps, bots, clients = append(ps, p), append(bots, b), append(clients, c)
			}
			th := chat.Thread{Platform: platform, Channel: e.channel, Thread: "share"}
			e.model.Push(
				fakeopenai.ToolCallStep("c1", "shell", shell("echo report > report.txt")),
				fakeopenai.ToolCallStep("c2", session.ShareFileToolName, `{"path":"report.txt"}`),
				fakeopenai.ToolCallStep("c3", "shell", shell("until [ -f go ]; do sleep 0.05; done")),
				fakeopenai.FinalStep("shared"),
			)
			if err := bots[0].Core.HandleMessage(e.ctx, ps[0], chatMessage(th, "share-1", "share the report")); err != nil {
				t.Fatal(err)
			}
			var ts session.TurnState
			if hang {
				ts = e.waitState(th, "the file shared, watched", func(ts session.TurnState) bool { return len(ts.Shared) == 1 && ts.Watcher != "" })
			} else {
				ts = e.waitState(th, "the file posted", func(ts session.TurnState) bool { return len(ts.Shared) == 1 && ts.Shared[0].Posted })
			}
			owner := 0
			if ts.Watcher == "replica-2" {
				owner = 1
			}
			if hang {
				select {
				case <-ps[owner].hung:
				case <-time.After(waitTimeout):
					t.Fatal("the lease holder never tried to upload")
				}
				other := ps[1-owner]
				other.mu.Lock()
				other.hang = false
				other.mu.Unlock()
			}
			clients[owner].Close()
			bots[owner].Close()
			ws := workspacesOf(t, e.cfg.Sandbox.LocalRoot)[th.ID()]
			if err := os.WriteFile(filepath.Join(e.cfg.Sandbox.LocalRoot, ws, "go"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			ts = e.waitState(th, "the answer posted", func(ts session.TurnState) bool {
				return ts.FinalRef != "" && len(ts.Shared) == 1 && ts.Shared[0].Posted
			})
			if err := bots[1-owner].Core.WaitThread(e.ctx, th); err != nil {
				t.Fatal(err)
			}
			if n := log.count("report.txt"); n != 1 {
				t.Fatalf("report.txt uploaded %d times, want once", n)
			}
		})
	}
}
