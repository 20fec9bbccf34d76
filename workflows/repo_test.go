package workflows

import (
	"strings"
	"testing"

	"github.com/sandbot/sandbot/session"
)

// What the session quotes into a pull request cannot ping anyone on GitHub.
func TestPRBodyPingsNobody(t *testing.T) {
	s := &sessionRun{id: "session/x", st: State{Turn: 2, Transcript: []session.HistoryEntry{
		{Turn: 1, Msg: session.Message{Role: session.RoleUser, Content: "fix it, cc @alice"}},
		{Turn: 1, Msg: session.Message{Role: session.RoleAssistant, Content: "Done; @acme/security should review."}},
	}}}
	body := s.prBody("https://chat.example/thread")
	if strings.Contains(body, "@alice") || strings.Contains(body, "@acme/security") {
		t.Fatalf("the body can ping: %q", body)
	}
	if !strings.Contains(body, "fix it, cc @\u200balice") || !strings.Contains(body, "[this thread](https://chat.example/thread)") {
		t.Fatalf("body = %q", body)
	}
}
