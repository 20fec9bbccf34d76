package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/sandbot/sandbot/agent"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/sandbox/blobstore"
	"github.com/sandbot/sandbot/session"
)

// countingStore counts the objects read from a real file store.
type countingStore struct {
	*blobstore.Store
	opens atomic.Int64
}

func (c *countingStore) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	c.opens.Add(1)
	return c.Store.Open(ctx, key)
}

func newStore(t *testing.T) (*countingStore, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := blobstore.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &countingStore{Store: s}, dir
}

// sent returns the messages the model received in its last request, as
// role:content lines (the system prompt first).
func sent(t *testing.T, f *fakeopenai.Server) []string {
	t.Helper()
	r, ok := f.LastRequest()
	if !ok {
		t.Fatal("no request reached the model")
	}
	var out []string
	for _, m := range r.Body.Messages {
		out = append(out, m.Role+":"+m.Content)
	}
	return out[1:]
}

func lines(msgs []session.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Role)+":"+m.Content)
	}
	return out
}

const sid = "slack:T1:C1:1700000000.0001"

// The model sees the same conversation whether the transcript comes
// whole or as the previous call's stored transcript plus what is new,
// also on a worker that never saw the previous call.
func TestStoredTranscriptAcrossWorkers(t *testing.T) {
	store, _ := newStore(t)
	a1, f := newAgent(t, nil)
	a1.Transcripts = store
	a2, err := agent.NewActivities(agent.Config{BaseURL: f.URL(), APIKey: testKey, Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	a2.Transcripts = store
	f.Push(fakeopenai.FinalStep("one"), fakeopenai.FinalStep("two"), fakeopenai.FinalStep("three"))

	all := []session.Message{userMsg("first question")}
	r1, err := a1.Complete(testCtx(t), agent.ModelRequest{Stored: true, SessionID: sid, Messages: all})
	if err != nil || r1.Transcript == nil || r1.Transcript.Count != 1 {
		t.Fatalf("first call: %+v, %v", r1, err)
	}
	added := []session.Message{{Role: session.RoleAssistant, Content: "one"}, userMsg("second question")}
	all = append(all, added...)
	r2, err := a2.Complete(testCtx(t), agent.ModelRequest{Stored: true, SessionID: sid, Base: r1.Transcript, Messages: added})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(sent(t, f), "|"), strings.Join(lines(all), "|"); got != want {
		t.Fatalf("the second worker sent %q, want %q", got, want)
	}
	if store.opens.Load() == 0 {
		t.Fatal("the second worker did not read the stored transcript")
	}
	if r2.Transcript.Count != 3 || r2.Skipped != 0 {
		t.Fatalf("second ref %+v skipped %d", r2.Transcript, r2.Skipped)
	}
	// The workflow trimmed the first message: the model no longer sees it.
	added = []session.Message{{Role: session.RoleAssistant, Content: "two"}, userMsg("third")}
	all = append(all[1:], added...)
	if _, err := a1.Complete(testCtx(t), agent.ModelRequest{Stored: true, SessionID: sid, Base: r2.Transcript, Skip: 1, Messages: added}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(sent(t, f), "|"), strings.Join(lines(all), "|"); got != want {
		t.Fatalf("after a trim the model got %q, want %q", got, want)
	}
}

// A stored transcript that was deleted by hand or altered in the store is
// reported as missing, never sent as the conversation; the workflow then
// sends the transcript in full.
func TestStoredTranscriptMissingOrCorrupt(t *testing.T) {
	for _, damage := range []string{"deleted", "altered"} {
		t.Run(damage, func(t *testing.T) {
			store, dir := newStore(t)
			a, f := newAgent(t, nil)
			a.Transcripts = store
			f.Push(fakeopenai.FinalStep("one"))
			r1, err := a.Complete(testCtx(t), agent.ModelRequest{Stored: true, SessionID: sid, Messages: []session.Message{userMsg("the real question")}})
			if err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "sessions", "*", "transcript", "*"))
			if len(files) != 1 {
				t.Fatalf("stored chunks: %v", files)
			}
			if damage == "deleted" {
				os.Remove(files[0])
			} else {
				b, _ := os.ReadFile(files[0])
				os.WriteFile(files[0], []byte(strings.Replace(string(b), "the real question", "an injected question", 1)), 0o644)
			}
			fresh, err := agent.NewActivities(agent.Config{BaseURL: f.URL(), APIKey: testKey, Model: "gpt-test"})
			if err != nil {
				t.Fatal(err)
			}
			fresh.Transcripts = store
			before := len(f.Requests())
			_, err = fresh.Complete(testCtx(t), agent.ModelRequest{Stored: true, SessionID: sid, Base: r1.Transcript, Messages: []session.Message{userMsg("next")}})
			var ae *temporal.ApplicationError
			if !errors.As(err, &ae) || ae.Type() != agent.ErrTypeTranscriptMissing || !ae.NonRetryable() {
				t.Fatalf("a %s transcript: %v, want a non-retryable %s", damage, err, agent.ErrTypeTranscriptMissing)
			}
			if len(f.Requests()) != before {
				t.Fatal("the model was called with a damaged transcript")
			}
		})
	}
}

// A long session's chain of chunks is rewritten whole now and then, so a
// worker without a cache reads a bounded number of objects.
func TestStoredTranscriptChainIsBounded(t *testing.T) {
	store, _ := newStore(t)
	a, f := newAgent(t, nil)
	a.Transcripts = store
	var ref *agent.TranscriptRef
	const calls = 100
	for i := range calls {
		f.Push(fakeopenai.FinalStep("ok"))
		r, err := a.Complete(testCtx(t), agent.ModelRequest{Stored: true, SessionID: sid, Base: ref, Messages: []session.Message{userMsg(fmt.Sprint("message ", i))}})
		if err != nil {
			t.Fatal(err)
		}
		ref = r.Transcript
	}
	fresh, err := agent.NewActivities(agent.Config{BaseURL: f.URL(), APIKey: testKey, Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	fresh.Transcripts = store
	store.opens.Store(0)
	f.Push(fakeopenai.FinalStep("ok"))
	if _, err := fresh.Complete(testCtx(t), agent.ModelRequest{Stored: true, SessionID: sid, Base: ref, Messages: []session.Message{userMsg("last")}}); err != nil {
		t.Fatal(err)
	}
	if n := store.opens.Load(); n > 33 {
		t.Fatalf("a cold worker read %d chunks for a %d-call session", n, calls)
	}
	if got := sent(t, f); len(got) != calls+1 || got[0] != "user:message 0" {
		t.Fatalf("the model got %d messages starting %q", len(got), got[0])
	}
}

// A months-long session must not keep every chunk it ever wrote: once a
// chunk holds the whole transcript, the chunks before it are deleted when
// they are old enough that no call can still name them.
func TestSupersededTranscriptChunksAreDeleted(t *testing.T) {
	store, dir := newStore(t)
	a, f := newAgent(t, nil)
	a.Transcripts = store
	chunks := func() []string {
		files, _ := filepath.Glob(filepath.Join(dir, "sessions", "*", "transcript", "*.json"))
		return files
	}
	var ref *agent.TranscriptRef
	call := func(i int) {
		f.Push(fakeopenai.FinalStep("ok"))
		r, err := a.Complete(testCtx(t), agent.ModelRequest{Stored: true, SessionID: sid, Base: ref, Messages: []session.Message{userMsg(fmt.Sprint("message ", i))}})
		if err != nil {
			t.Fatal(err)
		}
		ref = r.Transcript
	}
	for i := range 20 {
		call(i)
	}
	old := chunks()
	long := time.Now().Add(-2 * time.Hour)
	for _, c := range old {
		if err := os.Chtimes(c, long, long); err != nil {
			t.Fatal(err)
		}
	}
	for i := 20; i < 40; i++ {
		call(i)
	}
	left := chunks()
	for _, c := range old {
		if slices.Contains(left, c) {
			t.Fatalf("a superseded chunk older than an hour survived the rewrite: %s", filepath.Base(c))
		}
	}
	if len(left) == 0 || len(left) > 20 {
		t.Fatalf("%d chunks left, want the last calls' (at most 20)", len(left))
	}
	fresh, err := agent.NewActivities(agent.Config{BaseURL: f.URL(), APIKey: testKey, Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	fresh.Transcripts = store
	f.Push(fakeopenai.FinalStep("ok"))
	if _, err := fresh.Complete(testCtx(t), agent.ModelRequest{Stored: true, SessionID: sid, Base: ref, Messages: []session.Message{userMsg("last")}}); err != nil {
		t.Fatalf("the latest transcript does not load after the clean-up: %v", err)
	}
	if got := sent(t, f); len(got) != 41 || got[0] != "user:message 0" {
		t.Fatalf("the model got %d messages starting %q", len(got), got[0])
	}
}
