package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/session"
)

// exchange is one tool call and its result, as a soak turn adds them:
// short texts, so the message headers weigh more than the text.
func exchange(i int) []session.Message {
	id := "call_" + strconv.Itoa(i)
	return []session.Message{
		{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{{ID: id, Name: "shell", Arguments: `{"commands":["echo ` + strconv.Itoa(i) + ` >> .m/x"]}`}}},
		{Role: session.RoleTool, ToolCallID: id, Content: "ok " + strconv.Itoa(i)},
	}
}

// A long session keeps its newest two transcripts in the cache (the one
// its next call extends, and the base of a retried call), not one copy per
// model call: in the soak, one session's copies grew a worker by 100 MB
// per 100 turns. Both kept ones are served without the store.
func TestTranscriptCacheKeepsASessionsNewestTwo(t *testing.T) {
	var c transcripts
	var base, prev *cached
	for i := range 500 {
		ref, _, _, _, err := c.extend(nil, "s1", base, 0, exchange(i))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.load(context.Background(), nil, "s1", ref)
		if err != nil {
			t.Fatalf("call %d: the newest transcript is not cached: %v", i, err)
		}
		prev, base = base, got
	}
	if n := len(c.by); n != transcriptsPerSession {
		t.Errorf("the cache holds %d transcripts of one session after 500 calls, want %d", n, transcriptsPerSession)
	}
	if _, ok := c.get(prev.digest); !ok {
		t.Error("the transcript the newest extended (a retried call's base) was evicted")
	}
	if want := prev.size + base.size; c.bytes != want {
		t.Errorf("the cache counts %d bytes, its entries %d", c.bytes, want)
	}
	// Another session's transcripts are kept alongside.
	if _, _, _, _, err := c.extend(nil, "s2", nil, 0, exchange(0)); err != nil {
		t.Fatal(err)
	}
	if n, s := len(c.by), len(c.bySession); n != 3 || s != 2 {
		t.Errorf("two sessions: %d transcripts in %d sessions, want 3 in 2", n, s)
	}
}

// The cache's bound holds for the memory it really keeps: many sessions,
// each with a transcript of short messages (so neither the per-session
// limit nor the text dominates), fill a cache bounded at 4 MiB, and the
// live heap it holds stays within the bound. Before, the bound counted
// MessageSize, which leaves out the 128-byte header of every message, and
// the same cache held three times its bound (12 MB).
func TestTranscriptCacheBoundIsRealMemory(t *testing.T) {
	const limit = 4 << 20
	c := &transcripts{max: limit}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for s := range 200 {
		var msgs []session.Message
		for i := range 250 {
			msgs = append(msgs, exchange(s*1000+i)...)
		}
		if _, _, _, _, err := c.extend(nil, fmt.Sprintf("s%d", s), nil, 0, msgs); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	if c.bytes > limit {
		t.Fatalf("the cache counts %d bytes, over its bound of %d", c.bytes, limit)
	}
	if len(c.by) < 2 {
		t.Fatalf("only %d transcripts cached: the test fills nothing", len(c.by))
	}
	held := int64(after) - int64(before)
	t.Logf("%d transcripts cached, counted %d bytes, live heap grew by %d bytes", len(c.by), c.bytes, held)
	// The heap may hold a little besides the cache (the runtime's own,
	// other goroutines'); a quarter of the bound is room for that.
	if held > limit*5/4 {
		t.Errorf("the cache holds %d bytes of live heap, over its bound of %d", held, limit)
	}
	runtime.KeepAlive(c)
}

// A chunk is written from the messages' encoding made for its digest, in
// the bytes json.Marshal makes of the chunk, so any reader decodes it.
func TestChunkJSONIsTheChunksEncoding(t *testing.T) {
	msgs := []session.Message{
		{Role: session.RoleUser, Content: "a <b> & \"c\"\n\u2028", User: "ann"},
		{Role: session.RoleAssistant, ToolCalls: []session.ToolCall{{ID: "call_1", Name: "shell", Arguments: `{"commands":["true"]}`}}},
		{Role: session.RoleTool, ToolCallID: "call_1", Content: "$ true"},
	}
	for _, c := range []chunk{{Messages: msgs}, {Parent: strings.Repeat("0123456789abcdef", 4), Depth: 31, Messages: msgs}, {Messages: []session.Message{}}} {
		_, body, err := chunkDigest(c.Parent, c.Messages)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := chunkJSON(c.Parent, c.Depth, body); string(got) != string(want) {
			t.Errorf("chunkJSON = %s, want %s", got, want)
		}
	}
}

// A transcript unused for longer than transcriptIdle leaves the cache: the
// soak's forks each ran a turn and went idle, and their transcripts (up
// to a megabyte or two each) stayed until the byte bound, so the worker's
// live heap grew with every fork. A session in use keeps its own.
func TestTranscriptCacheForgetsIdleSessions(t *testing.T) {
	now := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	c := transcripts{now: func() time.Time { return now }}
	refs := map[string]TranscriptRef{}
	bases := map[string]*cached{}
	call := func(s string, i int) {
		t.Helper()
		ref, _, _, _, err := c.extend(nil, s, bases[s], 0, exchange(i))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.load(context.Background(), nil, s, ref)
		if err != nil {
			t.Fatalf("%s: the newest transcript is not cached: %v", s, err)
		}
		refs[s], bases[s] = ref, got
	}
	for i := range 5 {
		call("fork", i) // a fork's one turn, then idle
	}
	for i := range 30 { // the parent goes on, a call a minute
		call("parent", i)
		now = now.Add(time.Minute)
	}
	if _, err := c.load(context.Background(), nil, "fork", refs["fork"]); err == nil {
		t.Error("the idle fork's transcript is still cached after 30 minutes unused")
	}
	if _, ok := c.bySession["fork"]; ok || len(c.bySession) != 1 {
		t.Errorf("the cache still records %d sessions (%v), want the parent's alone", len(c.bySession), c.bySession)
	}
	if want := bases["parent"].size; c.bytes < want || len(c.by) != transcriptsPerSession {
		t.Errorf("holds %d transcripts, %d bytes: want the parent's newest %d", len(c.by), c.bytes, transcriptsPerSession)
	}
	if _, err := c.load(context.Background(), nil, "parent", refs["parent"]); err != nil {
		t.Errorf("the parent's newest transcript, used a minute ago, was evicted: %v", err)
	}
}
