package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Command names (without the "/" or "!").
const (
	CmdHelp     = "help"
	CmdStatus   = "status"
	CmdHistory  = "history"
	CmdStop     = "stop"
	CmdPause    = "pause"
	CmdResume   = "resume"
	CmdCompact  = "compact"
	CmdBackend  = "backend"
	CmdFork     = "fork"
	CmdSessions = "sessions"
	CmdDestroy  = "destroy"
	CmdRewind   = "rewind"
	CmdRepo     = "repo"
	CmdTitle    = "title"
	CmdModel    = "model"
	CmdDiff     = "diff"
	CmdPR       = "pr"
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
	// N is /history's entry count (0: DefaultHistory), or the turn of
	// /rewind N and /fork @N (0: the latest).
	N int
	// Confirm is /destroy's and /rewind's "confirm".
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

// command is one row of the command table: how a command is named,
// parsed, described in /help and run. Each lives in cmd_<name>.go with its
// rendering.
type command struct {
	name    string
	aliases []string
	// usage and help make the command's /help line (and its usage error).
	usage, help string
	// parse checks cmd.Args and fills cmd's other fields; it returns
	// errUsage for arguments that do not fit the usage. nil means the
	// command takes no arguments.
	parse func(cmd *Command) error
	// run runs the command. Problems the user can fix come back as the
	// Reply with a nil error; the error is for internal failures.
	run func(c *Core, ctx context.Context, r request) (Reply, error)
}

// commandTable is every command, in /help order.
var commandTable = []command{
	helpCommand,
	statusCommand,
	historyCommand,
	stopCommand,
	pauseCommand,
	resumeCommand,
	compactCommand,
	backendCommand,
	forkCommand,
	rewindCommand,
	titleCommand,
	modelCommand,
	repoCommand,
	diffCommand,
	prCommand,
	sessionsCommand,
	destroyCommand,
}

// CommandInfo describes one command of the table for a platform's native
// command list (Discord's slash commands).
type CommandInfo struct {
	Name, Usage, Help string
}

// Commands lists every command of the core's table, in /help order. A
// platform that registers native commands builds them from this list, so
// no command is missing or described twice.
func Commands() []CommandInfo {
	out := make([]CommandInfo, 0, len(commandTable))
	for _, c := range commandTable {
		out = append(out, CommandInfo{Name: c.name, Usage: c.usage, Help: c.help})
	}
	return out
}

// lookupCommand finds a command by name or alias (lower case).
func lookupCommand(name string) (command, bool) {
	for _, c := range commandTable {
		if c.name == name {
			return c, true
		}
		for _, a := range c.aliases {
			if a == name {
				return c, true
			}
		}
	}
	return command{}, false
}

// errUsage is what a parse function returns for arguments that do not fit;
// ParseCommand turns it into the command's usage line.
var errUsage = errors.New("usage")

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

	word, rest, _ := strings.Cut(text[1:], " ")
	if i := strings.IndexAny(word, "\n\t"); i >= 0 {
		word, rest = word[:i], word[i+1:]+" "+rest
	}
	name := strings.ToLower(word)
	def, known := lookupCommand(name)
	if !known {
		// "/word" and "!word" alike: an unknown command is answered the
		// same way however it was typed, never passed to the model.
		if name == "" || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && r != '-' }) >= 0 {
			return Command{}, false, nil
		}
		return Command{Name: name}, true, userErrorf("There is no command /%s; /help lists them.", name)
	}
	args, err := splitArgs(rest)
	if err != nil {
		return Command{Name: def.name}, true, err
	}
	cmd = Command{Name: def.name, Args: args}
	switch {
	case def.parse != nil:
		err = def.parse(&cmd)
	case len(args) > 0:
		err = userErrorf("/%s takes no arguments.", def.name)
	}
	if errors.Is(err, errUsage) {
		err = userErrorf("Usage: %s (%s).", def.usage, def.help)
	}
	return cmd, true, err
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

// request is one command to run: what was asked, by whom, where, and the
// poster of the platform it came from.
type request struct {
	p   Poster
	th  Thread
	id  string // th.ID(): the session's workflow ID
	u   User
	cmd Command
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
	def, ok := lookupCommand(cmd.Name)
	if !ok {
		return Reply{Text: fmt.Sprintf("There is no command /%s.\n\n%s", cmd.Name, c.helpText()), Ephemeral: true}, nil
	}
	return def.run(c, ctx, request{p: p, th: th, id: th.ID(), u: u, cmd: cmd})
}

// quick bounds a call that the session answers at once (queries, small
// updates).
func (c *Core) quick(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.CallTimeout)
}

// slow bounds a call that waits for the session (pause, stop, destroy,
// fork, backend).
func (c *Core) slow(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.LongCallTimeout)
}

// failed answers a command whose session call failed: the user's part
// privately, the rest logged and returned.
func (c *Core) failed(op string, r request, err error) (Reply, error) {
	return Reply{Text: UserMessage(err), Ephemeral: true}, c.internal(err, op, r.id)
}
