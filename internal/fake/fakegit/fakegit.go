// Package fakegit is a real git server for tests: git's own
// git-http-backend behind net/http/cgi on a loopback httptest server, so
// code that clones and pushes with a token meets the smart-HTTP protocol,
// the 401/403/404 answers and the push rejections it will meet on GitHub,
// rather than a mock of its own git calls.
//
// Repositories live at <root>/<owner>/<name>.git and are served at
// /<owner>/<name>.git/... . Authentication is HTTP Basic with the user
// "x-access-token" and the token as password, checked by Options.Token.
// Protected branches are enforced by a pre-receive hook generated from
// Options.Protected; non-fast-forward pushes are refused by git itself.
//
// Every git process (the backend and the test helpers) runs with an
// isolated environment: HOME in a temporary directory, no system or
// global config. A Server is safe for concurrent use.
package fakegit

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sandbot/sandbot/internal/fake/fakehttp"
)

// gitUser is the Basic-auth user name GitHub expects with a token.
const gitUser = "x-access-token"

// maxPushBytes bounds a buffered request body, so a runaway client cannot
// exhaust the test's memory.
const maxPushBytes = 512 << 20

// Options configures a Server.
type Options struct {
	// Token checks the password of HTTP Basic auth (the user name must be
	// "x-access-token"). It reports whether the token may read the given
	// repository ("owner/name") and whether it may push to it. nil means
	// no auth is required. Constant-time comparison is the caller's
	// concern.
	Token func(token, repo string) (read, write bool)
	// Protected lists branch name patterns (path.Match syntax, e.g.
	// "main", "release-*") that reject pushes, the way a GitHub protected
	// branch does; the client sees "protected branch" in its "remote:"
	// lines.
	Protected []string
}

// Server is a running git server. Create it with New; it closes when the
// test that created it ends.
type Server struct {
	// URL is the server's base, http://127.0.0.1:PORT, without a trailing
	// slash.
	URL string

	opts    Options
	root    string   // GIT_PROJECT_ROOT: <owner>/<name>.git below it
	backend string   // path of git-http-backend
	git     string   // path of the git binary, for the helpers
	baseEnv []string // isolated git environment shared by everything
	cgiEnv  []string // baseEnv plus what the backend needs
	logger  *log.Logger
	stderr  io.Writer

	mu       sync.Mutex
	requests []string
	buffered int // request bodies that arrived chunked and were buffered
}

// New starts a git server whose repositories live in tb.TempDir(); it is
// closed by tb.Cleanup. It fails the test if git or git-http-backend is
// missing or a Protected pattern is malformed.
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	return newServer(tb, opts, "")
}

// newServer is New with the CGI program replaceable, so a test can
// inspect exactly what the backend is given.
func newServer(tb testing.TB, opts Options, backend string) *Server {
	tb.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		tb.Fatalf("fakegit: %v", err)
	}
	base := tb.TempDir()
	s := &Server{
		opts:   opts,
		root:   filepath.Join(base, "repos"),
		git:    gitPath,
		logger: log.New(tbWriter{tb}, "fakegit: ", 0),
		stderr: tbWriter{tb},
	}
	home := filepath.Join(base, "home")
	hooks := filepath.Join(base, "hooks")
	for _, dir := range []string{s.root, home, hooks} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatalf("fakegit: %v", err)
		}
	}
	s.baseEnv = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C",
	}
	script, err := hookScript(opts.Protected)
	if err != nil {
		tb.Fatalf("fakegit: Options.Protected: %v", err)
	}
	if err := os.WriteFile(filepath.Join(hooks, "pre-receive"), []byte(script), 0o755); err != nil {
		tb.Fatalf("fakegit: write pre-receive hook: %v", err)
	}
	if backend == "" {
		out, err := s.run(nil, "", "--exec-path")
		if err != nil {
			tb.Fatalf("fakegit: git --exec-path: %v", err)
		}
		backend = filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	}
	if _, err := os.Stat(backend); err != nil {
		tb.Fatalf("fakegit: backend: %v", err)
	}
	s.backend = backend
	// The config reaches the backend and everything it runs (upload-pack,
	// receive-pack, the hook) through the environment, so no file on disk
	// has to be trusted or kept in sync.
	cfg := [][2]string{
		{"http.receivepack", "true"},
		{"uploadpack.allowFilter", "true"},
		{"uploadpack.allowAnySHA1InWant", "true"},
		{"receive.denyNonFastForwards", "true"},
		{"core.hooksPath", hooks},
	}
	s.cgiEnv = append(slices.Clone(s.baseEnv),
		"GIT_PROJECT_ROOT="+s.root,
		"GIT_HTTP_EXPORT_ALL=1",
		fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(cfg)),
	)
	for i, kv := range cfg {
		s.cgiEnv = append(s.cgiEnv,
			fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]),
			fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	srv := httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	tb.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// RepoURL is the clone URL of repo ("owner/name").
