package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/fake/fakegit"
	"github.com/sandbot/sandbot/internal/fake/fakegithub"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// The repository loop end to end: a real git server (git http-backend on
// loopback) holding the repositories, a wire-level GitHub API fake, the
// real worker cloning and pushing with its token, the real chat core.

const repoToken = "ghp_RepoLoopTestToken0123456789abcdefABCD"

// repoEnv is a threadEnv whose worker holds a GitHub token for a git
// server and a GitHub fake.
type repoEnv struct {
	*threadEnv
	git *fakegit.Server
	gh  *fakegithub.Server
	rp  *repoPoster
}

// repoPoster is the thread poster plus files (chat.Attacher), as Slack's
// and Discord's adapters attach /diff's patch.
type repoPoster struct {
	*threadPoster
	mu       sync.Mutex
	attached []chat.Attachment
}

func (p *repoPoster) Attach(_ context.Context, _ chat.Thread, a chat.Attachment) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attached = append(p.attached, a)
	return nil
}

func (p *repoPoster) attachments() []chat.Attachment {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]chat.Attachment(nil), p.attached...)
}

func newRepoEnv(t *testing.T, withDocker bool, opts ...stackOption) *repoEnv {
	t.Helper()
	return newRepoEnvWith(t, withDocker, fakegit.Options{}, opts...)
}

// newRepoEnvOpts is newRepoEnv with the git server's options.
func newRepoEnvOpts(t *testing.T, gitOpts fakegit.Options) *repoEnv {
	t.Helper()
	return newRepoEnvWith(t, false, gitOpts)
}

func newRepoEnvWith(t *testing.T, withDocker bool, gitOpts fakegit.Options, opts ...stackOption) *repoEnv {
	t.Helper()
	opt, git, gh := repoFakes(t, gitOpts)
	e := &repoEnv{threadEnv: newThreadEnv(t, withDocker, append([]stackOption{opt}, opts...)...), git: git, gh: gh}
	e.rp = &repoPoster{threadPoster: e.p}
	return e
}

// repoFakes starts a git server holding acme/widgets and a GitHub API fake,
// and returns the stack option that points the worker at them with
// repoToken.
func repoFakes(t testing.TB, gitOpts fakegit.Options) (stackOption, *fakegit.Server, *fakegithub.Server) {
	t.Helper()
	return repoFakesWith(t, gitOpts, fakegithub.Options{Tokens: []string{repoToken}})
}

// repoFakesWith is repoFakes with the GitHub fake's options (a GitHub App).
func repoFakesWith(t testing.TB, gitOpts fakegit.Options, ghOpts fakegithub.Options) (stackOption, *fakegit.Server, *fakegithub.Server) {
	t.Helper()
	var git *fakegit.Server
	ghOpts.HTMLBase = "https://github.example"
	ghOpts.Branch = func(repo, branch string) (string, bool) { return git.Branch(repo, branch) }
	gh := fakegithub.New(ghOpts)
	gitOpts.Token = func(tok, repo string) (bool, bool) {
		if repo == "acme/locked" {
			return false, false
		}
		ok := tok == repoToken || gh.ValidToken(tok)
		return ok, ok
	}
	git = fakegit.New(t, gitOpts)
	api := httptest.NewServer(gh)
	t.Cleanup(api.Close)
	git.CreateRepo(t, "acme/widgets", "main", map[string]string{
		"README.md":   "# widgets\n",
		"src/main.go": "package main\n\nfunc main() {}\n",
		".gitignore":  "build/\n",
	})
	return func(c *config.Config) {
		c.Repos.Allow = []string{"acme/*"}
		c.Repos.GitURL = git.URL
		c.Repos.APIURL = api.URL
		c.Repos.Token = repoToken
	}, git, gh
}

