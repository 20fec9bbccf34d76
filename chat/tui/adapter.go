// Package tui is the full-screen terminal front end of sandbot, on Bubble
// Tea. Like chat/console it is a chat.Poster driven by chat.Core, so every
// command, approval and watcher behaves as on Slack and Discord; unlike
// the console it redraws the current turn in place, renders Markdown,
// edits input with history, and lists sessions in a picker.
//
// The core posts and edits cards from its watcher goroutines; the Adapter
// turns each into a message for the Bubble Tea program (Program.Send), so
// all screen state lives in one goroutine (the model's Update). A card is
// only the trigger: the tool-call view is drawn from the session's
// structured turn state (Sessions.TurnState), fetched when the card
// changes, never by re-parsing card text.
//
// Sessions live where the console's do (Location{Platform: "console",
// Channel: "local", Thread: NAME}), so a session started in line mode
// opens here and the other way round.
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	tea "charm.land/bubbletea/v2"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/chat/console"
	"github.com/sandbot/sandbot/session"
)

// HistoryEntries is how much of a session's earlier transcript is shown
// when it is opened: the visible messages of its last few hundred turns.
const HistoryEntries = 2000

// MaxMessageBytes is the longest message the session takes; a longer
// paste or input is refused with a clear error instead of being cut.
const MaxMessageBytes = 64 << 10

// Sessions is what the screen reads directly, beside the core: the turn
// state that draws tool calls, and the list and details of sessions for
// the picker, and a session's earlier transcript when it is opened.
// chat.Sessions implements it.
type Sessions interface {
	TurnState(ctx context.Context, id string) (session.TurnState, error)
	Info(ctx context.Context, id string) (session.Info, error)
	History(ctx context.Context, id string, req session.HistoryRequest) ([]session.HistoryEntry, error)
	List(ctx context.Context, f chat.ListFilter) ([]chat.SessionSummary, error)
}

// Config configures the full-screen front end.
type Config struct {
	// In and Out are the terminal.
	In  io.Reader
	Out io.Writer
	// User is who types: the owner of the sessions started here.
	User     chat.User
	Sessions Sessions
	// Backends are offered when a new session is created (the first is
	// the default).
	Backends []string
	// Model names the model in the status bar.
	Model string
	// UIURL links a workflow in the Temporal UI ("" when there is none);
	// see chat.UIURL.
	UIURL func(workflowID string) string
	// Intro opens the transcript of the first session shown: cmd/dev's
	// banner (where state lives, the Temporal UI, the log), which cannot
	// be printed over the full-screen app.
	Intro string
	// Options are extra Bubble Tea options (tests give a window size).
	Options []tea.ProgramOption
}

// Adapter is the full-screen front end. Build it with New and run it with
// Run and the core.
type Adapter struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	prog *tea.Program
	n    int
}

var (
	_ chat.Poster        = (*Adapter)(nil)
	_ chat.ThreadStarter = (*Adapter)(nil)
	_ chat.Mentioner     = (*Adapter)(nil)
	_ chat.ThreadLinker  = (*Adapter)(nil)
)

