package repo

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/redact"
)

// testToken is the token the HTTP test server accepts.
const testToken = "s3cret-test-token-0123456789"

// realGit is the git binary the tests drive.
func realGit(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is required: %v", err)
	}
	return p
}

// tgit runs plain git for a test's own setup and checks, isolated from
// the developer's configuration so that results do not depend on it.
func tgit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := tgitErr(t, dir, nil, args...)
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(out)
}

// tgitErr is tgit that returns the failure, with extra environment.
func tgitErr(t testing.TB, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(realGit(t), args...)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test Author", "GIT_AUTHOR_EMAIL=author@example.com", "GIT_AUTHOR_DATE=@1700000000 +0000",
		"GIT_COMMITTER_NAME=Test Committer", "GIT_COMMITTER_EMAIL=committer@example.com", "GIT_COMMITTER_DATE=@1700000000 +0000",
		"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=protocol.file.allow", "GIT_CONFIG_VALUE_0=always",
		"GIT_CONFIG_KEY_1=init.defaultBranch", "GIT_CONFIG_VALUE_1=main",
	}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), nil
}

// writeFiles writes path → content under dir, making directories.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// origin is a bare repository the tests clone from and push to.
type origin struct {
	dir string // the bare repository
	url string // file:// URL of it
	// main lists the commits of main, oldest first; feature is the tip
	// of branch feature.
	main    []string
	feature string
}

// newOrigin makes a bare repository named name in root with three
// commits on main and a branch feature.
func newOrigin(t testing.TB, root, name string) *origin {
	t.Helper()
	bare := filepath.Join(root, name)
	tgit(t, root, "init", "--quiet", "--bare", bare)
	work := t.TempDir()
	tgit(t, work, "init", "--quiet")
	o := &origin{dir: bare, url: "file://" + bare}
	steps := []map[string]string{
		{"README.md": "hello\n", ".gitignore": "*.log\n"},
		{"src/x.go": "package x\n", "keep.log": "tracked although ignored\n"},
		{"src/y.go": "package x\n\nvar Y = 1\n"},
	}
	for i, files := range steps {
		writeFiles(t, work, files)
		tgit(t, work, "add", "--all", "--force")
		tgit(t, work, "commit", "--quiet", "-m", fmt.Sprintf("commit %d", i+1))
		o.main = append(o.main, tgit(t, work, "rev-parse", "HEAD"))
	}
	tgit(t, work, "switch", "--quiet", "-c", "feature")
	writeFiles(t, work, map[string]string{"feature.txt": "feature\n"})
	tgit(t, work, "add", "--all")
	tgit(t, work, "commit", "--quiet", "-m", "feature")
	o.feature = tgit(t, work, "rev-parse", "HEAD")
	tgit(t, work, "push", "--quiet", bare, "main", "feature")
	return o
}

