package chat

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/sandbot/sandbot/session"
)

// Command names (without the "/" or "!").
const (
	CmdHelp     = "help"
	CmdStatus   = "status"
	CmdHistory  = "history"
	CmdStop     = "stop"
	CmdPause    = "pause"
	CmdResume   = "resume"
	CmdBackend  = "backend"
	CmdFork     = "fork"
	CmdSessions = "sessions"
	CmdDestroy  = "destroy"
)

// Command is a parsed bot command. Platforms with native slash commands
// (Discord) fill it from their options instead of parsing text.
type Command struct {
	// Name is one of the Cmd* constants.
	Name string
	// Args are the words after the name (quotes group words).
	Args []string
	// Title and Backend are /fork's and /backend's arguments.
	Title   string
	Backend string
	// N is /history's entry count (0: DefaultHistory).
	N int
	// Confirm is /destroy's "confirm".
	Confirm bool
}

// Reply is a command's answer. Ephemeral asks the adapter to show it only
// to the user who asked, where the platform can (native slash commands);
// answers to commands typed in a thread are posted there.
type Reply struct {
	Text      string
	Ephemeral bool
	Card      *Card
}

// History limits.
const (
	DefaultHistory = 10
	MaxHistory     = 50
)

var commands = []struct{ name, usage, help string }{
	{CmdHelp, "/help", "this list"},
	{CmdStatus, "/status", "backend, turns, state, owner and a link to the workflow"},
	{CmdHistory, "/history [N]", fmt.Sprintf("the last N transcript entries (default %d, at most %d)", DefaultHistory, MaxHistory)},
	{CmdStop, "/stop", "stop the running turn (the agent is told you interrupted)"},
	{CmdPause, "/pause", "pause the session after the running turn; a message or /resume continues"},
	{CmdResume, "/resume", "resume a paused session"},
	{CmdBackend, "/backend [NAME]", "show the sandbox backend, or switch to NAME at the next turn boundary"},
	{CmdFork, `/fork ["title"] [backend]`, "copy this session (conversation and workspace) into a new thread"},
	{CmdSessions, "/sessions [all]", "your running sessions in this channel (all: everyone's)"},
	{CmdDestroy, "/destroy confirm", "end the session and delete its sandbox and snapshots"},
}

var commandAliases = map[string]string{"switch": CmdBackend, "cancel": CmdStop, "h": CmdHelp, "?": CmdHelp}

// helpText lists the commands.
func helpText(backends []string) string {
	var b strings.Builder
	b.WriteString("**Commands** (type them in a session thread; `!` works as well as `/`):\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "- `%s`: %s\n", c.usage, c.help)
	}
	if len(backends) > 0 {
		fmt.Fprintf(&b, "Backends: %s\n", strings.Join(backends, ", "))
	}
	b.WriteString("Anything else is a message to the agent.")
	return b.String()
}

