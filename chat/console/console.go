// Package console is the terminal front end of sandbot: it reads lines
// from a reader (a terminal, a pipe, a test) and writes the session to a
// writer. It offers everything the chat platforms do, through chat.Core:
// messages, the same commands, progress cards printed as they change, and
// approval prompts answered by typing.
//
// Sessions live in Location{Platform: "console", Channel: "local",
// Thread: NAME}; NAME is "default" until /session NAME switches it, so
// several terminal sessions can be kept and resumed.
package console

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sandbot/sandbot/chat"
)

// Platform is the Location.Platform of console sessions.
const Platform = "console"

// Budget is the console's pacing: a terminal has no rate limit, but a
// status line per poll would scroll everything else away. A terminal has
// no size limit either: a command awaiting approval is always shown in
// full, never attached.
var Budget = chat.Budget{MinEditInterval: 300 * time.Millisecond, MaxApprovalChars: -1}

// Config configures the terminal front end.
type Config struct {
	// In is read line by line (a terminal, a pipe, a test); Out shows the
	// sessions.
	In  io.Reader
	Out io.Writer
	// User is who types: the owner of the sessions started here.
	User chat.User
}

// Adapter is the terminal front end. Build it with New and run it with
// Run and the core, the lifecycle every adapter shares.
type Adapter struct {
	cfg Config
	log *slog.Logger
	con *console
}

// New checks cfg and builds the terminal front end; nothing is read until
// Run. log may be nil.
func New(cfg Config, log *slog.Logger) (*Adapter, error) {
	if cfg.In == nil || cfg.Out == nil {
		return nil, errors.New("console: Config.In and Config.Out are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Adapter{cfg: cfg, log: log.With("platform", Platform), con: newConsole(cfg.Out)}, nil
}

// threadWaiter is an optional capability of the core given to Run (the
// chat core has it): wait until no turn is watched in a thread.
type threadWaiter interface {
	WaitThread(ctx context.Context, th chat.Thread) error
}

// Run drives the terminal until In ends or ctx is cancelled, handing lines
// to core. Plain lines are messages to the current session; lines starting
// with / or ! are commands (see /help); /session [NAME] shows or switches
// the session and /quit ends Run. While an approval is pending in the
// current session, "a"/"approve", "A"/"always" and "r [reason]"/"reject
// [reason]" answer it.
//
// When In ends, Run waits for the current session's running turn to finish
// (so `echo task | sandbot dev` prints the answer) unless ctx ends first,
// if core can tell (threadWaiter). It returns nil then, or when ctx is
// cancelled, and an error only if reading In fails.
func (a *Adapter) Run(ctx context.Context, core chat.Handler) error {
	con, user := a.con, a.cfg.User
	con.printf("sandbot console: session %q. Type a task, /help for commands, /session NAME to switch, /quit to leave.\n", con.thread().Thread)

	lines := make(chan string)
	readErr := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		err := readLines(a.cfg.In, MaxLineBytes, func(line string, tooLong int) bool {
			if tooLong > 0 {
				con.printf("(error) that line is %d bytes; a message may be at most %d bytes. It was not sent.\n", tooLong, MaxLineBytes)
				return true
			}
			select {
			case lines <- line:
				return true
			case <-stop:
				return false
			}
		})
		readErr <- err
		close(lines)
	}()

	// A turn that was running when the terminal last closed (or cmd/dev
	// restarted) is picked up again: its progress and answer show here.
	if err := core.Resume(ctx, con, Platform); err != nil {
		a.log.Warn("console: resume watchers failed", "err", err)
		con.printf("(could not look for running turns yet, looking again shortly: %v)\n", err)
	}

	// Commands may wait for the session (a /pause waits for the running
	// turn, which may wait for an approval typed here), so they run beside
	// the input loop; messages and approvals run in order.
	var cmds sync.WaitGroup
	defer cmds.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				if err := <-readErr; err != nil {
					return fmt.Errorf("console: read input: %w", err)
				}
				cmds.Wait()
				return a.drain(ctx, core)
			}
			if quit := con.handle(ctx, core, user, line, &cmds); quit {
				return nil
			}
		}
	}
}

// ErrUnanswerable is returned by Run when input has ended while the
// current session waits for an approval: nobody is left to answer it, and
// waiting would hang a script forever.
var ErrUnanswerable = errors.New("an approval is pending and input has ended, so nobody can answer it")

