package repo

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandbot/sandbot/redact"
)

// Git runs the git CLI isolated from every user and system configuration.
//
// Each call gets an environment built from nothing (not the worker's): a
// fixed PATH, a fresh empty HOME, no system or global config, no prompts,
// and a few settings passed as command-scope config (GIT_CONFIG_COUNT),
// which outrank any repository's own config:
//
//	core.hooksPath=/dev/null          no hook runs, ours or a repository's
//	transfer.credentialsInUrl=die     a URL with a password is refused
//	protocol.file.allow=user|always   file:// only when the URL is file://
//	core.fsmonitor=false              no fsmonitor program runs
//	credential.helper=                no helper stores or supplies secrets
//	advice.detachedHead=false
//	gc.auto=0, maintenance.auto=false no background process outlives a call
//	http.<origin>/.extraHeader        the Auth, when there is one
//
// The worker's environment could hold anything (GIT_DIR, GIT_SSH_COMMAND,
// GIT_CONFIG_PARAMETERS, other secrets), and its home a credential store or
// an includeIf; none of that may reach a git call made on an agent's
// behalf. The zero value runs "git" found on the worker's PATH. A Git is
// safe for concurrent use.
type Git struct {
	// Bin is the git binary: a path, or a name looked up in PATH. Empty
	// means "git".
	Bin string
}

// Auth authenticates one git call over HTTP(S). It travels only as env
// (GIT_CONFIG_COUNT / GIT_CONFIG_KEY_n=http.<origin>/.extraHeader /
// GIT_CONFIG_VALUE_n="Authorization: Basic base64(x-access-token:TOKEN)"),
// never in argv (any local user can read a process's arguments), a URL or
// any config file (git clone -c and URLs with a password persist into
// .git/config, which the agent then reads). The header is scoped to the
// scheme, host and port of the URL the call is for, so a submodule or a
// redirect to another host never receives it.
//
// The zero Auth is anonymous. Formatting an Auth with fmt never shows the
// token.
type Auth struct {
	header string
}

// authUser is the user name GitHub expects with an installation or
// personal access token sent as a password.
const authUser = "x-access-token"

