package agent

import (
	"strings"

	"github.com/sandbot/sandbot/session"
)

// NeedsApproval reports whether a shell call must wait for a human. It is
// pure and deterministic, so the workflow calls it directly.
//
//   - "never": no call needs approval.
//   - "always": every call does.
//   - "unless-readonly" (also the empty mode): a call runs without approval
//     only when every command is read-only by IsReadOnly.
//
// An unknown mode is treated as "always": a misconfiguration must fail
// closed.
func NeedsApproval(mode session.ApprovalMode, commands []string) bool {
	switch session.ApprovalMode(strings.ToLower(strings.TrimSpace(string(mode)))) {
	case session.ApproveNever:
		return false
	case session.ApproveUnlessReadOnly, "":
		if len(commands) == 0 {
			return true
		}
		for _, c := range commands {
			if !IsReadOnly(c) {
				return true
			}
		}
		return false
	default:
		return true
	}
}

// IsReadOnly reports whether a command can be run without approval: a
// single command, or a pipeline of commands, each from a small allowlist of
// programs that only read (ls, cat, grep, find without actions, git
// status/log/diff/show, ...), with none of their writing or executing
// options, and without shell syntax that could write, chain, substitute or
// expand (redirections other than to /dev/null, ;, &, &&, ||, $, backticks,
// subshells, newlines).
//
// It is deliberately conservative: anything it cannot prove harmless needs
// approval. Besides side effects it judges what is read: a command runs
// without approval only if every path it names stays inside the workspace
// (see readsOutside): no absolute path (/proc/*/environ, /etc/shadow,
// /dev/sda, the dev server's database), no ~, no ".." component, no glob
// that can match "..", no brace expansion. What the text cannot show is
// where a symlink inside the workspace leads (cat link, with link ->
// /etc/shadow); reading through one is contained by the sandbox's own
// confinement (the local backend's mount namespace, the container), which
// shows a command nothing outside the workspace but read-only system
// directories, not by this allowlist.
func IsReadOnly(command string) bool {
	segs, ok := splitPipeline(command)
	if !ok || len(segs) == 0 {
		return false
	}
	for _, args := range segs {
		if !readOnlyCommand(args) || readsOutside(args) {
			return false
		}
	}
	return true
}

// pureArgs are programs that never open their arguments: echo prints
// them, basename and dirname cut strings. Their arguments may look like
// any path.
var pureArgs = map[string]bool{"echo": true, "basename": true, "dirname": true}

// readsOutside reports whether any argument may name a path outside the
// workspace. Which arguments a program opens as files differs by program
// and option, so every argument is judged as if it were a path: a false
// alarm (grep -e /usr) costs one approval, a miss leaks the host.
func readsOutside(args []string) bool {
	if pureArgs[args[0]] {
		return false
	}
	for _, a := range args[1:] {
		switch {
		case strings.HasPrefix(a, "--"):
			// --file=/etc/x: the value is a path.
			if _, v, ok := strings.Cut(a, "="); ok && outsidePath(v) {
				return true
			}
		case len(a) > 1 && a[0] == '-':
			// A short option cluster may end in a glued value
			// (-f/etc/x, -f../x, -f~/x) and where it starts cannot be
			// told without knowing the program's options.
			if strings.ContainsAny(a, "/~") || strings.Contains(a, "..") {
				return true
			}
		default:
			if outsidePath(a) {
				return true
			}
		}
	}
	return false
}

// outsidePath reports whether the word p (after the shell removed quotes)
// may name something outside the working directory: an absolute path, a
// home directory (~, ~user), a ".." component, a glob component that can
// match ".." (.*, .?, [.]*; POSIX globs match a leading dot only
// explicitly), or a brace expansion (bash, when it is sh, expands
// {.,.}. to ..). Parts after '=' and ':' count as paths too: sh expands ~
// there in assignments, and programs take path lists and rev:path forms
// (git show HEAD:../x).
func outsidePath(p string) bool {
	if strings.Contains(p, "{") && strings.Contains(p, "}") {
		return true
	}
	for _, part := range strings.FieldsFunc(p, func(r rune) bool { return r == '=' || r == ':' }) {
		if strings.HasPrefix(part, "/") || strings.HasPrefix(part, "~") {
			return true
		}
		for _, c := range strings.Split(part, "/") {
			if c == ".." {
				return true
			}
			if (strings.HasPrefix(c, ".") || strings.HasPrefix(c, "[")) && strings.ContainsAny(c, "*?[") {
				return true
			}
		}
	}
	return false
}

// safeRedirects are whole words that redirect only into /dev/null or merge
// stderr into stdout; models append them often and they cannot write.
// ("&>" is not among them: POSIX sh parses it as "&" and ">", which puts
// the command in the background.)
var safeRedirects = []string{"2>&1", "2>/dev/null", ">/dev/null", "1>/dev/null"}