// ParseCommand recognises a command at the start of text. ok is false when
// text is an ordinary message: it does not start with "/" or "!", the first
// word looks like a path ("/usr/bin/env is missing"), or it is a "!" word
// that is no command ("!important: ..."). For a "/" word that is no command,
// ok is true and err says so. Bad arguments give ok and an error with the
// usage.
func ParseCommand(text string) (cmd Command, ok bool, err error) {
	text = strings.TrimSpace(text)
	if text == "" || (text[0] != '/' && text[0] != '!') {
		return Command{}, false, nil
	}
	bang := text[0] == '!'
	word, rest, _ := strings.Cut(text[1:], " ")
	if i := strings.IndexAny(word, "\n\t"); i >= 0 {
		word, rest = word[:i], word[i+1:]+" "+rest
	}
	name := strings.ToLower(word)
	if a, ok := commandAliases[name]; ok {
		name = a
	}
	known := false
	for _, c := range commands {
		known = known || c.name == name
	}
	if !known {
		if bang || name == "" || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && r != '-' }) >= 0 {
			return Command{}, false, nil
		}
		return Command{Name: name}, true, userErrorf("There is no command /%s.", name)
	}
	args, err := splitArgs(rest)
	if err != nil {
		return Command{Name: name}, true, err
	}
	cmd = Command{Name: name, Args: args}
	usage := func() error {
		for _, c := range commands {
			if c.name == name {
				return userErrorf("Usage: %s (%s).", c.usage, c.help)
			}
		}
		return nil
	}
	switch name {
	case CmdHistory:
		if len(args) > 1 {
			return cmd, true, usage()
		}
		if len(args) == 1 {
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return cmd, true, userErrorf("/history takes a count from 1 to %d, not %q.", MaxHistory, args[0])
			}
			cmd.N = min(n, MaxHistory)
		}
	case CmdBackend:
		if len(args) > 1 {
			return cmd, true, usage()
		}
		if len(args) == 1 {
			cmd.Backend = args[0]
		}
	case CmdFork:
		if len(args) > 2 {
			return cmd, true, userErrorf(`Put a title with spaces in quotes: /fork "my experiment" docker.`)
		}
		if len(args) > 0 {
			cmd.Title = args[0]
		}
		if len(args) > 1 {
			cmd.Backend = args[1]
		}
	case CmdDestroy:
		if len(args) > 1 || len(args) == 1 && strings.ToLower(args[0]) != "confirm" {
			return cmd, true, usage()
		}
		cmd.Confirm = len(args) == 1
	case CmdSessions:
		if len(args) > 1 || len(args) == 1 && strings.ToLower(args[0]) != "all" {
			return cmd, true, usage()
		}
	default:
		if len(args) > 0 {
			return cmd, true, userErrorf("/%s takes no arguments.", name)
		}
	}
	return cmd, true, nil
}

// splitArgs splits on spaces, keeping "double", 'single' and “curly”
// quoted words together (chat apps often turn quotes curly).
func splitArgs(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote || quote == '“' && r == '”' {
				quote = 0
				continue
			}
			cur.WriteRune(r)
		case r == '"' || r == '\'' || r == '“':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, userErrorf("A quote is not closed.")
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args, nil
}

