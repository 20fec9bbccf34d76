package integration

import (
	"testing"

	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/internal/workerapp"
	"github.com/sandbot/sandbot/session"
)

// The session policy is the worker's: a bot whose environment says
// "unless-readonly" starts the session, the worker's says "never", and a
// writing command runs without an approval request. (Before, the bot's
// settings were frozen into the session and the worker's were ignored.)
func TestSessionPolicyComesFromTheWorker(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Session.ApprovalMode = "unless-readonly" })
	s.worker.Stop()
	wcfg := *s.cfg
	wcfg.Session.ApprovalMode = "never"
	w, err := workerapp.Start(s.ctx, s.c, &wcfg, workerapp.Options{}, s.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	th := s.thread("worker-policy")
	s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell("echo written > w.txt")),
		fakeopenai.FinalStep("wrote it"),
	)
	s.say(th, "ev-1", "write a file")
	end := s.waitState(th, "turn end", func(ts session.TurnState) bool { return done(ts) || ts.Pending != nil })
	if end.Pending != nil || end.Status != session.StatusComplete {
		t.Fatalf("the worker's never-ask policy should run the call unasked: %s", dump(end))
	}
	if c := end.ToolCalls[0]; c.Status != session.CallCompleted || c.Decision != nil {
		t.Fatalf("call: %s", dump(c))
	}
	if got, ok := workspaceFile(t, s, th, "w.txt"); !ok || got != "written\n" {
		t.Fatalf("w.txt = %q, %v", got, ok)
	}
}