// TokenAuth authenticates as a GitHub token (installation, OAuth or
// personal). An empty token is the zero, anonymous, Auth.
func TokenAuth(token string) Auth {
	if token == "" {
		return Auth{}
	}
	return Auth{header: "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(authUser+":"+token))}
}

// String is "[redacted]" or "anonymous": never the token.
func (a Auth) String() string {
	if a.header == "" {
		return "anonymous"
	}
	return "[redacted]"
}

// GoString keeps %#v from printing the header field.
func (a Auth) GoString() string { return "repo.Auth(" + a.String() + ")" }

// secrets lists the forms of the credential a git message could echo: the
// header, its base64 credential, and the token itself (whose own encoded
// forms the redactor also looks for).
func (a Auth) secrets() []redact.Secret {
	if a.header == "" {
		return nil
	}
	cred := strings.TrimPrefix(a.header, "Authorization: Basic ")
	out := []redact.Secret{
		{Name: "git auth header", Value: a.header},
		{Name: "git auth header", Value: cred},
	}
	if raw, err := base64.StdEncoding.DecodeString(cred); err == nil {
		out = append(out, redact.Secret{Name: "git token", Value: strings.TrimPrefix(string(raw), authUser+":")})
	}
	return out
}

// basePath is the PATH every git call gets after the directory of the git
// binary: git finds its own helpers through its exec path, so PATH only
// needs to lead to ssh and the shell.
const basePath = "/usr/local/bin:/usr/bin:/bin"

// maxStderr bounds how much of a call's stderr is kept; the end, where git
// says why it failed, is kept.
const maxStderr = 256 << 10

// waitDelay bounds how long a cancelled call may take to release its
// output pipes (a killed git's helpers can hold them).
const waitDelay = 5 * time.Second

// runner is what the git calls of one operation share: the resolved
// binary, a fresh directory holding an empty HOME and whatever else the
// operation needs (a scratch repository, a diff's trees), the config that
// depends on the URL, and the scrubber for the operation's credential.
type runner struct {
	bin   string
	base  string // removed by close
	home  string // base/home, empty
	url   string // credential-free; "" for calls that reach no remote
	auth  Auth
	scrub *redact.Redactor
}

// Binary is the git executable g runs ("git" unless Bin says otherwise),
// for a worker to check at start that it has one.
func (g Git) Binary() string {
	if g.Bin != "" {
		return g.Bin
	}
	return "git"
}

// newRunner prepares the calls of one operation. Its directory is made in
// parent ("" = the system temp dir); close removes it.
func (g Git) newRunner(parent, rawURL string, a Auth) (*runner, error) {
	path, err := exec.LookPath(g.Binary())
	if err != nil {
		return nil, fmt.Errorf("repo: find git: %w", err)
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("repo: find git: %w", err)
	}
	base, err := os.MkdirTemp(parent, "sandbot-git-")
	if err != nil {
		return nil, fmt.Errorf("repo: make git scratch dir: %w", err)
	}
	home := filepath.Join(base, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		_ = os.RemoveAll(base)
		return nil, fmt.Errorf("repo: make git home: %w", err)
	}
	return &runner{bin: path, base: base, home: home, url: rawURL, auth: a, scrub: redact.New(a.secrets()...)}, nil
}

func (s *runner) close() { _ = os.RemoveAll(s.base) }

// call is one git invocation, built in full before it runs so that tests
// can check exactly what reaches argv and the environment.
type call struct {
	args  []string  // after the binary
	dir   string    // working directory; "" = the empty home
	env   []string  // extra variables, after the isolating ones
	stdin io.Reader // nil: no input
	t     target    // for the error message
}

// config lists the command-scope settings of every call, as key=value.
func (s *runner) config() [][2]string {
	fileAllow := "user"
	if strings.HasPrefix(strings.ToLower(s.url), "file://") {
		fileAllow = "always"
	}
	kv := [][2]string{
		{"core.hooksPath", os.DevNull},
		{"transfer.credentialsInUrl", "die"},
		{"protocol.file.allow", fileAllow},
		{"core.fsmonitor", "false"},
		{"credential.helper", ""},
		{"advice.detachedHead", "false"},
		{"gc.auto", "0"},
		{"maintenance.auto", "false"},
	}
	if s.auth.header != "" {
		if origin := httpOrigin(s.url); origin != "" {
			kv = append(kv, [2]string{"http." + origin + ".extraHeader", s.auth.header})
		}
	}
	return kv
}

// environ is the whole environment of a call: nothing is inherited.
func (s *runner) environ(extra []string) []string {
	env := []string{
		"PATH=" + filepath.Dir(s.bin) + ":" + basePath,
		"HOME=" + s.home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
		// Repository discovery never leaves the runner's directory, so a
		// call never picks up a repository (and its config) around it.
		"GIT_CEILING_DIRECTORIES=" + s.base,
		"LC_ALL=C",
	}
	kv := s.config()
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(kv)))
	for i, p := range kv {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+p[0], "GIT_CONFIG_VALUE_"+n+"="+p[1])
	}
	return append(env, extra...)
}

// command builds the process of c. It runs in its own process group, so
// that cancelling it also kills the helpers git started (remote-https,
// index-pack), which would otherwise keep writing into a directory being
// removed.
func (s *runner) command(ctx context.Context, c call) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.bin, c.args...)
	cmd.Dir = s.home
	if c.dir != "" {
		cmd.Dir = c.dir
	}
	cmd.Env = s.environ(c.env)
	cmd.Stdin = c.stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = waitDelay
	return cmd
}

// exitError is a call that ran and exited non-zero.
type exitError struct {
	code   int
	stderr string // scrubbed
	err    error
}