func (s *Server) RepoURL(repo string) string {
	return s.URL + "/" + repo + ".git"
}

// Requests returns one line "METHOD PATH?QUERY STATUS" per request served
// so far, oldest first, so a test can check that auth was sent and which
// service was asked for.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &fakehttp.StatusRecorder{ResponseWriter: w}
	s.route(rec, r)
	status := rec.Status
	if status == 0 {
		status = http.StatusOK
	}
	s.mu.Lock()
	s.requests = append(s.requests, fmt.Sprintf("%s %s %d", r.Method, r.URL.RequestURI(), status))
	s.mu.Unlock()
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	repo, rest, ok := splitPath(r.URL.Path)
	if !ok || !s.exists(repo) {
		http.Error(w, "Repository not found.", http.StatusNotFound)
		return
	}
	push := rest == "git-receive-pack" ||
		(rest == "info/refs" && r.URL.Query().Get("service") == "git-receive-pack")
	user := "anonymous"
	if s.opts.Token != nil {
		tok, hasTok := basicToken(r)
		var read, write bool
		if hasTok {
			read, write = s.opts.Token(tok, repo)
		}
		switch {
		case !read && !write && hasTok && s.validElsewhere(tok, repo):
			// GitHub hides repositories a valid token cannot see.
			http.Error(w, "Repository not found.", http.StatusNotFound)
			return
		case !read && !write:
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
			return
		case push && !write:
			http.Error(w, fmt.Sprintf("Permission to %s.git denied to %s.", repo, gitUser), http.StatusForbidden)
			return
		}
		user = gitUser
	}

	r = r.Clone(r.Context())
	// net/http/cgi passes every header on as HTTP_*: the token must not
	// reach git or its hooks.
	r.Header.Del("Authorization")
	if r.ContentLength < 0 || len(r.TransferEncoding) > 0 {
		// net/http/cgi refuses chunked bodies, which git sends for packs
		// over http.postBuffer (1 MiB).
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPushBytes))
		if err != nil {
			http.Error(w, "reading request body: "+err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.TransferEncoding = nil
		s.mu.Lock()
		s.buffered++
		s.mu.Unlock()
	}
	h := &cgi.Handler{
		Path:   s.backend,
		Dir:    s.root,
		Env:    append(slices.Clone(s.cgiEnv), "REMOTE_USER="+user),
		Logger: s.logger,
		Stderr: s.stderr,
	}
	h.ServeHTTP(w, r)
}

// validElsewhere reports whether tok opens some other repository on this
// server, which makes it a valid token that merely cannot see repo.
func (s *Server) validElsewhere(tok, repo string) bool {
	owners, err := os.ReadDir(s.root)
	if err != nil {
		return false
	}
	for _, o := range owners {
		names, err := os.ReadDir(filepath.Join(s.root, o.Name()))
		if err != nil {
			continue
		}
		for _, n := range names {
			other := o.Name() + "/" + strings.TrimSuffix(n.Name(), ".git")
			if other == repo || !strings.HasSuffix(n.Name(), ".git") {
				continue
			}
			if read, write := s.opts.Token(tok, other); read || write {
				return true
			}
		}
	}
	return false
}

// basicToken returns the password of a Basic "x-access-token" login.
func basicToken(r *http.Request) (string, bool) {
	v := r.Header.Get("Authorization")
	scheme, enc, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", false
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user != gitUser {
		return "", false
	}
	return pass, true
}

// splitPath splits "/owner/name.git/rest" into "owner/name" and rest.
func splitPath(p string) (repo, rest string, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 3)
	if len(parts) != 3 || !strings.HasSuffix(parts[1], ".git") {
		return "", "", false
	}
	repo = parts[0] + "/" + strings.TrimSuffix(parts[1], ".git")
	if _, _, err := splitRepo(repo); err != nil {
		return "", "", false
	}
	rest = parts[2]
	for _, seg := range strings.Split(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", "", false
		}
	}
	return repo, rest, true
}

// splitRepo validates "owner/name" with GitHub's character set.
func splitRepo(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || !validName(owner) || !validName(name) || strings.HasSuffix(name, ".git") {
		return "", "", fmt.Errorf("repository %q is not owner/name", repo)
	}
	return owner, name, nil
}

func validName(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// repoDir is the bare repository of a valid "owner/name".
func (s *Server) repoDir(repo string) (string, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.root, owner, name+".git"), nil
}

func (s *Server) exists(repo string) bool {
	dir, err := s.repoDir(repo)
	if err != nil {
		return false
	}
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// tbWriter sends the backend's stderr and the CGI host's errors to the
// test log, where a failing test shows them.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Logf("%s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}
