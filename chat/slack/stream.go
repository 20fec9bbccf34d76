package slack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/internal/lru"
	"github.com/sandbot/sandbot/chat/internal/pace"
	"github.com/sandbot/sandbot/chat/internal/safetext"
	"github.com/sandbot/sandbot/internal/metrics"
	"github.com/sandbot/sandbot/session"
)

// Native streaming (Config.Streaming, SANDBOT_SLACK_STREAMING): a turn
// that runs tool calls gets a streamed message in its thread
// (chat.startStream), the calls appear in it as task updates as they run
// (chat.appendStream), and the turn's answer ends it (chat.stopStream with
// the answer as markdown_text) instead of a message of its own.
//
// The card stays as it is. Approvals, the Stop button and the complete
// commands an approver must read are the card's: a stream carries text
// and task updates, and its buttons (a blocks chunk) were never tested
// against Slack. So the stream is the turn's timeline and answer, the card
// its controls. A turn without tool calls streams nothing and answers as
// usual. When the stream cannot start (no recipient known on this
// replica, Slack refused, the budget is spent) or stop, the answer is
// posted as usual: it is never lost, and never posted twice.
//
// Rates: chat.startStream and chat.stopStream are Tier 2 (budgeted
// together at streamStartsPerMinute a workspace, a turn costs one of each),
// chat.appendStream Tier 4 (streamAppendsPerMinute). None of them is a
// chat.update, so streaming spends nothing of the edit budget the card
// lives on (budget.go). Appends coalesce: each sends every task that
// changed since the last.

// Streaming limits.
const (
	streamStartsPerMinute  = 20
	streamBurst            = 6
	streamAppendsPerMinute = 100
	// maxStreamText is markdown_text's limit per call.
	maxStreamText = 12000
	// streamEndWait bounds how long EndTurn waits for the stream's last
	// task updates before it gives the answer up to a normal post.
	streamEndWait = 10 * time.Second
	// streamStopWait is the longest EndTurn waits for the Tier 2 budget
	// to stop the stream with the answer in it.
	streamStopWait = 2 * time.Second
	maxTaskTitle   = 150
	maxTaskOutput  = 600
)

// streams runs the streamed messages of turns. Safe for concurrent use.
type streams struct {
	a       *Adapter
	on      bool
	starts  *updateBudget // chat.startStream and chat.stopStream
	appends *updateBudget

	mu sync.Mutex
	m  map[string]*turnStream // by workflow ID
	// ended is the last turn whose stream ended, by workflow ID: late
	// states of it start nothing.
	ended *lru.Cache[string, int]
}

// turnStream is one turn's streamed message.
type turnStream struct {
	th   chat.Thread
	turn int
	ts   string // the streamed message, "" until started
	dead bool   // no (more) streaming for this turn
	// haltedTS are the streams Slack stopped while this turn's start was
	// on its way (st.ts still ""): the start's answer may name one.
	haltedTS []string
	last     []slackgo.TaskUpdateChunk // newest tasks observed
	sent     map[string]slackgo.TaskUpdateChunk
	running  bool
	idle     chan struct{} // closed when the sender ends
}

func newStreams(a *Adapter, on bool) *streams {
	return &streams{
		a: a, on: on,
		// Tier 2, in bursts of streamBurst (a turn spends one start and
		// one stop).
		starts: &updateBudget{perMinute: streamStartsPerMinute, window: budgetWindow, now: time.Now,
			smooth: pace.NewBucket(budgetWindow/streamStartsPerMinute, streamBurst)},
		appends: newUpdateBudget(streamAppendsPerMinute, budgetWindow),
		m:       map[string]*turnStream{},
		ended:   lru.New[string, int](10000),
	}
}

// observe updates the turn's tasks and wakes its sender.
func (s *streams) observe(th chat.Thread, ts session.TurnState) {
	if !s.on || th.Thread == "" || len(ts.ToolCalls) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := th.ID()
	st := s.m[id]
	if st != nil && st.turn > ts.Turn {
		return // a stale state
	}
	if last, ok := s.ended.Get(id); ok && last >= ts.Turn {
		return
	}
	if st == nil || st.turn < ts.Turn {
		st = &turnStream{th: th, turn: ts.Turn, sent: map[string]slackgo.TaskUpdateChunk{}}
		s.m[id] = st
	}
	st.last = tasks(ts)
	if !st.running && !st.dead {
		st.running, st.idle = true, make(chan struct{})
		s.a.signals.track()
		go s.run(st)
	}
}