// invoke runs c. It returns the captured stdout and, for a call that ran but
// exited non-zero, an *exitError with the scrubbed stderr; other errors
// (git missing, context done) are returned wrapped.
func (s *runner) invoke(ctx context.Context, c call) ([]byte, *exitError, error) {
	cmd := s.command(ctx, c)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr := &tailBuffer{max: maxStderr}
	cmd.Stderr = stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil, nil
	}
	if ctx.Err() != nil {
		return nil, nil, fmt.Errorf("repo: git %s: %w", c.t.op, context.Cause(ctx))
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return stdout.Bytes(), &exitError{code: ee.ExitCode(), stderr: s.scrub.Redact(stderr.String()), err: err}, nil
	}
	return nil, nil, fmt.Errorf("repo: git %s: %s", c.t.op, s.scrub.Redact(err.Error()))
}

// run runs c and turns any failure into an error; a non-zero exit is
// classified into an *Error.
func (s *runner) run(ctx context.Context, c call) ([]byte, error) {
	out, xe, err := s.invoke(ctx, c)
	if err != nil {
		return nil, err
	}
	if xe != nil {
		return nil, classify(c.t, xe.stderr, xe.err)
	}
	return out, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string { return string(b.buf) }

// checkURL accepts the URLs git may be pointed at on an agent's behalf:
// https:// and http:// with no user information at all (a token is often
// passed as the user name), ssh:// and scp-like user@host:path with at
// most a user name, and file:// (tests and local mirrors). Anything else
// (git://, ext::, a bare path, a credential in a query) is refused, as is
// any control character or a host that could be read as an option.
func checkURL(raw string) error {
	bad := func(why string) error {
		return &Error{Kind: ErrBadURL, Msg: fmt.Sprintf("The repository URL %s %s.", displayURL(raw), why)}
	}
	if raw == "" {
		return &Error{Kind: ErrBadURL, Msg: "No repository URL was given."}
	}
	for _, r := range raw {
		if r < 0x20 || r == 0x7f {
			return bad("holds a control character")
		}
	}
	if strings.HasPrefix(raw, "-") {
		return bad("is not a URL")
	}
	if len(redact.URLSecrets("url", raw)) > 0 {
		return bad("holds a credential: give the URL without user name, password or token, the bot authenticates on its own")
	}
	if !strings.Contains(raw, "://") {
		// scp-like syntax: [user@]host:path, as git reads it (no slash
		// before the first colon).
		colon := strings.Index(raw, ":")
		if colon <= 0 || strings.Contains(raw[:colon], "/") {
			return bad("is not a URL git can clone (use https://)")
		}
		host := raw[:colon]
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = host[at+1:]
		}
		if strings.HasPrefix(raw[colon:], "::") {
			// <transport>::<address> runs a remote helper (ext:: runs
			// any command).
			return bad("names a remote helper, which is not supported (use https://)")
		}
		if host == "" || strings.HasPrefix(host, "-") {
			return bad("has no valid host")
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("does not parse")
	}
	switch strings.ToLower(u.Scheme) {
	case "https", "http":
		if u.User != nil {
			return bad("holds a user name or password: give it without them, the bot authenticates on its own")
		}
		if u.Hostname() == "" || strings.HasPrefix(u.Host, "-") {
			return bad("has no valid host")
		}
	case "ssh":
		if _, ok := u.User.Password(); ok {
			return bad("holds a password: give it without one")
		}
		if u.Hostname() == "" || strings.HasPrefix(u.Host, "-") {
			return bad("has no valid host")
		}
	case "file":
		if u.User != nil || (u.Host != "" && u.Host != "localhost") || !strings.HasPrefix(u.Path, "/") {
			return bad("is not a local file:///path URL")
		}
	default:
		return bad("uses a scheme that is not supported (use https://)")
	}
	return nil
}

// displayURL shows a URL without whatever its user information holds, so
// a refused URL can be named in a message without repeating its secret.
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "given"
	}
	u.User = nil
	u.RawQuery = ""
	u.Fragment = ""
	return strconv.Quote(u.String())
}

// httpOrigin is the scheme://host[:port]/ prefix that scopes the auth
// header of an http(s) URL; "" for other URLs, which get no header.
func httpOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	switch s := strings.ToLower(u.Scheme); s {
	case "http", "https":
		return s + "://" + strings.ToLower(u.Host) + "/"
	}
	return ""
}