// cmd sends a command as u through the attaching poster and returns the
// reply posted in the thread.
func (e *repoEnv) cmd(th chat.Thread, u chat.User, text string) string {
	e.t.Helper()
	before := len(e.p.textsIn(th))
	if err := e.core.HandleMessage(e.ctx, e.rp, chat.Message{EventID: "cmd-" + u.ID + "-" + text + "-" + strconv.Itoa(before), Thread: th, User: u, Text: text}); err != nil {
		e.t.Fatalf("HandleMessage(%q): %v", text, err)
	}
	after := e.p.textsIn(th)
	if len(after) <= before {
		e.t.Fatalf("%s: no reply in the thread", text)
	}
	return after[len(after)-1].Text
}

func TestRepoLoopCloneDiffPullRequest(t *testing.T) {
	e := newRepoEnv(t, false)
	th := e.thread("repo-loop")
	ts := e.turn(th, 1, "acme/widgets: fix the readme",
		fakeopenai.ToolCallStep("r1", "shell", shell("git status --short", "git log --oneline", "cat README.md", "git config --list --show-origin",
			"echo 'fixed' >> README.md", "printf 'package main\\n\\nvar x = 1\\n' > src/new.go")),
		fakeopenai.FinalStep("Fixed the README and added src/new.go."))
	c := onlyCall(t, ts)
	if got := cmdOut(t, c, "cat README.md"); got != "# widgets" {
		t.Fatalf("the agent reads README.md = %q, want the cloned file", got)
	}
	if got := cmdOut(t, c, "git log --oneline"); !strings.Contains(got, " ") || strings.Count(got, "\n") != 0 {
		t.Fatalf("git log in the sandbox = %q, want the one commit of a shallow clone", got)
	}
	if got := cmdOut(t, c, "git config --list --show-origin"); strings.Contains(got, "extraheader") || strings.Contains(got, "credential") {
		t.Fatalf("the sandbox's git config holds credentials: %s", got)
	}
	info := e.info(th)
	if info.Repo == nil || info.Repo.Name != "acme/widgets" || info.Repo.Branch != "main" || !info.Repo.Shallow {
		t.Fatalf("session repo = %+v", info.Repo)
	}
	base, _ := e.git.Branch("acme/widgets", "main")
	if info.Repo.Commit != base {
		t.Fatalf("base commit %s, the server's main is %s", info.Repo.Commit, base)
	}

	// /diff: a summary in the thread, the patch as a file.
	r := e.cmd(th, alice, "/diff")
	for _, want := range []string{"2 files changed", "`README.md` modified", "`src/new.go` added", "as of turn 1"} {
		if !strings.Contains(r, want) {
			t.Fatalf("/diff replied %q, want %q in it", r, want)
		}
	}
	att := e.rp.attachments()
	if len(att) != 1 || !strings.Contains(att[0].Content, "+fixed") || !strings.Contains(att[0].Content, "new file mode") || strings.Contains(att[0].Content, ".git/") {
		t.Fatalf("/diff attached %+v", att)
	}

	// Only the owner and approvers open pull requests.
	if r := e.cmd(th, bobUser, "/pr"); !strings.Contains(r, "may not open a pull request") {
		t.Fatalf("/pr by bob replied %q", r)
	}
	r = e.cmd(th, alice, "/pr Fix the readme")
	if !strings.Contains(r, "Opened pull request [#1](https://github.example/acme/widgets/pull/1)") {
		t.Fatalf("/pr replied %q", r)
	}
	prs := e.gh.PRs("acme/widgets")
	if len(prs) != 1 || prs[0].Base != "main" || prs[0].Title != "Fix the readme" || !strings.HasPrefix(prs[0].Head, "sandbot/") {
		t.Fatalf("GitHub has %+v", prs)
	}
	branch := prs[0].Head
	head, ok := e.git.Branch("acme/widgets", branch)
	if !ok || prs[0].HeadSHA != head {
		t.Fatalf("branch %s on the git server: %s %v; the PR's head %s", branch, head, ok, prs[0].HeadSHA)
	}
	if got := e.git.Show(t, "acme/widgets", branch, "README.md"); got != "# widgets\nfixed\n" {
		t.Fatalf("README.md on %s = %q", branch, got)
	}
	if got := e.git.Show(t, "acme/widgets", branch, ".gitignore"); got != "build/\n" {
		t.Fatalf(".gitignore on %s = %q (unchanged files must stay)", branch, got)
	}
	if log := e.git.Log(t, "acme/widgets", branch); len(log) != 2 || !strings.Contains(log[0], "Co-authored-by: alice <U-alice@console.sandbot.invalid>") {
		t.Fatalf("log of %s = %q", branch, log)
	}
	if body := prs[0].Body; !strings.Contains(body, "fix the readme") || !strings.Contains(body, "Fixed the README and added src/new.go.") {
		t.Fatalf("PR body %q should hold the request and the model's summary", body)
	}

	// More work, a second /pr: a new commit on the same branch, the same PR.
	e.turn(th, 2, "also document x",
		fakeopenai.ToolCallStep("r2", "shell", shell("echo 'x is one' >> README.md")),
		fakeopenai.FinalStep("Documented x."))
	if r := e.cmd(th, alice, "/pr"); !strings.Contains(r, "Pushed a new commit to `"+branch+"`; pull request [#1]") {
		t.Fatalf("second /pr replied %q", r)
	}
	if prs := e.gh.PRs("acme/widgets"); len(prs) != 1 {
		t.Fatalf("second /pr made %d PRs", len(prs))
	}
	if log := e.git.Log(t, "acme/widgets", branch); len(log) != 3 {
		t.Fatalf("log of %s after the second /pr = %q", branch, log)
	}
	if got := e.git.Show(t, "acme/widgets", branch, "README.md"); got != "# widgets\nfixed\nx is one\n" {
		t.Fatalf("README.md on %s = %q", branch, got)
	}
	if err := e.core.HandleMessage(e.ctx, e.rp, chat.Message{EventID: "status-1", Thread: th, User: alice, Text: "/status"}); err != nil {
		t.Fatal(err)
	}
	posts, _ := e.p.snapshot()
	if r := cardText(posts[len(posts)-1].Cards[0]); !strings.Contains(r, "acme/widgets") || !strings.Contains(r, "[#1](https://github.example/acme/widgets/pull/1)") {
		t.Fatalf("/status = %q", r)
	}

	// The token is nowhere but the worker: not in history, the transcript,
	// the workspace, the logs or the chat.
	assertNoToken(t, e, th)
}

