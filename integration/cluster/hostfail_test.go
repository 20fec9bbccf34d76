package cluster

import (
	"strings"
	"testing"

	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	fakeslack "github.com/sandbot/sandbot/internal/fake/slack"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// TestHostFailure: the worker host holding a session's sandbox is killed
// (SIGKILL) between two turns. The next turn's command waits for that host
// (45 s, the workflow's host wait), then the session restores the workspace
// from the last snapshot in the bucket on the other host and runs the
// command there; the thread says so, and neither the files nor the
// conversation of the completed turns are lost.
func TestHostFailure(t *testing.T) {
	t.Parallel()
	w := newWorld(t, sharedCluster(t), "hostfail")
	never := "SANDBOT_SESSION_APPROVAL_MODE=never"
	hosts := map[string]*host{}
	for _, id := range []string{"host-a", "host-b"} {
		hosts[id] = w.startHost(id, "", never)
	}
	w.startBots(2)

	w.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("echo one > a.txt")), fakeopenai.FinalStep("turn one wrote a.txt"))
	th := w.mention(alice, "write a.txt")
	w.waitDone(th, 1)
	w.model.Push(fakeopenai.ToolCallStep("c2", "shell", shell("echo two > b.txt")), fakeopenai.FinalStep("turn two wrote b.txt"))
	w.reply(th, alice, "now write b.txt")
	w.waitDone(th, 2)
	key := sandbox.SnapshotKey(th.ID(), 2)
	if keys := w.s3.Keys(t, w.bucket, "sessions/"); !contains(keys, key) {
		t.Fatalf("turn 2's snapshot %s not in the bucket: %v", key, keys)
	}

	// The host whose workspace root has the session's files holds it.
	var holder, other *host
	for _, h := range hosts {
		if len(filesNamed(t, "b.txt", h)) == 1 {
			holder = h
		} else {
			other = h
		}
	}
	if holder == nil || other == nil {
		t.Fatalf("want the workspace on exactly one host; b.txt: %v", filesNamed(t, "b.txt", hosts["host-a"], hosts["host-b"]))
	}
	holder.Kill()
	t.Logf("killed %s (pid %d), which held the sandbox", holder.ID, holder.Pid())

	const answer = "turn three read both files"
	w.model.Push(fakeopenai.ToolCallStep("c3", "shell", shell("cat a.txt b.txt")), fakeopenai.FinalStep(answer))
	w.reply(th, alice, "read both files")
	end := w.waitDone(th, 3)
	if len(end.ToolCalls) != 1 || end.ToolCalls[0].Status != session.CallCompleted || !strings.Contains(end.ToolCalls[0].Output, "one\ntwo\n") {
		t.Fatalf("turn 3 should read both files from the restored workspace: %s", dump(end))
	}
	if !hasNotice(end, "unreachable", "restoring the workspace from the last snapshot") {
		t.Fatalf("turn 3's notices should say the host was unreachable and the workspace restored: %q", end.Notices)
	}
	if got := filesNamed(t, "a.txt", other); len(got) != 1 {
		t.Fatalf("the workspace should now be on %s: a.txt at %v", other.ID, got)
	}
	// The thread says so: the turn's status message shows the notice.
	w.wait("the notice in the thread", func(s fakeslack.Snapshot) bool {
		m, _ := s.Message(w.channel, end.StatusRef)
		return strings.Contains(messageText(m), "unreachable")
	})
	if n := w.posts(th, answer); n != 1 {
		t.Fatalf("the answer was posted %d times, want once", n)
	}
	// The conversation of the completed turns reached the model whole.
	req, _ := w.model.LastRequest()
	var said []string
	for _, m := range req.Body.Messages {
		said = append(said, m.Content)
	}
	all := strings.Join(said, "\n")
	for _, want := range []string{"write a.txt", "turn one wrote a.txt", "now write b.txt", "turn two wrote b.txt", "read both files"} {
		if !strings.Contains(all, want) {
			t.Errorf("the model's last request lacks %q from the conversation:\n%s", want, all)
		}
	}
}

func hasNotice(ts session.TurnState, parts ...string) bool {
	for _, n := range ts.Notices {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(n, p)
		}
		if ok {
			return true
		}
	}
	return false
}
