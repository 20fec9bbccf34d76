package chat_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/chattest"
	"github.com/sandbot/sandbot/session"
)

// sharePoster is a recPoster that takes files.
type sharePoster struct {
	*recPoster
	mu     sync.Mutex
	shared []chat.SharedFile
}

func (p *sharePoster) ShareFile(_ context.Context, _ chat.Thread, f chat.SharedFile) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shared = append(p.shared, f)
	return nil
}

func (p *sharePoster) files() []chat.SharedFile {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]chat.SharedFile(nil), p.shared...)
}

// sharedSession is a session whose turn 1 shared report.pdf: it answers the
// shared_file query with the bytes until a chat_ref of kind shared_file
// records the post, and its turn state says Posted from then on, as the
// workflow does.
type sharedSession struct {
	posted  atomic.Bool
	queries atomic.Int64
}

func (s *sharedSession) sessions(final session.TurnState) *chattest.Sessions {
	state := func() session.TurnState {
		ts := final
		ts.Shared = []session.SharedFile{{CallID: "c1", Path: "out/report.pdf", Name: "report.pdf", Size: 4, MimeType: "application/pdf", Posted: s.posted.Load()}}
		return ts
	}
	return &chattest.Sessions{
		SendFn:      sendTurn(1, false),
		TurnStateFn: func(string) (session.TurnState, error) { return state(), nil },
		SharedFileFn: func(_ string, req session.SharedFileRequest) (session.SharedFileData, error) {
			s.queries.Add(1)
			return session.SharedFileData{SharedFile: state().Shared[0], Data: []byte("%PDF"), Gone: s.posted.Load()}, nil
		},
		RecordFn: func(_ string, req session.ChatRefRequest) error {
			if req.Kind == session.ChatRefSharedFile && req.Ref == "c1" {
				s.posted.Store(true)
			}
			return nil
		},
	}
}

// TestWatcherSharesAFileOnce: the file a share_file call put up is posted
// once, before the answer, and recorded; a second watcher (a restarted bot,
// or another replica after the lease moved) sees it posted and does not
// post it again.
func TestWatcherSharesAFileOnce(t *testing.T) {
	s := &sharedSession{}
	fin := done(1, 3, "Here is the report.")
	fin.ToolCalls = []session.ToolCallState{{CallID: "c1", Name: session.ShareFileToolName, Status: session.CallCompleted}}
	f := s.sessions(fin)
	p := &sharePoster{recPoster: &recPoster{}}
	c := newTestCore(t, f, newAutoClock(), nil)
	if err := c.HandleMessage(context.Background(), p, msg("e1", "report please")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	got := p.files()
	if len(got) != 1 || got[0].Name != "report.pdf" || string(got[0].Data) != "%PDF" || got[0].Path != "out/report.pdf" {
		t.Fatalf("shared %+v", got)
	}
	if !s.posted.Load() {
		t.Fatal("the post was not recorded in the session")
	}

	// A second bot watching the same session: nothing more is posted.
	p2 := &sharePoster{recPoster: &recPoster{}}
	c2 := newTestCore(t, f, newAutoClock(), nil)
	if err := c2.HandleMessage(context.Background(), p2, msg("e2", "again?")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c2, testThread)
	if n := len(p2.files()); n != 0 {
		t.Fatalf("the second bot posted the file %d more times", n)
	}
	if n := s.queries.Load(); n != 1 {
		t.Fatalf("the bytes were fetched %d times, want 1", n)
	}
}

// TestWatcherNamesASharedFileWhereFilesCannotGo: a Poster without
// FileSharer (the terminal) gets a line naming the file's path and size,
// and the session's bytes are never fetched.
func TestWatcherNamesASharedFileWhereFilesCannotGo(t *testing.T) {
	s := &sharedSession{}
	f := s.sessions(done(1, 3, "done"))
	p := &recPoster{}
	c := newTestCore(t, f, newAutoClock(), nil)
	if err := c.HandleMessage(context.Background(), p, msg("e1", "go")); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	var line string
	for _, tx := range texts(p) {
		if strings.Contains(tx, "report.pdf") {
			line = tx
		}
	}
	if !strings.Contains(line, "out/report.pdf") || !strings.Contains(line, "4 B") || s.queries.Load() != 0 {
		t.Fatalf("texts %q, queries %d", texts(p), s.queries.Load())
	}
}

// TestFilesOnlyMessageAndTheMessageLimit: a message of files alone goes to
// the session with a text that says so; descriptors count against the
// 64 KiB limit, so many long names cannot smuggle a larger message in.
func TestFilesOnlyMessageAndTheMessageLimit(t *testing.T) {
	var got []session.MessageRequest
	var mu sync.Mutex
	f := &chattest.Sessions{SendFn: func(_ session.SessionInput, req session.MessageRequest) (session.MessageResponse, error) {
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		return session.MessageResponse{Turn: 1}, nil
	}, TurnStateFn: func(string) (session.TurnState, error) { return done(1, 2, "ok"), nil }}
	p := &recPoster{}
	c := newTestCore(t, f, newAutoClock(), nil)
	m := msg("e1", "")
	m.Files = []session.Attachment{{Platform: "slack", Name: "a.txt", Size: 3, URL: "https://files.slack.com/a"}}
	if err := c.HandleMessage(context.Background(), p, m); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, c, testThread)
	mu.Lock()
	if len(got) != 1 || got[0].Text == "" || len(got[0].Attachments) != 1 {
		t.Fatalf("sent %+v", got)
	}
	mu.Unlock()

	big := msg("e2", strings.Repeat("x", session.MaxMessageBytes-1000))
	for range 10 {
		big.Files = append(big.Files, session.Attachment{Platform: "slack", Name: strings.Repeat("n", 200), Size: 1, URL: "https://files.slack.com/" + strings.Repeat("u", 300)})
	}
	if err := c.HandleMessage(context.Background(), p, big); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("a message over the limit with its descriptors was sent: %d bytes", got[len(got)-1].MessageBytes())
	}
	if tx := texts(p); len(tx) == 0 || !strings.Contains(tx[len(tx)-1], "limit is 65536 bytes") {
		t.Fatalf("texts %q", tx)
	}
}