// assertNoToken greps every place a session's data lands for the worker's
// token, plain and in the forms git and HTTP would carry it.
func assertNoToken(t *testing.T, e *repoEnv, th chat.Thread) {
	t.Helper()
	forms := []string{repoToken, base64.StdEncoding.EncodeToString([]byte("x-access-token:" + repoToken)), base64.StdEncoding.EncodeToString([]byte(repoToken))}
	leaks := func(s string) bool {
		for _, f := range forms {
			if strings.Contains(s, f) {
				return true
			}
		}
		return false
	}
	events := 0
	iter := e.c.GetWorkflowHistory(e.ctx, th.ID(), "", false, 0)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		events++
		js, _ := protojson.Marshal(ev)
		if leaks(string(js)) {
			t.Errorf("history event %d (%s) holds the token", ev.GetEventId(), ev.GetEventType())
		}
	}
	if events < 20 {
		t.Fatalf("only %d history events", events)
	}
	if h := dump(e.history(th)); leaks(h) {
		t.Errorf("the transcript holds the token")
	}
	files := 0
	err := filepath.Walk(e.cfg.Sandbox.LocalRoot, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		files++
		b, rerr := os.ReadFile(p)
		if rerr == nil && leaks(string(b)) {
			t.Errorf("workspace file %s holds the token", p)
		}
		return nil
	})
	if err != nil || files < 10 {
		t.Fatalf("walked %d workspace files: %v", files, err)
	}
	if l := logText(t); leaks(l) || len(l) == 0 {
		t.Errorf("the logs hold the token (or are empty: %d bytes)", len(l))
	}
	posts, texts := e.poster.snapshot()
	said := e.p.textsIn(th)
	if leaks(dump(posts)+strings.Join(texts, "\n")+dump(said)+dump(e.rp.attachments())) || len(said) == 0 {
		t.Errorf("the chat holds the token")
	}
}