// New checks cfg; nothing is drawn until Run. log may be nil.
func New(cfg Config, log *slog.Logger) (*Adapter, error) {
	if cfg.In == nil || cfg.Out == nil || cfg.Sessions == nil {
		return nil, errors.New("tui: Config.In, Out and Sessions are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Backends) == 0 {
		cfg.Backends = []string{"local"}
	}
	if cfg.UIURL == nil {
		cfg.UIURL = func(string) string { return "" }
	}
	return &Adapter{cfg: cfg, log: log.With("platform", console.Platform)}, nil
}

// Run shows the screen until the user quits or ctx ends. It returns nil
// then, or the terminal's error.
func (a *Adapter) Run(ctx context.Context, core chat.Handler) error {
	m := newModel(a.cfg, a.actions(ctx, core))
	opts := append([]tea.ProgramOption{
		tea.WithContext(ctx), tea.WithInput(a.cfg.In), tea.WithOutput(a.cfg.Out),
	}, a.cfg.Options...)
	p := tea.NewProgram(m, opts...)
	a.mu.Lock()
	a.prog = p
	a.mu.Unlock()
	go func() {
		if err := core.Resume(ctx, a, console.Platform); err != nil {
			a.log.Warn("tui: resume watchers failed", "err", err)
			a.send(noticeMsg{text: fmt.Sprintf("could not look for running turns yet (looking again shortly): %v", err)})
		}
	}()
	_, err := p.Run()
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && ctx.Err() == nil {
		return fmt.Errorf("tui: %w", err)
	}
	return nil
}

func (a *Adapter) send(msg tea.Msg) {
	a.mu.Lock()
	p := a.prog
	a.mu.Unlock()
	if p != nil {
		p.Send(msg)
	}
}

// actions are what the screen asks of the core; each runs off the UI
// goroutine (a command may wait for the session) and reports through
// messages.
func (a *Adapter) actions(ctx context.Context, core chat.Handler) actions {
	return actions{
		message: func(th chat.Thread, text, backend string) {
			m := chat.Message{EventID: newEventID(), Thread: th, User: a.cfg.User, Text: text, Backend: backend}
			if err := core.HandleMessage(ctx, a, m); err != nil {
				a.send(noticeMsg{th: th, text: chat.UserMessage(err)})
			}
		},
		action: func(th chat.Thread, id, value, reason string) {
			act := chat.Action{ID: id, Value: value, Reason: reason, User: a.cfg.User, Thread: th,
				Reply: func(_ context.Context, text string) error {
					a.send(noticeMsg{th: th, text: text})
					return nil
				}}
			if err := core.HandleAction(ctx, a, act); err != nil {
				a.send(noticeMsg{th: th, text: chat.UserMessage(err)})
			}
		},
		list: func() {
			rows, err := a.listSessions(ctx)
			a.send(sessionsMsg{rows: rows, err: err})
		},
		history: func(th chat.Thread) {
			h, err := a.cfg.Sessions.History(ctx, th.ID(), session.HistoryRequest{Last: HistoryEntries})
			if err != nil {
				// A session that has not started yet has no history; any
				// other failure is said, and the session still opens.
				a.log.Debug("tui: history", "thread_id", th.ID(), "err", err)
				if !isNotFound(err) {
					a.send(noticeMsg{th: th, text: "Could not read the earlier transcript: " + chat.UserMessage(err)})
				}
			}
			a.send(historyMsg{th: th, entries: h})
		},
		turn: func(th chat.Thread) {
			ts, err := a.cfg.Sessions.TurnState(ctx, th.ID())
			if err == nil {
				a.send(turnMsg{th: th, ts: ts})
			}
		},
	}
}

// ObserveTurn implements chat.TurnObserver: the watcher hands over every
// turn state it renders, so the details view and the status bar show the
// state the card was drawn from, not an older query's answer.
func (a *Adapter) ObserveTurn(th chat.Thread, ts session.TurnState) {
	a.send(turnMsg{th: th, ts: ts})
}

// EndTurn implements chat.TurnObserver: the terminal streams nothing, so
// the core posts the answer as usual.
func (a *Adapter) EndTurn(_ context.Context, th chat.Thread, ts session.TurnState, _ string) (string, bool) {
	a.send(turnMsg{th: th, ts: ts})
	return "", false
}

// Post shows a card: a turn's card brings its turn state along.
func (a *Adapter) Post(ctx context.Context, th chat.Thread, c chat.Card) (string, error) {
	a.mu.Lock()
	a.n++
	ref := fmt.Sprintf("card-%d", a.n)
	a.mu.Unlock()
	a.card(ctx, th, ref, c)
	return ref, nil
}

// Edit replaces a card in place.
func (a *Adapter) Edit(ctx context.Context, th chat.Thread, ref string, c chat.Card) error {
	a.card(ctx, th, ref, c)
	return nil
}

func (a *Adapter) card(ctx context.Context, th chat.Thread, ref string, c chat.Card) {
	msg := cardMsg{th: th, ref: ref, card: c}
	if isTurnCard(c) {
		if ts, err := a.cfg.Sessions.TurnState(ctx, th.ID()); err == nil {
			msg.ts = &ts
		} else {
			a.log.Warn("tui: turn state", "thread_id", th.ID(), "err", err)
		}
	}
	a.send(msg)
}

// isNotFound reports whether err says the session does not exist (yet):
// a name nobody has sent a message to.
func isNotFound(err error) bool { return errors.Is(err, chat.ErrNoSession) }

// isTurnCard tells a turn's progress card (it has a Stop or approval
// button, or the turn footer) from a command's reply card.
func isTurnCard(c chat.Card) bool {
	for _, b := range c.Blocks {
		for _, btn := range b.Buttons {
			switch btn.ID {
			case chat.ActionStop, chat.ActionApprove:
				return true
			}
		}
		if b.Kind == chat.BlockContext && strings.HasPrefix(b.Text, "Turn ") {
			return true
		}
	}
	return false
}

// PostText shows an answer or a command's reply.
func (a *Adapter) PostText(_ context.Context, th chat.Thread, markdown string) (string, error) {
	a.mu.Lock()
	a.n++
	ref := fmt.Sprintf("text-%d", a.n)
	a.mu.Unlock()
	a.send(textMsg{th: th, ref: ref, text: markdown})
	return ref, nil
}

// StartThread opens a new session for a fork, named like the console's.
func (a *Adapter) StartThread(_ context.Context, from chat.Thread, title string) (chat.Thread, error) {
	th := from
	th.Thread = from.Thread + "-fork-" + strings.TrimPrefix(newEventID(), "tui-")[:6]
	a.send(noticeMsg{th: from, text: fmt.Sprintf("Opened session %q for %q; pick it in the session list (Ctrl-S).", th.Thread, title)})
	a.send(refreshMsg{})
	return th, nil
}

// Mention is "@name".
func (a *Adapter) Mention(u chat.User) string {
	if u.Name != "" {
		return "@" + u.Name
	}
	return "@" + u.ID
}

// ThreadLink names a session.
func (a *Adapter) ThreadLink(th chat.Thread) string { return "session " + th.Thread }
