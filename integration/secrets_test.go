package integration

import (
	"encoding/base64"
	"fmt"
	"net/url"
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