func (s *stack) history(th chat.Thread) []session.HistoryEntry {
	s.t.Helper()
	v, err := s.c.QueryWorkflow(s.ctx, th.ID(), "", session.QueryHistory, session.HistoryRequest{})
	if err != nil {
		s.t.Fatalf("query history: %v", err)
	}
	var out []session.HistoryEntry
	if err := v.Get(&out); err != nil {
		s.t.Fatal(err)
	}
	return out
}

// Refused and failed clones say why, and the session goes on.
func TestRepoRefusalsAndFailedClones(t *testing.T) {
	e := newRepoEnv(t, false, func(c *config.Config) { c.Repos.MaxBytes = 1 << 20 })
	e.git.CreateRepo(t, "acme/huge", "main", map[string]string{"blob.bin": strings.Repeat("0123456789abcdef", 200<<10)})
	e.git.CreateRepo(t, "acme/locked", "main", map[string]string{"a.txt": "a\n"})

	// Off the allowlist: refused by the bot, no session started.
	th := e.thread("repo-refused")
	r := e.cmd(th, alice, "other/thing: look around")
	if !strings.Contains(r, "other/thing is not on this deployment's repository allowlist (allowed: acme/*)") {
		t.Fatalf("a repository off the allowlist got %q", r)
	}
	if _, err := e.c.DescribeWorkflowExecution(e.ctx, th.ID(), ""); err == nil {
		t.Fatal("a refused repository started a session")
	}

	for _, c := range []struct{ repo, why string }{
		{"acme/missing", "not found"},
		{"acme/huge", "over the 1 mib (1048576 bytes) limit"},
		{"acme/locked", "or the credentials cannot see it"},
	} {
		th := e.thread("repo-" + strings.ReplaceAll(c.repo, "/", "-"))
		ts := e.turn(th, 1, c.repo+": look around", fakeopenai.ToolCallStep("l1", "shell", shell("ls -A")), fakeopenai.FinalStep("nothing here"))
		if !hasNotice(ts, "Could not start from "+c.repo) {
			t.Fatalf("%s: notices %q", c.repo, ts.Notices)
		}
		if ts.Status != session.StatusComplete || cmdOut(t, onlyCall(t, ts), "ls -A") != "(no output)" {
			t.Fatalf("%s: the turn should run in an empty workspace: %s", c.repo, dump(ts))
		}
		if e.info(th).Repo != nil {
			t.Fatalf("%s: a failed clone left a repository on the session", c.repo)
		}
		msgs := dump(e.model.Requests()[len(e.model.Requests())-1].Body.Messages)
		if !strings.Contains(msgs, "could not clone the repository "+c.repo) {
			t.Fatalf("%s: the model was not told the clone failed: %s", c.repo, msgs)
		}
		if n := strings.ToLower(strings.Join(ts.Notices, " ")); !strings.Contains(n, c.why) {
			t.Fatalf("%s: the notice %q does not say %q", c.repo, ts.Notices, c.why)
		}
	}

	// The session that failed is still usable: /repo sets a repository
	// while its workspace is empty.
	th = e.thread("repo-acme-missing")
	if r := e.cmd(th, alice, "/repo acme/widgets"); !strings.Contains(r, "This session now works on **acme/widgets** (main @") {
		t.Fatalf("/repo replied %q", r)
	}
	ts := e.turn(th, 2, "now look", fakeopenai.ToolCallStep("l2", "shell", shell("cat README.md")), fakeopenai.FinalStep("found it"))
	if got := cmdOut(t, onlyCall(t, ts), "cat README.md"); got != "# widgets" {
		t.Fatalf("after /repo README.md = %q", got)
	}
	if r := e.cmd(th, alice, "/repo acme/locked"); !strings.Contains(r, "already works on acme/widgets") {
		t.Fatalf("a second /repo replied %q", r)
	}
}

