package slack

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/session"
)

// TestStreamTasksGolden pins the task_update chunks a turn streams: one per
// call, in order, for every call status, with text from the model and from
// commands unable to ping anyone or reorder the line.
func TestStreamTasksGolden(t *testing.T) {
	zero, one := 0, 1
	ts := session.TurnState{Turn: 3, Status: session.StatusAwaitingApproval, ToolCalls: []session.ToolCallState{
		{CallID: "c1", Name: "shell", Commands: []string{"ls -la"}, Status: session.CallCompleted, ExitCode: &zero, Output: "a.txt\nb.txt\n", Duration: time.Second},
		{CallID: "c2", Name: "shell", Commands: []string{"go test ./...", "go vet ./..."}, Status: session.CallCompleted, ExitCode: &one, Output: "FAIL <!channel> see <@U0BOSS>"},
		{CallID: "c3", Name: "shell", Commands: []string{"rm -rf build \u202e<#C0GENERAL>"}, Status: session.CallRejected},
		{CallID: "c4", Name: "shell", Commands: []string{"make"}, Status: session.CallFailed, Error: "sandbox: exec: no such container"},
		{CallID: "c5", Name: "shell", Commands: []string{"sleep 100"}, Status: session.CallRunning},
		{CallID: "c6", Name: "shell", Commands: []string{"curl -X POST\n  https://example.com"}, Status: session.CallAwaitingApproval},
		{CallID: "c7", Name: "share_file", Status: session.CallPending},
		{CallID: "c8", Name: "shell", Commands: []string{strings.Repeat("x", 300)}, Status: session.CallCompleted, ExitCode: &zero, Output: strings.Repeat("line\n", 200)},
	}}
	chunks := tasks(ts)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"chunks": chunks}); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	path := filepath.Join("testdata", "stream_tasks.golden.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestStreamTasksGolden -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("task chunks differ from %s (rerun with -update if intended):\n%s", path, got)
	}
	for _, c := range chunks {
		for _, s := range []string{c.Title, c.Details, c.Output} {
			for _, bad := range []string{"<!", "<@", "<#", "\u202e"} {
				if strings.Contains(s, bad) {
					t.Errorf("task %s carries %q: %q", c.ID, bad, s)
				}
			}
		}
		if c.Type != slackgo.StreamChunkTaskUpdate || len([]rune(c.Title)) > maxTaskTitle || len([]rune(c.Output)) > maxTaskOutput+1 {
			t.Errorf("task %s: type %q, title %d runes, output %d runes", c.ID, c.Type, len([]rune(c.Title)), len([]rune(c.Output)))
		}
	}
}
