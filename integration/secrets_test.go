package integration

import (
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/redact"
	"github.com/sandbot/sandbot/session"
)

// TestSecretsAreRedactedEverywhere is the exfiltration attack after the
// fact: the worker's model key shows up in command output (plainly, in
// base64, URL-encoded, on stderr), in the commands the model writes, and in
// the model's answer. No form of it may reach the turn state, the
// transcript, the model (beyond its Authorization header), the chat or the
// Temporal history.
//
// The commands assemble the key from two halves, as a command that found it
// somewhere would print it, so that it is the output that has to be
// scrubbed; the commands that name the key whole test the scrubbing of the
// model's tool calls, which happens before they ever run.
func TestSecretsAreRedactedEverywhere(t *testing.T) {
	const key = "sk-live-EXFIL-0123456789abcdefXYZ"
	const marker = "[redacted: SANDBOT_MODEL_API_KEY]"
	s := newStack(t, func(c *config.Config) {
		c.Session.ApprovalMode = "never"
		c.Model.APIKey = key
	})
	// Finds the key in any rendering the redactor knows, including inside
	// the base64 of a protobuf payload at any byte alignment.
	leaks := func(text string) bool {
		return redact.New(redact.Secret{Name: "k", Value: key}).Redact(text) != text
	}

	a, b := key[:len(key)/2], key[len(key)/2:]
	glue := fmt.Sprintf("printf %%s%%s '%s' '%s'", a, b)
	th := s.thread("secrets-redacted")
	s.model.Push(
		fakeopenai.ToolCallStep("c1", "shell", shell(
			glue,
			glue+" | base64",
			fmt.Sprintf("printf %%s%%s '%s' '%s'", url.QueryEscape(a), url.QueryEscape(b)),
			glue+" >&2",
			"echo "+key,
			"echo -n "+key+" | base64",
		)),
		fakeopenai.FinalStep("Found it: "+key+" (base64 "+base64.StdEncoding.EncodeToString([]byte(key))+")"),
	)
	s.say(th, "ev-1", "find the key")
	end := s.waitState(th, "turn end", done)
	if end.Status != session.StatusComplete {
		t.Fatalf("turn: %s", dump(end))
	}
	s.poster.waitFor(t, "the final answer", func(_ []posted, texts []string) bool {
		return strings.Contains(strings.Join(texts, "\n"), "Found it")
	})

	state := dump(end)
	if leaks(state) {
		t.Errorf("turn state holds the key: %s", state)
	}
	// The outputs did happen: each was replaced, not lost.
	if n := strings.Count(state, marker); n < 5 {
		t.Errorf("turn state has %d markers, want one per leaking output and command: %s", n, state)
	}

	v, err := s.c.QueryWorkflow(s.ctx, th.ID(), "", session.QueryHistory, session.HistoryRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var hist []session.HistoryEntry
	if err := v.Get(&hist); err != nil {
		t.Fatal(err)
	}
	if transcript := dump(hist); leaks(transcript) || !strings.Contains(transcript, marker) {
		t.Errorf("transcript holds the key or lost the markers: %s", transcript)
	}

	reqs := s.model.Requests()
	if len(reqs) < 2 {
		t.Fatalf("the model got %d requests, want the tool results sent back", len(reqs))
	}
	for _, r := range reqs {
		if tok, _ := r.BearerToken(); tok != key {
			t.Errorf("request %d was not authenticated with the key", r.Seq)
		}
		if leaks(string(r.RawBody)) {
			t.Errorf("request %d to the model holds the key: %s", r.Seq, r.RawBody)
		}
	}

	posts, texts := s.poster.snapshot()
	if chat := dump(posts) + strings.Join(texts, "\n"); leaks(chat) {
		t.Errorf("chat holds the key: %s", chat)
	}

	iter := s.c.GetWorkflowHistory(s.ctx, th.ID(), "", false, 0)
	events := 0
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		events++
		js, err := protojson.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if leaks(string(js)) || leaks(ev.String()) {
			t.Errorf("Temporal history event %d (%s) holds the key: %s", ev.GetEventId(), ev.GetEventType(), js)
		}
	}
	if events == 0 {
		t.Fatal("no history events")
	}
}

// TestDevStateIsPrivate: cmd/dev's data directory, its Temporal database,
// its log and its snapshots are readable by their owner only (the host's
// other users must not read sessions' commands, outputs and workspaces).
func TestDevStateIsPrivate(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data") // created by cmd/dev
	in, out, wait := runDev(t, data)
	out.waitFor(t, "the console prompt", func(s string) bool { return strings.Contains(s, "sandbot console") })
	if _, err := io.WriteString(in, "run: echo private > note.txt\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "an approval prompt", func(s string) bool {
		return strings.Contains(s, "echo private > note.txt") && strings.Contains(strings.ToLower(s), "approve")
	})
	if _, err := io.WriteString(in, "a\n"); err != nil {
		t.Fatal(err)
	}
	// Turns run one after the other and a turn's snapshot is written before
	// it completes, so once the second turn answers the first one's
	// snapshot is on disk.
	if _, err := io.WriteString(in, "second-turn-echo\n"); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "the second answer", func(s string) bool {
		return strings.Count(s, "second-turn-echo") >= 1 && strings.Contains(s, "exit code: 0")
	})
	if _, err := io.WriteString(in, "/quit\n"); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatalf("dev exited with %v\n%s", err, out.String())
	}

	seen := map[string]bool{}
	err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(data, path)
		if rel == "workspaces" || strings.HasPrefix(rel, "workspaces"+string(filepath.Separator)) {
			// The local backend's root: its modes are the backend's.
			if info, err := os.Stat(path); err == nil && rel == "workspaces" {
				t.Logf("workspaces root %s has mode %#o", path, info.Mode().Perm())
			}
			return nil
		}
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			seen[strings.SplitN(rel, string(filepath.Separator), 2)[0]] = true
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s has mode %#o, want %#o", rel, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"temporal.db", "sandbot-dev.log", "snapshots"} {
		if !seen[f] {
			t.Errorf("no %s among the files checked (%v)", f, seen)
		}
	}
}