// A push the server rejects (someone else moved the session's branch)
// says why in the thread and changes nothing.
func TestRepoPushRejectedNonFastForward(t *testing.T) {
	e := newRepoEnv(t, false)
	th := e.thread("repo-nonff")
	e.turn(th, 1, "acme/widgets: edit", fakeopenai.ToolCallStep("n1", "shell", shell("echo one >> README.md")), fakeopenai.FinalStep("edited"))
	if r := e.cmd(th, alice, "/pr"); !strings.Contains(r, "Opened pull request") {
		t.Fatalf("/pr replied %q", r)
	}
	branch := e.gh.PRs("acme/widgets")[0].Head
	theirs := e.git.Commit(t, "acme/widgets", branch, map[string]string{"theirs.txt": "not the session's\n"}, "someone else's commit")
	e.turn(th, 2, "edit again", fakeopenai.ToolCallStep("n2", "shell", shell("echo two >> README.md")), fakeopenai.FinalStep("edited"))
	r := e.cmd(th, alice, "/pr")
	if !strings.Contains(r, "could not push to "+branch) || !strings.Contains(r, "someone else pushed to it") {
		t.Fatalf("a non-fast-forward /pr replied %q", r)
	}
	if head, _ := e.git.Branch("acme/widgets", branch); head != theirs {
		t.Fatalf("the branch moved to %s; someone else's commit %s must stay", head, theirs)
	}
}

// Pushing to a protected branch is refused with the server's reason.
func TestRepoPushRejectedProtected(t *testing.T) {
	e := newRepoEnvOpts(t, fakegit.Options{Protected: []string{"sandbot/*"}})
	th := e.thread("repo-protected")
	e.turn(th, 1, "acme/widgets: edit", fakeopenai.ToolCallStep("p1", "shell", shell("echo one >> README.md")), fakeopenai.FinalStep("edited"))
	r := e.cmd(th, alice, "/pr")
	if !strings.Contains(r, "could not push") || !strings.Contains(r, "protected branch") {
		t.Fatalf("a push to a protected branch replied %q", r)
	}
	if prs := e.gh.PRs("acme/widgets"); len(prs) != 0 {
		t.Fatalf("a refused push opened %+v", prs)
	}
}

// A workspace holding a secret is never pushed.
func TestRepoPushRefusesSecrets(t *testing.T) {
	e := newRepoEnv(t, false)
	th := e.thread("repo-secret")
	e.turn(th, 1, "acme/widgets: add config", fakeopenai.ToolCallStep("s1", "shell", shell(
		"echo 'AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE' > deploy.env", "echo ok >> README.md")), fakeopenai.FinalStep("added"))
	r := e.cmd(th, alice, "/pr")
	if !strings.Contains(r, "refused to push") || !strings.Contains(r, "deploy.env") || !strings.Contains(r, "Nothing was pushed") {
		t.Fatalf("/pr with a secret replied %q", r)
	}
	if strings.Contains(r, "AKIAIOSFODNN7EXAMPLE") {
		t.Fatalf("the refusal quotes the secret: %q", r)
	}
	if prs := e.gh.PRs("acme/widgets"); len(prs) != 0 {
		t.Fatalf("a refused push opened %+v", prs)
	}
	if _, ok := e.git.Branch("acme/widgets", session.SessionBranch(th.ID(), 1)); ok {
		t.Fatal("a refused push created the branch")
	}
}