// newGitServer serves the bare repositories under root over smart HTTP
// with git-http-backend, and only to Basic auth x-access-token:token.
// Like a real host it answers 401 with a challenge otherwise.
func newGitServer(t testing.TB, root, token string) *httptest.Server {
	t.Helper()
	backend := filepath.Join(tgit(t, root, "--exec-path"), "git-http-backend")
	h := &cgi.Handler{
		Path: backend,
		Dir:  root,
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=" + authUser,
			"HOME=" + t.TempDir(),
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_COUNT=3",
			"GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
			"GIT_CONFIG_KEY_1=uploadpack.allowFilter", "GIT_CONFIG_VALUE_1=true",
			"GIT_CONFIG_KEY_2=uploadpack.allowAnySHA1InWant", "GIT_CONFIG_VALUE_2=true",
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != authUser || subtle.ConstantTimeCompare([]byte(pass), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		// cgi would pass the header to the backend as HTTP_AUTHORIZATION.
		r.Header.Del("Authorization")
		// cgi refuses chunked bodies, which git sends for large pushes.
		if r.ContentLength < 0 {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.TransferEncoding = nil
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// argvLogger is a git wrapper that records every argument it is run with
// (one per line) and whether its environment carried the auth header,
// then runs the real git: what the package puts in argv, exactly.
type argvLogger struct {
	bin, log string
}

func newArgvLogger(t testing.TB, header string) *argvLogger {
	t.Helper()
	dir := t.TempDir()
	l := &argvLogger{bin: filepath.Join(dir, "git"), log: filepath.Join(dir, "argv.log")}
	script := fmt.Sprintf(`#!/bin/sh
for a in "$@"; do printf 'arg %%s\n' "$a"; done >> '%s'
if env | grep -q -F -e '%s'; then echo 'env has-header' >> '%s'; fi
exec '%s' "$@"
`, l.log, header, l.log, realGit(t))
	if err := os.WriteFile(l.bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return l
}

// lines returns the log: argument lines and header markers.
func (l *argvLogger) lines(t testing.TB) (args []string, headerCalls int) {
	t.Helper()
	b, err := os.ReadFile(l.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if a, ok := strings.CutPrefix(line, "arg "); ok {
			args = append(args, a)
		} else if line == "env has-header" {
			headerCalls++
		}
	}
	return args, headerCalls
}

// credentialForms are the renderings of the test token that must never
// appear: the token, the header, and its base64 credential.
func credentialForms(token string) *redact.Redactor {
	return redact.New(TokenAuth(token).secrets()...)
}

// assertNoCredential fails if any file under dir holds any form of token.
func assertNoCredential(t testing.TB, dir, token string) {
	t.Helper()
	red := credentialForms(token)
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		if s := string(b); red.Redact(s) != s || strings.Contains(s, "extraheader") || strings.Contains(s, "extraHeader") {
			t.Errorf("%s holds the credential (or an extraheader)", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no files under %s: the check checked nothing", dir)
	}
}

func TestAuthNeverFormatted(t *testing.T) {
	a := TokenAuth(testToken)
	if a.String() != "[redacted]" || (Auth{}).String() != "anonymous" || TokenAuth("").String() != "anonymous" {
		t.Fatalf("String: %q %q", a.String(), Auth{}.String())
	}
	o := CloneOptions{URL: "https://github.com/o/r.git", Auth: a}
	c := CommitOptions{URL: "https://github.com/o/r.git", Auth: a}
	js, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	red := credentialForms(testToken)
	for _, s := range []string{
		fmt.Sprint(a), fmt.Sprintf("%v %+v %#v %s %q", a, a, a, a, a),
		fmt.Sprintf("%v %+v %#v", o, o, o), fmt.Sprintf("%v %+v %#v", c, c, c), string(js),
	} {
		if red.Redact(s) != s {
			t.Errorf("formatted Auth shows the credential: %s", s)
		}
	}
}

func TestCommandIsIsolated(t *testing.T) {
	t.Setenv("GIT_DIR", "/nonexistent/untrusted/.git")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor=touch /tmp/x'")
	t.Setenv("UNRELATED_WORKER_SECRET", "leak")
	auth := TokenAuth(testToken)
	s, err := Git{}.newRunner(t.TempDir(), "https://GitHub.com:443/o/r.git", auth)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	cmd := s.command(context.Background(), call{args: cloneArgs("/tmp/dest", CloneOptions{URL: "https://GitHub.com:443/o/r.git", Depth: 1, Branch: "dev", Submodules: true, Auth: auth})})

	red := credentialForms(testToken)
	for _, a := range cmd.Args {
		if red.Redact(a) != a {
			t.Errorf("argv holds the credential: %q", a)
		}
	}
	wantArgs := []string{"clone", "--quiet", "--depth=1", "--branch=dev", "--recurse-submodules", "--shallow-submodules", "--", "https://GitHub.com:443/o/r.git", "/tmp/dest"}
	if !slices.Equal(cmd.Args[1:], wantArgs) {
		t.Errorf("args = %q, want %q", cmd.Args[1:], wantArgs)
	}

	env := map[string]string{}
	for _, kv := range cmd.Env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := env[k]; dup {
			t.Errorf("%s set twice", k)
		}
		env[k] = v
	}
	for _, k := range []string{"GIT_DIR", "GIT_CONFIG_PARAMETERS", "UNRELATED_WORKER_SECRET"} {
		if _, ok := env[k]; ok {
			t.Errorf("the worker's %s reached git", k)
		}
	}
	for k, v := range map[string]string{
		"HOME": s.home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
		"GIT_ASKPASS": "/bin/false", "SSH_ASKPASS": "/bin/false", "LC_ALL": "C", "GIT_CEILING_DIRECTORIES": s.base,
	} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if entries, err := os.ReadDir(env["HOME"]); err != nil || len(entries) != 0 {
		t.Errorf("HOME is not an empty directory: %v %v", entries, err)
	}
	if !strings.Contains(env["PATH"], filepath.Dir(s.bin)) {
		t.Errorf("PATH %q does not lead to git's directory", env["PATH"])
	}
	cfg := envConfig(cmd.Env)
	want := map[string]string{
		"core.hooksPath": "/dev/null", "transfer.credentialsInUrl": "die", "protocol.file.allow": "user",
		"core.fsmonitor": "false", "credential.helper": "", "advice.detachedHead": "false",
		"gc.auto": "0", "maintenance.auto": "false",
		"http.https://github.com:443/.extraHeader": "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+testToken)),
	}
	for k, v := range want {
		if got, ok := cfg[k]; !ok || got != v {
			t.Errorf("config %s = %q (set %v), want %q", k, got, ok, v)
		}
	}
	if len(cfg) != len(want) {
		t.Errorf("config = %q, want exactly %q", cfg, want)
	}

	// file:// (tests) is the only case where the file protocol is always
	// allowed; anonymous calls carry no header at all.
	frun, err := Git{}.newRunner(t.TempDir(), "file:///srv/r.git", Auth{})
	if err != nil {
		t.Fatal(err)
	}
	defer frun.close()
	fileCfg := envConfig(frun.command(context.Background(), call{args: []string{"version"}}).Env)
	if fileCfg["protocol.file.allow"] != "always" || len(fileCfg) != len(want)-1 {
		t.Errorf("file:// config = %q", fileCfg)
	}
}

// envConfig reads the GIT_CONFIG_COUNT settings out of an environment.
func envConfig(envList []string) map[string]string {
	env := map[string]string{}
	for _, kv := range envList {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	cfg := map[string]string{}
	n, _ := strconv.Atoi(env["GIT_CONFIG_COUNT"])
	for i := range n {
		cfg[env[fmt.Sprintf("GIT_CONFIG_KEY_%d", i)]] = env[fmt.Sprintf("GIT_CONFIG_VALUE_%d", i)]
	}
	return cfg
}

func TestCheckURL(t *testing.T) {
	good := []string{
		"https://github.com/o/r.git", "http://127.0.0.1:8080/r.git", "ssh://git@github.com/o/r.git",
		"git@github.com:o/r.git", "file:///srv/git/r.git",
	}
	for _, u := range good {
		if err := checkURL(u); err != nil {
			t.Errorf("checkURL(%q) = %v", u, err)
		}
	}
	bad := []string{
		"https://user:hunter2pass@github.com/o/r.git", "https://ghp_tokentokentoken@github.com/o/r.git",
		"ssh://git:hunter2pass@github.com/o/r.git", "https://github.com/o/r.git?access_token=hunter2pass",
		"git://github.com/o/r.git", "ext::sh -c touch% /tmp/pwned", "/srv/git/r.git", "-uhttps://x/r.git",
		"https://github.com/o/r\n.git", "file://host/srv/r.git", "", "ssh://-oProxyCommand=x/r.git", "-oProxyCommand=x:r",
	}
	for _, u := range bad {
		err := checkURL(u)
		var e *Error
		if !errors.As(err, &e) || e.Kind != ErrBadURL {
			t.Errorf("checkURL(%q) = %v, want ErrBadURL", u, err)
			continue
		}
		for _, secret := range []string{"hunter2pass", "ghp_tokentokentoken"} {
			if strings.Contains(e.Error(), secret) {
				t.Errorf("checkURL(%q) repeats the secret: %v", u, e)
			}
		}
	}
}

func TestStderrIsScrubbed(t *testing.T) {
	auth := TokenAuth(testToken)
	s, err := Git{}.newRunner(t.TempDir(), "https://github.com/o/r.git", auth)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	// git echoes its arguments and config in some failures; make it echo
	// the header and the token: an unknown option and a bad config key.
	_, err = s.run(context.Background(), call{args: []string{"--" + auth.header, testToken}, t: target{op: "test"}})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *Error", err)
	}
	if !strings.Contains(e.Detail, "[redacted:") {
		t.Errorf("Detail = %q: expected git to echo the (scrubbed) argument", e.Detail)
	}
	red := credentialForms(testToken)
	for _, s := range []string{e.Error(), e.Msg, e.Detail} {
		if red.Redact(s) != s {
			t.Errorf("error shows the credential: %q", s)
		}
	}
	b64 := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + testToken))
	got := s.scrub.Redact("a " + auth.header + " b " + b64 + " c " + testToken + " d")
	if strings.Contains(got, testToken) || strings.Contains(got, b64) || strings.Contains(got, "Basic e") {
		t.Errorf("scrub left the credential: %q", got)
	}
}
