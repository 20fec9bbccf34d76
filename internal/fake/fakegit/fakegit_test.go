package fakegit

import (
	"bytes"
	"encoding/base64"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const widgets = "acme/widgets"

// tokens is the Options.Token of most tests: "rw" may push to
// acme/widgets, "ro" may only read it, "other" opens only acme/gadgets.
func tokens(tok, repo string) (read, write bool) {
	switch {
	case (tok == "rw" || tok == "s3cret-token") && repo == widgets:
		return true, true
	case tok == "ro" && repo == widgets:
		return true, false
	case tok == "other" && repo == "acme/gadgets":
		return true, true
	}
	return false, false
}

// gitCLI runs the git command line as a client would: isolated config,
// no prompts, and the token (if any) passed the way the worker passes
// it, as an http.extraHeader through the environment.
func gitCLI(t *testing.T, dir, token string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C",
		"GIT_AUTHOR_NAME=Client", "GIT_AUTHOR_EMAIL=client@example.invalid",
		"GIT_COMMITTER_NAME=Client", "GIT_COMMITTER_EMAIL=client@example.invalid",
	}
	if token != "" {
		auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
		cmd.Env = append(cmd.Env, "GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=http.extraHeader",
			"GIT_CONFIG_VALUE_0=Authorization: Basic "+auth)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustGit(t *testing.T, dir, token string, args ...string) string {
	t.Helper()
	out, err := gitCLI(t, dir, token, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// clone clones repo with token into a new directory and returns it.
func clone(t *testing.T, s *Server, repo, token string, extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	args := append([]string{"clone", "--quiet"}, extra...)
	mustGit(t, "", token, append(args, s.RepoURL(repo), dir)...)
	return dir
}

// commitFile writes name in the work tree dir and commits it.
func commitFile(t *testing.T, dir, name, content, msg string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	mustGit(t, dir, "", "add", "--", name)
	mustGit(t, dir, "", "commit", "--quiet", "-m", msg)
	return strings.TrimSpace(mustGit(t, dir, "", "rev-parse", "HEAD"))
}

func newWidgets(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	s := New(t, opts)
	c := s.CreateRepo(t, widgets, "main", map[string]string{
		"README.md":       "hello\n",
		"src/app/main.go": "package main\n",
	})
	s.CreateRepo(t, "acme/gadgets", "main", map[string]string{"g.txt": "g\n"})
	return s, c
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCloneWithToken(t *testing.T) {
	s, commit := newWidgets(t, Options{Token: tokens})
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") || strings.HasSuffix(s.URL, "/") {
		t.Errorf("URL = %q", s.URL)
	}
	dir := filepath.Join(t.TempDir(), "c")
	out := mustGit(t, "", "rw", "clone", "--filter=blob:none", s.RepoURL(widgets), dir)
	if strings.Contains(out, "filtering not recognized") {
		t.Errorf("partial clone not supported by the server:\n%s", out)
	}
	if got := readFile(t, filepath.Join(dir, "README.md")); got != "hello\n" {
		t.Errorf("README.md = %q", got)
	}
	if got := readFile(t, filepath.Join(dir, "src/app/main.go")); got != "package main\n" {
		t.Errorf("src/app/main.go = %q", got)
	}
	if head := strings.TrimSpace(mustGit(t, dir, "", "rev-parse", "HEAD")); head != commit {
		t.Errorf("HEAD = %s, CreateRepo returned %s", head, commit)
	}
	reqs := s.Requests()
	if !slices.Contains(reqs, "GET /acme/widgets.git/info/refs?service=git-upload-pack 200") ||
		!slices.Contains(reqs, "POST /acme/widgets.git/git-upload-pack 200") {
		t.Errorf("requests = %q, want the upload-pack discovery and RPC", reqs)
	}
	for _, r := range reqs {
		if !strings.HasSuffix(r, " 200") {
			t.Errorf("request %q: the header is sent every time, so nothing but 200 is expected", r)
		}
	}
}

func TestBadCredentialsFail(t *testing.T) {
	s, _ := newWidgets(t, Options{Token: tokens})
	for _, tok := range []string{"wrong", ""} {
		out, err := gitCLI(t, "", tok, "clone", s.RepoURL(widgets), filepath.Join(t.TempDir(), "c"))
		if err == nil {
			t.Fatalf("clone with token %q succeeded:\n%s", tok, out)
		}
	}
	if reqs := s.Requests(); !slices.Contains(reqs, "GET /acme/widgets.git/info/refs?service=git-upload-pack 401") {
		t.Errorf("requests = %q, want a 401", reqs)
	}

	get := func(user, pass, repo string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", s.RepoURL(repo)+"/info/refs?service=git-upload-pack", nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name, user, pass, repo string
		status                 int
	}{
		{"good token", "x-access-token", "rw", widgets, 200},
		{"wrong token", "x-access-token", "wrong", widgets, 401},
		{"no token", "", "", widgets, 401},
		{"wrong user", "bob", "rw", widgets, 401},
		{"token for another repo", "x-access-token", "other", widgets, 404},
		{"unknown repo", "x-access-token", "rw", "acme/nope", 404},
		{"unknown repo, no token", "", "", "acme/nope", 404},
	} {
		resp := get(tc.user, tc.pass, tc.repo)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		wantAuth := ""
		if tc.status == 401 {
			wantAuth = `Basic realm="git"`
		}
		if got := resp.Header.Get("WWW-Authenticate"); got != wantAuth {
			t.Errorf("%s: WWW-Authenticate = %q, want %q", tc.name, got, wantAuth)
		}
	}
}

func TestUnknownRepoFails(t *testing.T) {
	s, _ := newWidgets(t, Options{Token: tokens})
	out, err := gitCLI(t, "", "rw", "clone", s.RepoURL("acme/nope"), filepath.Join(t.TempDir(), "c"))
	if err == nil || !strings.Contains(out, "not found") {
		t.Fatalf("clone of an unknown repo: err=%v\n%s", err, out)
	}
	if reqs := s.Requests(); !slices.Contains(reqs, "GET /acme/nope.git/info/refs?service=git-upload-pack 404") {
		t.Errorf("requests = %q, want a 404", reqs)
	}
}

func TestPushNewBranch(t *testing.T) {
	s, base := newWidgets(t, Options{Token: tokens})
	dir := clone(t, s, widgets, "rw", "--depth=1")
	mustGit(t, dir, "", "switch", "--quiet", "-c", "sandbot/task-1")
	want := commitFile(t, dir, "docs/change.txt", "change\n", "bot: add change.txt")
	mustGit(t, dir, "rw", "push", "--quiet", "origin", "sandbot/task-1")

	got, ok := s.Branch(widgets, "sandbot/task-1")
	if !ok || got != want {
		t.Fatalf("Branch = %q, %v; want %s", got, ok, want)
	}
	if c := s.Show(t, widgets, "sandbot/task-1", "docs/change.txt"); c != "change\n" {
		t.Errorf("Show = %q", c)
	}
	if msgs := s.Log(t, widgets, "sandbot/task-1"); !slices.Equal(msgs, []string{"bot: add change.txt", "Initial commit"}) {
		t.Errorf("Log = %q", msgs)
	}
	if main, _ := s.Branch(widgets, "main"); main != base {
		t.Errorf("main moved to %s", main)
	}
	if reqs := s.Requests(); !slices.Contains(reqs, "POST /acme/widgets.git/git-receive-pack 200") {
		t.Errorf("requests = %q", reqs)
	}
}

func TestPushToProtectedBranchRejected(t *testing.T) {
	s, base := newWidgets(t, Options{Token: tokens, Protected: []string{"main", "release-*"}})
	dir := clone(t, s, widgets, "rw")
	commitFile(t, dir, "x.txt", "x\n", "change")

	for _, dst := range []string{"main", "release-1"} {
		out, err := gitCLI(t, dir, "rw", "push", "origin", "HEAD:refs/heads/"+dst)
		if err == nil {
			t.Fatalf("push to %s succeeded:\n%s", dst, out)
		}
		if want := "remote: protected branch: refs/heads/" + dst + " cannot be pushed to"; !strings.Contains(out, want) {
			t.Errorf("push to %s: output lacks %q:\n%s", dst, want, out)
		}
	}
	if got, _ := s.Branch(widgets, "main"); got != base {
		t.Errorf("main moved to %s", got)
	}
	if _, ok := s.Branch(widgets, "release-1"); ok {
		t.Error("release-1 was created")
	}
	// path.Match's '*' stops at '/', and other branches are open.
	for _, dst := range []string{"release-1/hotfix", "feature"} {
		mustGit(t, dir, "rw", "push", "--quiet", "origin", "HEAD:refs/heads/"+dst)
		if _, ok := s.Branch(widgets, dst); !ok {
			t.Errorf("push to %s did not create it", dst)
		}
	}
}

func TestNonFastForwardRejected(t *testing.T) {
	s, _ := newWidgets(t, Options{Token: tokens})
	dir := clone(t, s, widgets, "rw")
	server := s.Commit(t, widgets, "main", map[string]string{"server.txt": "s\n"}, "server change")
	commitFile(t, dir, "client.txt", "c\n", "client change")

	out, err := gitCLI(t, dir, "rw", "push", "origin", "main")
	if err == nil || !strings.Contains(out, "[rejected]") {
		t.Fatalf("diverged push: err=%v\n%s", err, out)
	}
	out, err = gitCLI(t, dir, "rw", "push", "--force", "origin", "main")
	if err == nil || !strings.Contains(out, "non-fast-forward") {
		t.Fatalf("forced diverged push: err=%v\n%s", err, out)
	}
	if got, _ := s.Branch(widgets, "main"); got != server {
		t.Errorf("main = %s, want the server's %s", got, server)
	}
}

func TestLargePushIsBuffered(t *testing.T) {
	s, _ := newWidgets(t, Options{Token: tokens})
	dir := clone(t, s, widgets, "rw")
	// Random bytes do not compress, so the pack exceeds http.postBuffer
	// (1 MiB) and git sends it chunked.
	big := make([]byte, 3<<20)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(big)
	want := commitFile(t, dir, "big.bin", string(big), "add 3 MB")
	mustGit(t, dir, "rw", "push", "--quiet", "origin", "HEAD:refs/heads/big")

	if got, ok := s.Branch(widgets, "big"); !ok || got != want {
		t.Fatalf("Branch(big) = %q, %v; want %s", got, ok, want)
	}
	if !bytes.Equal([]byte(s.Show(t, widgets, "big", "big.bin")), big) {
		t.Error("big.bin differs on the server")
	}
	s.mu.Lock()
	buffered := s.buffered
	s.mu.Unlock()
	if buffered == 0 {
		t.Error("no chunked body arrived: the test did not exercise buffering")
	}
}

func TestReadOnlyTokenCannotPush(t *testing.T) {
	s, base := newWidgets(t, Options{Token: tokens})
	dir := clone(t, s, widgets, "ro")
	commitFile(t, dir, "x.txt", "x\n", "change")
	out, err := gitCLI(t, dir, "ro", "push", "origin", "HEAD:refs/heads/ro-branch")
	if err == nil || !strings.Contains(out, "403") {
		t.Fatalf("read-only push: err=%v\n%s", err, out)
	}
	if _, ok := s.Branch(widgets, "ro-branch"); ok {
		t.Error("ro-branch was created")
	}
	if got, _ := s.Branch(widgets, "main"); got != base {
		t.Errorf("main moved to %s", got)
	}
	if reqs := s.Requests(); !slices.Contains(reqs, "GET /acme/widgets.git/info/refs?service=git-receive-pack 403") {
		t.Errorf("requests = %q, want a 403 on receive-pack", reqs)
	}
}

func TestNoAuthWhenTokenNil(t *testing.T) {
	s, _ := newWidgets(t, Options{})
	dir := clone(t, s, widgets, "")
	want := commitFile(t, dir, "x.txt", "x\n", "anonymous change")
	mustGit(t, dir, "", "push", "--quiet", "origin", "HEAD:refs/heads/anon")
	if got, _ := s.Branch(widgets, "anon"); got != want {
		t.Errorf("Branch(anon) = %q, want %s", got, want)
	}
}

func TestHelpers(t *testing.T) {
	s := New(t, Options{})
	first := s.CreateRepo(t, "acme/tools", "trunk", map[string]string{"a/b/c.txt": "one\n", "top": ""})
	if got, ok := s.Branch("acme/tools", "trunk"); !ok || got != first {
		t.Fatalf("Branch(trunk) = %q, %v; want %s", got, ok, first)
	}
	// HEAD names the branch: a clone checks it out.
	dir := clone(t, s, "acme/tools", "")
	if b := strings.TrimSpace(mustGit(t, dir, "", "branch", "--show-current")); b != "trunk" {
		t.Errorf("clone checked out %q, want trunk", b)
	}

	// An absent branch starts from the default one.
	second := s.Commit(t, "acme/tools", "feature", map[string]string{"a/b/c.txt": "two\n", "new.txt": "n"}, "second\n\nwith a body")
	if msgs := s.Log(t, "acme/tools", "feature"); !slices.Equal(msgs, []string{"second\n\nwith a body", "Initial commit"}) {
		t.Errorf("Log(feature) = %q", msgs)
	}
	if got := s.Show(t, "acme/tools", "feature", "a/b/c.txt"); got != "two\n" {
		t.Errorf("Show(feature) = %q", got)
	}
	if got := s.Show(t, "acme/tools", "feature", "top"); got != "" {
		t.Errorf("untouched file = %q", got)
	}
	if got := s.Show(t, "acme/tools", first, "a/b/c.txt"); got != "one\n" {
		t.Errorf("Show(first) = %q", got)
	}
	// An existing branch grows on its own tip.
	third := s.Commit(t, "acme/tools", "feature", map[string]string{"new.txt": "n2"}, "third")
	if got, _ := s.Branch("acme/tools", "feature"); got != third || third == second {
		t.Errorf("Branch(feature) = %s, want %s", got, third)
	}
	if parent := strings.TrimSpace(mustGit(t, dir, "", "--git-dir="+filepath.Join(s.root, "acme/tools.git"), "rev-parse", third+"^")); parent != second {
		t.Errorf("parent of third = %s, want %s", parent, second)
	}
	if got, _ := s.Branch("acme/tools", "trunk"); got != first {
		t.Errorf("trunk moved to %s", got)
	}
	for _, tc := range [][2]string{{"acme/tools", "nope"}, {"acme/nope", "trunk"}, {"../x", "trunk"}, {"acme/tools", ""}} {
		if got, ok := s.Branch(tc[0], tc[1]); ok {
			t.Errorf("Branch(%q, %q) = %q, want none", tc[0], tc[1], got)
		}
	}
	if got := s.RepoURL("acme/tools"); got != s.URL+"/acme/tools.git" {
		t.Errorf("RepoURL = %q", got)
	}
	cfg, err := s.run(nil, filepath.Join(s.root, "acme/tools.git"), "config", "receive.denyNonFastForwards")
	if err != nil || strings.TrimSpace(string(cfg)) != "true" {
		t.Errorf("receive.denyNonFastForwards = %q, %v", cfg, err)
	}
}

// The backend must get the CGI environment the fact sheet requires and
// never the token: a stand-in backend prints what it was given.
func TestBackendEnvironment(t *testing.T) {
	script := filepath.Join(t.TempDir(), "backend")
	body := "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\nenv\necho BODY:\ncat\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Options{Token: tokens}, script)
	s.CreateRepo(t, widgets, "main", nil)

	// An unknown length makes the client send the body chunked.
	payload := strings.Repeat("p", 5000)
	req, err := http.NewRequest("POST", s.RepoURL(widgets)+"/git-receive-pack", io.MultiReader(strings.NewReader(payload)))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("x-access-token", "s3cret-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, %v: %s", resp.StatusCode, err, out)
	}
	env, got, _ := strings.Cut(string(out), "BODY:\n")
	if got != payload {
		t.Errorf("backend read %d bytes of body, want %d", len(got), len(payload))
	}
	lines := strings.Split(env, "\n")
	auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:s3cret-token"))
	if strings.Contains(env, "s3cret-token") || strings.Contains(env, auth) || strings.Contains(env, "HTTP_AUTHORIZATION") {
		t.Errorf("the token reached the backend:\n%s", env)
	}
	for _, want := range []string{
		"GIT_HTTP_EXPORT_ALL=1",
		"REMOTE_USER=x-access-token",
		"GIT_PROJECT_ROOT=" + s.root,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"CONTENT_LENGTH=5000",
		"PATH_INFO=/acme/widgets.git/git-receive-pack",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("backend environment lacks %q", want)
		}
	}
	config := map[string]string{}
	for _, l := range lines {
		if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(k, "GIT_CONFIG_KEY_") {
			n := strings.TrimPrefix(k, "GIT_CONFIG_KEY_")
			for _, l2 := range lines {
				if val, ok := strings.CutPrefix(l2, "GIT_CONFIG_VALUE_"+n+"="); ok {
					config[v] = val
				}
			}
		}
	}
	for _, k := range []string{"http.receivepack", "uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant", "receive.denyNonFastForwards"} {
		if config[k] != "true" {
			t.Errorf("config %s = %q, want true (config %v)", k, config[k], config)
		}
	}
	if home := os.Getenv("HOME"); home != "" && slices.Contains(lines, "HOME="+home) {
		t.Errorf("backend got the real HOME %s", home)
	}
}