// A fork of a repository session keeps the repository and pushes its own
// branch.
func TestRepoForkPushesItsOwnBranch(t *testing.T) {
	e := newRepoEnv(t, false)
	th := e.thread("repo-fork-src")
	e.turn(th, 1, "acme/widgets: edit", fakeopenai.ToolCallStep("f1", "shell", shell("echo source >> README.md")), fakeopenai.FinalStep("edited"))
	fork := e.fork(th, `/fork "try another way"`, 1, "local")
	ts := e.turn(fork, 1, "edit differently", fakeopenai.ToolCallStep("f2", "shell", shell("git log --oneline", "echo fork > fork.txt")), fakeopenai.FinalStep("edited"))
	if got := cmdOut(t, onlyCall(t, ts), "git log --oneline"); got == "" {
		t.Fatal("the fork's workspace has no git history")
	}
	if r := e.cmd(fork, alice, "/pr from the fork"); !strings.Contains(r, "Opened pull request [#1]") {
		t.Fatalf("/pr in the fork replied %q", r)
	}
	if r := e.cmd(th, alice, "/pr from the source"); !strings.Contains(r, "Opened pull request [#2]") {
		t.Fatalf("/pr in the source replied %q", r)
	}
	prs := e.gh.PRs("acme/widgets")
	if len(prs) != 2 || prs[0].Head == prs[1].Head {
		t.Fatalf("PRs %+v: the fork and the source must push their own branches", prs)
	}
	if got := e.git.Show(t, "acme/widgets", prs[0].Head, "README.md"); got != "# widgets\nsource\n" {
		t.Fatalf("the fork's branch has README.md %q", got)
	}
	if got := e.git.Show(t, "acme/widgets", prs[0].Head, "fork.txt"); got != "fork\n" {
		t.Fatalf("the fork's branch has fork.txt %q", got)
	}
	if got := e.git.Show(t, "acme/widgets", prs[1].Head, "README.md"); got != "# widgets\nsource\n" {
		t.Fatalf("the source's branch has README.md %q", got)
	}
}

// /backend docker moves the checkout, .git included, with the workspace.
func TestRepoMovesToDocker(t *testing.T) {
	e := newRepoEnv(t, true)
	th := e.thread("repo-docker")
	e.turn(th, 1, "acme/widgets: edit on local", fakeopenai.ToolCallStep("d1", "shell", shell("echo local >> README.md")), fakeopenai.FinalStep("edited"))
	if r := e.command(th, "/backend docker"); !strings.Contains(r, "docker") {
		t.Fatalf("/backend docker replied %q", r)
	}
	ts := e.turn(th, 2, "edit on docker", fakeopenai.ToolCallStep("d2", "shell", shell("cat .git/HEAD", "cat README.md", "echo docker > docker.txt")), fakeopenai.FinalStep("edited"))
	c := onlyCall(t, ts)
	if got := cmdOut(t, c, "cat .git/HEAD"); got != "ref: refs/heads/main" {
		t.Fatalf(".git/HEAD on docker = %q", got)
	}
	if got := cmdOut(t, c, "cat README.md"); got != "# widgets\nlocal" {
		t.Fatalf("README.md on docker = %q", got)
	}
	r := e.cmd(th, alice, "/diff")
	if !strings.Contains(r, "`README.md` modified") || !strings.Contains(r, "`docker.txt` added") {
		t.Fatalf("/diff after the move replied %q", r)
	}
	if r := e.cmd(th, alice, "/pr"); !strings.Contains(r, "Opened pull request") {
		t.Fatalf("/pr from docker replied %q", r)
	}
	branch := e.gh.PRs("acme/widgets")[0].Head
	if got := e.git.Show(t, "acme/widgets", branch, "docker.txt"); got != "docker\n" {
		t.Fatalf("docker.txt on %s = %q", branch, got)
	}
}

// A worker whose token the git server refuses says so, naming no token.
func TestRepoCloneWithARefusedToken(t *testing.T) {
	e := newRepoEnv(t, false, func(c *config.Config) { c.Repos.Token = "ghp_ThisTokenWasRevoked0123456789abcdefXY" })
	th := e.thread("repo-bad-token")
	ts := e.turn(th, 1, "acme/widgets: look", fakeopenai.FinalStep("nothing to see"))
	n := strings.Join(ts.Notices, " ")
	if !strings.Contains(n, "Could not start from acme/widgets: The git server refused the credentials") || strings.Contains(n, "ThisTokenWasRevoked") {
		t.Fatalf("notices %q", ts.Notices)
	}
	if ts.Status != session.StatusComplete || e.info(th).Repo != nil {
		t.Fatalf("the session should go on without a repository: %s", dump(ts))
	}
}

