package cluster

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// TestClusterTurn: a Slack mention runs a turn through the cluster. Two
// worker hosts and two bot replicas run; the command waits for approval,
// the Approve button (clicked in Slack) approves it, it runs in a local
// sandbox on one of the hosts, the workspace is snapshotted to the S3
// bucket, and the answer is posted exactly once.
func TestClusterTurn(t *testing.T) {
	t.Parallel()
	w := newWorld(t, sharedCluster(t), "turn")
	hosts := []*host{w.startHost("host-a", ""), w.startHost("host-b", "")}
	w.startBots(2)

	const answer = "Wrote hello.txt on a worker host of the cluster."
	w.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo hi from the cluster > hello.txt")),
		fakeopenai.FinalStep(answer),
	)
	th := w.mention(alice, "write hello.txt")
	ref, buttons := w.approvalButtons(th, 1)
	if ran := filesNamed(t, "hello.txt", hosts...); len(ran) != 0 {
		t.Fatalf("the command ran before it was approved: %v", ran)
	}
	w.click(ref, alice, buttons[chat.ActionApprove])

	end := w.waitDone(th, 1)
	if end.Status != session.StatusComplete || len(end.ToolCalls) != 1 || end.ToolCalls[0].Status != session.CallCompleted {
		t.Fatalf("end state: %s", dump(end))
	}
	if d := end.ToolCalls[0].Decision; d == nil || d.User.ID != alice || d.Decision != session.DecisionApprove {
		t.Fatalf("decision: %s", dump(end.ToolCalls[0]))
	}
	ran := filesNamed(t, "hello.txt", hosts...)
	if len(ran) != 1 {
		t.Fatalf("hello.txt should be in one host's workspace, found %v", ran)
	}
	for _, f := range ran {
		if b, _ := os.ReadFile(f); string(b) != "hi from the cluster\n" {
			t.Fatalf("%s = %q", f, b)
		}
	}
	// The status message ends done, with who approved.
	w.wait("the final status", func(s fakeslack.Snapshot) bool {
		m, _ := s.Message(w.channel, ref)
		text := messageText(m)
		return strings.Contains(text, "Done") && strings.Contains(text, "approved by <@"+alice+">")
	})
	if n := w.posts(th, answer); n != 1 {
		t.Fatalf("the answer was posted %d times, want once; thread:\n%s", n, w.describe())
	}
	// The session is in the cluster's PostgreSQL visibility store.
	c := w.c
	n, err := c.Postgres().SQL("temporal_visibility", "SELECT count(*) FROM executions_visibility WHERE workflow_id = '"+th.ID()+"'")
	if err != nil || strings.TrimSpace(n) != "1" {
		t.Fatalf("the session in PostgreSQL's executions_visibility: %q, %v", n, err)
	}
	// The workspace went to the bucket as the turn's snapshot.
	key := sandbox.SnapshotKey(th.ID(), 1)
	if keys := w.s3.Keys(t, w.bucket, "sessions/"); !contains(keys, key) {
		t.Fatalf("snapshot %s not in bucket %s: %v", key, w.bucket, keys)
	}
}

// filesNamed finds files called name in the hosts' workspace roots.
func filesNamed(t testing.TB, name string, hosts ...*host) []string {
	t.Helper()
	var out []string
	for _, h := range hosts {
		err := filepath.WalkDir(h.Root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			if !d.IsDir() && d.Name() == name {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