// run sends the turn's task changes until none is left.
func (s *streams) run(st *turnStream) {
	defer s.a.signals.untrack()
	ctx := s.a.runContext()
	for {
		s.mu.Lock()
		chunks := st.changedLocked()
		if len(chunks) == 0 || st.dead || ctx.Err() != nil {
			st.running = false
			close(st.idle)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.send(ctx, st, chunks)
	}
}

// changedLocked are the tasks that differ from what the stream shows.
func (st *turnStream) changedLocked() []slackgo.StreamChunk {
	var out []slackgo.StreamChunk
	for _, t := range st.last {
		if !sameTask(st.sent[t.ID], t) {
			out = append(out, t)
		}
	}
	return out
}

// sameTask compares the fields tasks sets (never Sources).
func sameTask(a, b slackgo.TaskUpdateChunk) bool {
	return a.ID == b.ID && a.Title == b.Title && a.Status == b.Status && a.Details == b.Details && a.Output == b.Output
}

// send starts the stream with chunks, or appends them.
func (s *streams) send(ctx context.Context, st *turnStream, chunks []slackgo.StreamChunk) {
	s.mu.Lock()
	started := st.ts != ""
	s.mu.Unlock()
	var err error
	if !started {
		err = s.start(ctx, st, chunks)
	} else {
		err = s.appendTasks(ctx, st, chunks)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		// The card shows the calls anyway; the answer goes out as usual.
		st.dead = true
		s.a.log.Info("slack: streaming this turn failed; its answer is posted as usual", "thread_id", st.th.ID(), "turn", st.turn, "err", err)
		return
	}
	for _, c := range chunks {
		t := c.(slackgo.TaskUpdateChunk)
		st.sent[t.ID] = t
	}
}

func (s *streams) start(ctx context.Context, st *turnStream, chunks []slackgo.StreamChunk) error {
	user, ok := s.a.askers.Get(st.th.ID())
	if !ok {
		return fmt.Errorf("no recipient: nobody wrote to this thread through this bot process")
	}
	// A stream is a bonus: it starts only when the Tier 2 budget has room
	// now, which keeps room for the stops of the streams already open.
	if d := s.starts.wouldWait(); d > 0 {
		return fmt.Errorf("chat.startStream budget spent for %v", d)
	}
	if err := s.starts.acquire(ctx); err != nil {
		return err
	}
	var ts string
	err := s.a.callOnce(ctx, "chat.startStream", func(ctx context.Context) error {
		var err error
		_, ts, err = s.a.api.StartStreamContext(ctx, st.th.Channel,
			slackgo.MsgOptionTS(st.th.Thread),
			slackgo.MsgOptionRecipientUserID(user), slackgo.MsgOptionRecipientTeamID(st.th.Workspace),
			slackgo.MsgOptionTaskDisplayMode(slackgo.TaskDisplayModeTimeline),
			slackgo.MsgOptionChunks(chunks...))
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	st.ts = ts
	if slices.Contains(st.haltedTS, ts) {
		st.dead = true // the user stopped it before its start answered
	}
	s.mu.Unlock()
	s.a.signals.posted(st.th) // a new message clears the thread status
	return nil
}

func (s *streams) appendTasks(ctx context.Context, st *turnStream, chunks []slackgo.StreamChunk) error {
	if err := s.appends.acquire(ctx); err != nil {
		return err
	}
	return s.a.callOnce(ctx, "chat.appendStream", func(ctx context.Context) error {
		_, _, err := s.a.api.AppendStreamContext(ctx, st.th.Channel, st.ts, slackgo.MsgOptionChunks(chunks...))
		return err
	})
}

// end finishes the turn's stream: its last task updates and the answer
// go into chat.stopStream. It reports whether the answer went in.
func (s *streams) end(ctx context.Context, th chat.Thread, ts session.TurnState, answer string) (string, bool) {
	if !s.on {
		return "", false
	}
	s.mu.Lock()
	st := s.m[th.ID()]
	if st == nil || st.turn != ts.Turn {
		s.mu.Unlock()
		return "", false
	}
	if len(ts.ToolCalls) > 0 {
		st.last = tasks(ts)
	}
	idle := st.idle
	running := st.running
	s.mu.Unlock()
	if running {
		// Let the sender finish what it is sending (the start, usually).
		wctx, cancel := context.WithTimeout(ctx, streamEndWait)
		select {
		case <-idle:
		case <-wctx.Done():
		}
		cancel()
	}
	s.mu.Lock()
	delete(s.m, th.ID())
	s.ended.Put(th.ID(), ts.Turn)
	if st.dead || st.ts == "" || st.running {
		s.mu.Unlock()
		return "", false
	}
	chunks := st.changedLocked()
	s.mu.Unlock()
	text := neutralizeMarkdown(answer)
	took := text != "" && TextLen(text) <= maxStreamText
	var base []slackgo.MsgOption // the last task updates
	if len(chunks) > 0 {
		base = append(base, slackgo.MsgOptionChunks(chunks...))
	}
	opts := base
	if took {
		opts = append(slices.Clip(base), slackgo.MsgOptionMarkdownText(text))
	}
	stop := func(ctx context.Context, opts []slackgo.MsgOption) error {
		if err := s.starts.acquire(ctx); err != nil {
			return err
		}
		return s.a.callOnce(ctx, "chat.stopStream", func(ctx context.Context) error {
			_, _, err := s.a.api.StopStreamContext(ctx, th.Channel, st.ts, opts...)
			return err
		})
	}
	if d := s.starts.wouldWait(); d > streamStopWait {
		// The answer must not wait for the budget: it is posted as usual,
		// and the stream is stopped (without it) when the budget allows.
		s.a.signals.track()
		go func() {
			defer s.a.signals.untrack()
			if err := stop(s.a.runContext(), base); err != nil {
				s.a.log.Info("slack: stopping the turn's stream failed", "thread_id", th.ID(), "turn", ts.Turn, "err", err)
			}
		}()
		return "", false
	}
	if err := stop(ctx, opts); err != nil {
		s.a.log.Info("slack: stopping the turn's stream failed; its answer is posted as usual", "thread_id", th.ID(), "turn", ts.Turn, "err", err)
		return "", false
	}
	return st.ts, took
}

// wouldWait is how long b would make a call wait now.
func (b *updateBudget) wouldWait() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.delayLocked(b.now())
}

// halted marks the streams Slack stopped on a user's native stop: no more
// appends go to them. A stop can arrive while the turn's chat.startStream
// is still waiting for its answer (Slack made the stream, we do not know
// its ts yet): the stopped timestamps are kept for start to check.
func (s *streams) halted(th chat.Thread, tss []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[th.ID()]
	switch {
	case st == nil:
	case st.ts == "":
		st.haltedTS = append(st.haltedTS, tss...)
	case slices.Contains(tss, st.ts):
		st.dead = true
	}
}

// tasks are a turn's tool calls as task updates.
func tasks(ts session.TurnState) []slackgo.TaskUpdateChunk {
	out := make([]slackgo.TaskUpdateChunk, 0, len(ts.ToolCalls))
	for _, c := range ts.ToolCalls {
		t := slackgo.NewTaskUpdateChunk(c.CallID, taskTitle(c))
		switch c.Status {
		case session.CallPending:
			t.Status = slackgo.TaskCardStatusPending
		case session.CallAwaitingApproval:
			t.Status, t.Details = slackgo.TaskCardStatusPending, "Waiting for approval: the buttons are on the card."
		case session.CallRunning:
			t.Status = slackgo.TaskCardStatusInProgress
		case session.CallCompleted:
			t.Status = slackgo.TaskCardStatusComplete
			if c.ExitCode != nil && *c.ExitCode != 0 {
				t.Status, t.Details = slackgo.TaskCardStatusError, fmt.Sprintf("exit code %d", *c.ExitCode)
			}
		case session.CallRejected:
			t.Status, t.Details = slackgo.TaskCardStatusError, "Rejected."
		default:
			t.Status, t.Details = slackgo.TaskCardStatusError, neutralizeMarkdown(cutRunes(c.Error, maxTaskOutput))
		}
		if c.Status == session.CallCompleted && c.Output != "" {
			out := c.Output
			if r := []rune(out); len(r) > maxTaskOutput {
				out = "…" + string(r[len(r)-maxTaskOutput:])
			}
			t.Output = neutralizeMarkdown(out)
		}
		out = append(out, t)
	}
	return out
}

// taskTitle names a call by its first command.
func taskTitle(c session.ToolCallState) string {
	title := c.Name
	if len(c.Commands) > 0 {
		title = oneLine(c.Commands[0])
		if n := len(c.Commands) - 1; n > 0 {
			title += fmt.Sprintf(" (+%d more)", n)
		}
	}
	return neutralizeMarkdown(cutRunes(title, maxTaskTitle))
}

// neutralizeMarkdown makes text from the model or a command safe for a
// stream's Markdown: controls and bidi overrides neutralised, and Slack's
// special sequences (<!here>, <@U…>, <#C…>) broken so they cannot ping
// anyone or forge a mention; the text reads the same.
func neutralizeMarkdown(s string) string {
	s = safetext.Text(s)
	return strings.NewReplacer("<!", "<\u200b!", "<@", "<\u200b@", "<#", "<\u200b#").Replace(s)
}

// callOnce is one Web API call without the 429 retries of call: a stream
// or a status is not worth waiting out a rate limit for.
func (a *Adapter) callOnce(ctx context.Context, method string, fn func(ctx context.Context) error) error {
	err := fn(ctx)
	metrics.ChatCall(Platform, method, err != nil)
	if err != nil {
		return fmt.Errorf("slack: %s: %w", method, err)
	}
	return nil
}