// drain waits, after In ended, for the current session's turn to finish,
// if core can tell (threadWaiter). A pending approval ends the wait with
// ErrUnanswerable.
func (a *Adapter) drain(ctx context.Context, core chat.Handler) error {
	con := a.con
	w, ok := core.(threadWaiter)
	if !ok {
		return nil
	}
	th := con.thread()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.WaitThread(ctx, th) // fails only when ctx ends
	}()
	for {
		pending := con.approvalChanged()
		if con.pendingApproval(th) {
			con.printf("(error) %v; run it in a terminal, or pipe the answer (a, A or r REASON) after the task.\n", ErrUnanswerable)
			return ErrUnanswerable
		}
		select {
		case <-done:
			return nil
		case <-pending:
		}
	}
}

// MaxLineBytes is the longest input line read as a message: the session's
// message limit. A longer line is reported and skipped, not cut.
const MaxLineBytes = 64 << 10

// readLines calls fn with each line of r (without its line ending) until r
// ends or fn returns false. A line longer than max is skipped whole: fn
// gets "" and its length instead. It returns r's error, if not io.EOF.
func readLines(r io.Reader, max int, fn func(line string, tooLong int) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	n := 0 // bytes of the current line, also those dropped
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		if len(buf)+len(chunk) <= max+1 { // room for the newline
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if n > 0 {
			size := n
			if err == nil { // the chunk ends with its newline
				size--
			}
			keep := true
			if size > max {
				keep = fn("", size)
			} else {
				keep = fn(strings.TrimSuffix(strings.TrimSuffix(string(buf), "\n"), "\r"), 0)
			}
			if !keep {
				return nil
			}
		}
		buf, n = buf[:0], 0
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// handle runs one input line. It reports whether the user quit.
func (c *console) handle(ctx context.Context, core chat.Handler, user chat.User, line string, cmds *sync.WaitGroup) bool {
	text := strings.TrimSpace(line)
	if text == "" {
		return false
	}
	word, rest, _ := strings.Cut(text, " ")
	switch strings.ToLower(word) {
	case "/quit", "/exit":
		return true
	case "/session":
		name := strings.TrimSpace(rest)
		if name == "" {
			c.printf("Current session: %s\n", c.thread().Thread)
			return false
		}
		if strings.ContainsAny(name, " \t") {
			c.printf("A session name is one word, like /session experiment.\n")
			return false
		}
		c.switchTo(name)
		c.printf("Switched to session %q.\n", name)
		return false
	}
	th := c.thread()
	if a, ok := c.approvalAction(th, text); ok {
		a.User, a.Thread = user, th
		a.Reply = func(_ context.Context, msg string) error {
			c.printf("(only you) %s\n", msg)
			return nil
		}
		if err := core.HandleAction(ctx, c, a); err != nil {
			c.printf("(error) %v\n", err)
		} else {
			c.noteAnswered(a.Value)
		}
		return false
	}
	m := chat.Message{EventID: newEventID(), Thread: th, User: user, Text: text}
	if strings.HasPrefix(text, "/") || strings.HasPrefix(text, "!") {
		cmds.Add(1)
		go func() {
			defer cmds.Done()
			_ = core.HandleMessage(ctx, c, m) // the core already answered in the thread
		}()
		return false
	}
	_ = core.HandleMessage(ctx, c, m)
	return false
}

// approvalAction turns an approval answer into an Action, if one is pending
// in th and text is an answer.
func (c *console) approvalAction(th chat.Thread, text string) (chat.Action, bool) {
	c.mu.Lock()
	value, pending := c.approvals[th.ID()]
	c.mu.Unlock()
	if !pending {
		return chat.Action{}, false
	}
	word, reason, _ := strings.Cut(text, " ")
	var id string
	switch word {
	case "a", "approve", "y", "yes":
		if reason != "" {
			return chat.Action{}, false
		}
		id = chat.ActionApprove
	case "A", "always":
		if reason != "" {
			return chat.Action{}, false
		}
		id = chat.ActionApproveAlways
	case "r", "reject", "n", "no":
		id = chat.ActionReject
	default:
		return chat.Action{}, false
	}
	return chat.Action{ID: id, Value: value, Reason: strings.TrimSpace(reason)}, true
}

// newEventID is unique across runs: console sessions persist, and the
// workflow ignores an event ID it has seen.
func newEventID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "console-" + hex.EncodeToString(b[:])
}