// The agent controls the workspace's .git, so the worker never runs git
// in it: hooks, core.fsmonitor, filters and an alternate object store the
// agent planted do nothing on the worker during /diff and /pr, and the
// pushed commit holds the files, not the agent's repository.
func TestRepoAgentsGitDirectoryIsNeverTrusted(t *testing.T) {
	e := newRepoEnv(t, false)
	marker := filepath.Join(t.TempDir(), "pwned")
	th := e.thread("repo-untrusted-git")
	e.turn(th, 1, "acme/widgets: plant things", fakeopenai.ToolCallStep("a1", "shell", shell(
		"printf '[core]\\n\\tfsmonitor = touch "+marker+"\\n\\thooksPath = .git/evil\\n[filter \"x\"]\\n\\tclean = touch "+marker+"\\n' >> .git/config",
		"mkdir -p .git/evil && printf '#!/bin/sh\\ntouch "+marker+"\\n' > .git/evil/pre-commit && chmod +x .git/evil/pre-commit",
		"echo '* filter=x diff=x' > .gitattributes",
		"echo changed >> README.md",
		"git add -A && git -c user.name=agent -c user.email=a@b commit -qm 'agent commit' || true")),
		fakeopenai.FinalStep("planted"))
	if r := e.cmd(th, alice, "/diff"); !strings.Contains(r, "`README.md` modified") || !strings.Contains(r, "`.gitattributes` added") {
		t.Fatalf("/diff replied %q", r)
	}
	if r := e.cmd(th, alice, "/pr"); !strings.Contains(r, "Opened pull request") {
		t.Fatalf("/pr replied %q", r)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a command the agent planted in .git ran on the worker")
	}
	branch := e.gh.PRs("acme/widgets")[0].Head
	if log := e.git.Log(t, "acme/widgets", branch); len(log) != 2 || strings.Contains(log[0], "agent commit") {
		t.Fatalf("the pushed branch has %q: the agent's own commits must not be pushed", log)
	}
	if got := e.git.Show(t, "acme/widgets", branch, "README.md"); got != "# widgets\nchanged\n" {
		t.Fatalf("README.md on the branch = %q", got)
	}
}

// With a GitHub App instead of a token the worker signs a JWT, mints an
// installation token, and clones and pushes with it; neither the key nor a
// token shows up anywhere a session's data lands.
func TestRepoLoopWithAGitHubApp(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	opt, git, gh := repoFakesWith(t, fakegit.Options{}, fakegithub.Options{AppID: "4242", AppKey: &key.PublicKey, InstallationID: 77})
	e := &repoEnv{git: git, gh: gh}
	e.threadEnv = newThreadEnv(t, false, opt, func(c *config.Config) {
		c.Repos.Token = ""
		c.Repos.AppID, c.Repos.InstallationID, c.Repos.AppKeyFile = "4242", 77, keyFile
	})
	e.rp = &repoPoster{threadPoster: e.p}
	th := e.thread("repo-app")
	e.turn(th, 1, "acme/widgets: edit", fakeopenai.ToolCallStep("a1", "shell", shell("echo app >> README.md")), fakeopenai.FinalStep("edited"))
	if info := e.info(th); info.Repo == nil {
		t.Fatalf("the clone with an installation token failed: %s", dump(e.state(th)))
	}
	if r := e.cmd(th, alice, "/pr"); !strings.Contains(r, "Opened pull request [#1]") {
		t.Fatalf("/pr replied %q", r)
	}
	minted := 0
	for _, c := range gh.Calls() {
		if strings.HasPrefix(c, "POST /app/installations/77/access_tokens") && strings.HasSuffix(c, "201") {
			minted++
		}
	}
	if minted == 0 {
		t.Fatalf("no installation token was minted: %q", gh.Calls())
	}
	if got := git.Show(t, "acme/widgets", gh.PRs("acme/widgets")[0].Head, "README.md"); got != "# widgets\napp\n" {
		t.Fatalf("README.md on the branch = %q", got)
	}
	if l := logText(t); strings.Contains(l, "PRIVATE KEY") || strings.Contains(l, "ghs_") {
		t.Fatal("the logs hold the App's key or an installation token")
	}
	if h := dump(e.history(th)); strings.Contains(h, "ghs_") {
		t.Fatal("the transcript holds an installation token")
	}
}