// HandleCommand runs a command for u in thread th and returns the answer
// for the adapter to deliver (HandleMessage posts it in the thread). Errors
// the user can act on (including a workflow's "not available yet") come
// back as the Reply's text with a nil error; the error is for internal
// failures, whose Reply is a generic line.
func (c *Core) HandleCommand(ctx context.Context, p Poster, th Thread, u User, cmd Command) (Reply, error) {
	if err := c.authorize(ctx, u, th); err != nil {
		return Reply{Text: UserMessage(err), Ephemeral: true}, nil
	}
	id := th.ID()
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, c.cfg.CallTimeout) }
	long := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, c.cfg.LongCallTimeout) }
	fail := func(op string, err error) (Reply, error) {
		return Reply{Text: UserMessage(err), Ephemeral: true}, c.internal(err, op, id)
	}
	switch cmd.Name {
	case CmdHelp:
		return Reply{Text: helpText(c.cfg.Backends), Ephemeral: true}, nil
	case CmdStatus:
		cctx, cancel := short()
		defer cancel()
		return c.status(cctx, p, th)
	case CmdHistory:
		n := cmd.N
		if n <= 0 {
			n = DefaultHistory
		}
		cctx, cancel := short()
		defer cancel()
		h, err := c.s.History(cctx, id, session.HistoryRequest{Last: min(n, MaxHistory)})
		if err != nil {
			return fail("history", err)
		}
		return Reply{Text: renderHistory(h, 3500), Ephemeral: true}, nil
	case CmdStop:
		cctx, cancel := long()
		defer cancel()
		r, err := c.s.Stop(cctx, id, session.StopRequest{User: u})
		if err != nil {
			return fail("stop", err)
		}
		c.nudge(ctx, p, th)
		if !r.Stopped {
			return Reply{Text: "No turn is running.", Ephemeral: true}, nil
		}
		return Reply{Text: fmt.Sprintf("Stopped turn %d.", r.Turn)}, nil
	case CmdPause:
		cctx, cancel := long()
		defer cancel()
		r, err := c.s.Pause(cctx, id, session.PauseRequest{User: u})
		if err != nil {
			return fail("pause", err)
		}
		return Reply{Text: fmt.Sprintf("Paused after turn %d. Send a message or /resume to continue.", r.Turn)}, nil
	case CmdResume:
		cctx, cancel := short()
		defer cancel()
		if _, err := c.s.Resume(cctx, id, session.ResumeRequest{User: u}); err != nil {
			return fail("resume", err)
		}
		// Messages queued while paused start a turn now: watch it.
		if ts, err := c.s.TurnState(cctx, id); err == nil {
			switch {
			case ts.Status.Active():
				c.watch(p, th, ts.Turn, false)
			case ts.Queued > 0:
				c.watch(p, th, ts.Turn+1, true)
			}
		}
		return Reply{Text: "Resumed."}, nil
	case CmdBackend:
		if cmd.Backend == "" {
			cctx, cancel := short()
			defer cancel()
			ts, err := c.s.TurnState(cctx, id)
			if err != nil {
				return fail("backend", err)
			}
			text := "Backend: **" + ts.Backend + "**"
			if ts.PendingBackend != "" {
				text += " (switching to **" + ts.PendingBackend + "** at the next turn boundary)"
			}
			if len(c.cfg.Backends) > 0 {
				text += ". Available: " + strings.Join(c.cfg.Backends, ", ")
			}
			return Reply{Text: text + ".", Ephemeral: true}, nil
		}
		if msg := c.checkServed(ctx, cmd.Backend); msg != "" {
			return Reply{Text: msg, Ephemeral: true}, nil
		}
		cctx, cancel := long()
		defer cancel()
		r, err := c.s.SetBackend(cctx, id, session.SetBackendRequest{Backend: cmd.Backend, User: u})
		if err != nil {
			return fail("backend", err)
		}
		switch {
		case r.From == r.To:
			return Reply{Text: "The backend already is **" + r.To + "**.", Ephemeral: true}, nil
		case r.Deferred:
			return Reply{Text: fmt.Sprintf("Backend switches from **%s** to **%s** when the running turn ends; the workspace moves with it.", r.From, r.To)}, nil
		}
		return Reply{Text: fmt.Sprintf("Switching backend from **%s** to **%s**; the workspace moves with it.", r.From, r.To)}, nil
	case CmdFork:
		return c.fork(ctx, p, th, u, cmd)
	case CmdSessions:
		cctx, cancel := short()
		defer cancel()
		all := len(cmd.Args) > 0 && strings.EqualFold(cmd.Args[0], "all")
		return c.sessions(cctx, p, th, u, all)
	case CmdDestroy:
		if !cmd.Confirm {
			return Reply{Text: "This ends the session and deletes its sandbox and snapshots; it cannot be undone. Send `/destroy confirm` to go ahead.", Ephemeral: true}, nil
		}
		cctx, cancel := long()
		defer cancel()
		r, err := c.s.Destroy(cctx, id, session.DestroyRequest{User: u})
		if err != nil {
			return fail("destroy", err)
		}
		return Reply{Text: fmt.Sprintf("Session destroyed after %d %s; its sandbox and snapshots are gone. A new message here starts a fresh session.", r.Turns, plural(r.Turns, "turn", "turns"))}, nil
	}
	return Reply{Text: fmt.Sprintf("There is no command /%s.\n\n%s", cmd.Name, helpText(c.cfg.Backends)), Ephemeral: true}, nil
}

// checkServed returns a user-facing refusal when backend is not served by
// any running worker, or "" when it is (or nobody can tell).
func (c *Core) checkServed(ctx context.Context, backend string) string {
	if backend == "" || c.cfg.ServedBackends == nil {
		return ""
	}
	served, err := c.cfg.ServedBackends(ctx)
	if err != nil {
		c.log.Warn("cannot list served backends", "error", err)
		return ""
	}
	for _, b := range served {
		if b == backend {
			return ""
		}
	}
	if len(served) == 0 {
		return fmt.Sprintf("Backend **%s** is not available: no worker is serving any backend right now.", backend)
	}
	return fmt.Sprintf("Backend **%s** is not available: no running worker serves it. Available: %s.", backend, strings.Join(served, ", "))
}