// splitPipeline tokenises a POSIX shell command the way sh would (quotes,
// backslash escapes) and splits it at unquoted single '|'. It reports false
// for any syntax it does not accept as read-only.
func splitPipeline(s string) ([][]string, bool) {
	if strings.ContainsAny(s, "\n\r\x00") {
		return nil, false
	}
	var (
		segs    [][]string
		args    []string
		word    strings.Builder
		inWord  bool
		endWord = func() {
			if inWord {
				args = append(args, word.String())
				word.Reset()
				inWord = false
			}
		}
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !inWord {
			if r, ok := redirectAt(s, i); ok {
				i += len(r) - 1
				continue
			}
		}
		switch c {
		case ' ', '\t':
			endWord()
		case '\\':
			if i+1 >= len(s) {
				return nil, false
			}
			i++
			word.WriteByte(s[i])
			inWord = true
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			word.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				switch s[i] {
				case '$', '`':
					return nil, false
				case '\\':
					if i+1 < len(s) && strings.IndexByte("$`\"\\", s[i+1]) >= 0 {
						i++
					}
				}
				word.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, false
			}
			inWord = true
		case '|':
			if i+1 < len(s) && (s[i+1] == '|' || s[i+1] == '&') {
				return nil, false
			}
			endWord()
			if len(args) == 0 {
				return nil, false
			}
			segs = append(segs, args)
			args = nil
		case ';', '&', '>', '<', '(', ')', '`', '$':
			return nil, false
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	endWord()
	if len(args) == 0 {
		return nil, false // empty command or trailing '|'
	}
	return append(segs, args), true
}

// redirectAt matches a safe redirect word starting at s[i] and ending at a
// blank, a pipe or the end.
func redirectAt(s string, i int) (string, bool) {
	for _, r := range safeRedirects {
		if strings.HasPrefix(s[i:], r) {
			end := i + len(r)
			if end == len(s) || s[end] == ' ' || s[end] == '\t' || (s[end] == '|' && (end+1 == len(s) || s[end+1] != '|')) {
				return r, true
			}
		}
	}
	return "", false
}

// rule describes what makes an allowlisted program write or execute.
type rule struct {
	// shortFlags are dangerous single-letter options, also when bundled
	// (-rno); conservative about option arguments glued to clusters.
	shortFlags string
	// longFlags are dangerous long options; any abbreviation ("--out") and
	// "=value" form counts, as GNU getopt accepts unambiguous prefixes.
	longFlags []string
	// words are dangerous arguments matched exactly or by prefix when
	// they end in '*' (find's -exec, -fprint*...).
	words []string
	// check, when set, decides with the full argument list.
	check func(args []string) bool
}

var readOnlyRules = map[string]rule{
	"ls": {}, "pwd": {}, "cat": {}, "head": {}, "tail": {}, "wc": {},
	"grep": {}, "egrep": {}, "fgrep": {},
	"stat": {}, "du": {}, "df": {}, "echo": {}, "which": {},
	"basename": {}, "dirname": {}, "realpath": {}, "readlink": {},
	"cut": {}, "tr": {}, "nl": {}, "diff": {}, "cmp": {},
	"md5sum": {}, "sha1sum": {}, "sha256sum": {}, "uname": {}, "whoami": {},
	// rg --pre and --hostname-bin run programs.
	"rg": {longFlags: []string{"--pre", "--hostname-bin"}},
	// find's actions delete, execute or write files.
	"find": {words: []string{"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint*", "-fls"}},
	// file -C compiles a magic file into the working directory.
	"file": {shortFlags: "C", longFlags: []string{"--compile"}},
	// tree -o writes its listing to a file; -R writes 00Tree.html files.
	"tree": {shortFlags: "oR", longFlags: []string{"--output"}},
	// sort -o writes a file; --compress-program runs a program.
	"sort": {shortFlags: "o", longFlags: []string{"--output", "--compress-program"}},
	"git":  {check: gitReadOnly},
	"go":   {check: goReadOnly},
}

func readOnlyCommand(args []string) bool {
	r, ok := readOnlyRules[args[0]]
	if !ok {
		return false
	}
	if r.check != nil {
		return r.check(args[1:])
	}
	return !hasDangerousArg(r, args[1:])
}

func hasDangerousArg(r rule, args []string) bool {
	for _, a := range args {
		// "--" ends options for most programs, but the words after it
		// are checked anyway: a false alarm only costs an approval.
		for _, w := range r.words {
			if p, ok := strings.CutSuffix(w, "*"); ok {
				if strings.HasPrefix(a, p) {
					return true
				}
			} else if a == w {
				return true
			}
		}
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			for _, l := range r.longFlags {
				if name != "" && strings.HasPrefix(l, "--"+name) {
					return true
				}
			}
			continue
		}
		if len(a) > 1 && a[0] == '-' && r.shortFlags != "" && strings.ContainsAny(a[1:], r.shortFlags) {
			return true
		}
	}
	return false
}

// gitReadOnly allows the inspection subcommands. Global options before the
// subcommand (-c, -C, --exec-path, ...) can run programs or change what is
// read, so only --no-pager is accepted there.
func gitReadOnly(args []string) bool {
	for len(args) > 0 && args[0] == "--no-pager" {
		args = args[1:]
	}
	if len(args) == 0 {
		return false
	}
	sub, rest := args[0], args[1:]
	noOutput := rule{longFlags: []string{"--output", "--ext-diff", "--textconv"}}
	switch sub {
	case "status", "rev-parse":
		return !hasDangerousArg(noOutput, rest)
	case "log", "diff", "show":
		return !hasDangerousArg(noOutput, rest)
	case "branch":
		// Listing only: any operand would create, and most other flags
		// would modify, a branch.
		for _, a := range rest {
			switch a {
			case "-a", "-r", "-v", "-vv", "-l", "--all", "--remotes", "--list", "--verbose", "--show-current", "--no-color":
			default:
				return false
			}
		}
		return true
	default:
		return false
	}
}

// goReadOnly allows "go version" and "go env" without -w/-u (which write the
// go env file).
func goReadOnly(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0] {
	case "version":
		return len(args) == 1
	case "env":
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") && a != "-json" && a != "--json" {
				return false
			}
		}
		return true
	default:
		return false
	}
}
