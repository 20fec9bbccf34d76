package repo

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/sandbot/sandbot/repo/github"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/blobstore"
	"github.com/sandbot/sandbot/session"
)

// recorder is a server that only records what reached it.
type recorder struct {
	mu    sync.Mutex
	auths []string
	hits  int
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.hits++
	r.auths = append(r.auths, req.Header.Get("Authorization"))
	r.mu.Unlock()
	http.NotFound(w, req)
}

func testActivities(t *testing.T, gitURL string, allow ...string) *Activities {
	t.Helper()
	store, err := blobstore.Open(context.Background(), "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return &Activities{
		Store: store, Config: Config{Allow: allow, GitURL: gitURL, Depth: 1, Author: "sandbot <bot@example.com>"},
		Tokens: github.StaticToken(testToken), TempDir: t.TempDir(),
	}
}

func appErrType(err error) string {
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Type()
	}
	return ""
}

// The worker's token goes to its own git host only: a repository a user
// names on any other server (even one the allowlist lets through) is
// refused before anything is sent there.
func TestCloneNeverSendsTheTokenToAnotherHost(t *testing.T) {
	own := newGitServer(t, t.TempDir(), testToken)
	other := &recorder{}
	evil := httptest.NewServer(other)
	t.Cleanup(evil.Close)
	a := testActivities(t, own.URL, "*")
	_, err := a.Clone(context.Background(), CloneRequest{SessionID: "s", Repo: session.RepoSpec{URL: evil.URL + "/acme/widgets.git"}, Key: sandbox.RepoBaseKey("s")})
	if appErrType(err) != ErrTypeNotAllowed || !strings.Contains(err.Error(), "https only") {
		t.Fatalf("a clone from another host over http: %v", err)
	}
	if other.hits != 0 {
		t.Fatalf("the other host got %d requests (authorization %q)", other.hits, other.auths)
	}
	// Another host over https is cloned anonymously, never with the token.
	if auth, err := a.auth(context.Background(), "https://evil.example/acme/widgets.git"); err != nil || auth.header != "" {
		t.Fatalf("credentials for another host: %v %v", auth, err)
	}
	if auth, err := a.auth(context.Background(), own.URL+"/acme/widgets.git"); err != nil || auth.header == "" {
		t.Fatalf("no credentials for the worker's own host: %v", err)
	}
}

// The worker enforces the allowlist itself: a request that never passed
// the bot's check (a forged or old bot) clones nothing off the list.
func TestCloneRefusesRepositoriesOffTheAllowlist(t *testing.T) {
	hits := &recorder{}
	srv := httptest.NewServer(hits)
	t.Cleanup(srv.Close)
	a := testActivities(t, srv.URL, "acme/*")
	_, err := a.Clone(context.Background(), CloneRequest{SessionID: "s", Repo: session.RepoSpec{URL: srv.URL + "/other/secret.git"}, Key: sandbox.RepoBaseKey("s")})
	if appErrType(err) != ErrTypeNotAllowed || !strings.Contains(err.Error(), "other/secret is not on this deployment's repository allowlist (allowed: acme/*)") {
		t.Fatalf("clone off the allowlist: %v", err)
	}
	a.Config.Allow = nil
	_, err = a.Clone(context.Background(), CloneRequest{SessionID: "s", Repo: session.RepoSpec{URL: srv.URL + "/acme/widgets.git"}, Key: sandbox.RepoBaseKey("s")})
	if appErrType(err) != ErrTypeNotAllowed || !strings.Contains(err.Error(), "SANDBOT_REPOS_ALLOW is empty") {
		t.Fatalf("clone with an empty allowlist: %v", err)
	}
	if hits.hits != 0 {
		t.Fatalf("the git server got %d requests", hits.hits)
	}
}

// The clone's snapshot restores to the checkout, and a diff against it
// sees exactly what changed outside .git.
func TestCloneSnapshotAndDiff(t *testing.T) {
	root := t.TempDir()
	o := newOrigin(t, root, "acme/widgets.git")
	srv := newGitServer(t, root, testToken)
	a := testActivities(t, srv.URL, "acme/*")
	ctx := context.Background()
	res, err := a.Clone(ctx, CloneRequest{SessionID: "s", Repo: session.RepoSpec{URL: srv.URL + "/acme/widgets.git"}, Key: sandbox.RepoBaseKey("s")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Repo.Commit != o.main[2] || res.Repo.Branch != "main" || !res.Repo.Shallow || res.Repo.Name != "acme/widgets" {
		t.Fatalf("clone result %+v", res)
	}
	m, err := sandbox.LoadManifest(ctx, a.Store, res.Repo.Base)
	if err != nil {
		t.Fatal(err)
	}
	// Change the checkout as an agent would, including its .git.
	dir := t.TempDir()
	if err := sandbox.ExtractManifest(ctx, a.Store, m, dir, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".git", "config")); err != nil || strings.Contains(string(b), testToken) || strings.Contains(string(b), "extraheader") {
		t.Fatalf(".git/config of the stored clone: %q %v", b, err)
	}
	writeFiles(t, dir, map[string]string{"README.md": "hello\nworld\n", ".git/config": "[core]\n\tfsmonitor = touch " + filepath.Join(root, "pwned") + "\n"})
	if err := os.Remove(filepath.Join(dir, "src", "y.go")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sandbox.SnapshotDir(ctx, a.Store, dir, "sessions/s/turn-1.tar", 0); err != nil {
		t.Fatal(err)
	}
	d, err := a.Diff(ctx, DiffRequest{Repo: res.Repo, Current: "sessions/s/turn-1.tar"})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Files) != 2 || d.Files[0].Path != "README.md" || d.Files[0].Status != StatusModified || d.Files[1].Path != "src/y.go" || d.Files[1].Status != StatusDeleted {
		t.Fatalf("diff files %+v", d.Files)
	}
	if strings.Contains(d.Patch, ".git") || !strings.Contains(d.Patch, "+world") {
		t.Fatalf("patch %q", d.Patch)
	}
	if _, err := os.Stat(filepath.Join(root, "pwned")); err == nil {
		t.Fatal("the workspace's .git/config ran a command on the worker")
	}
}
