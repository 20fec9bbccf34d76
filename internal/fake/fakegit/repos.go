package fakegit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"
)

// committer signs the commits the helpers make, so they are told apart
// from the commits a client pushes.
const committer = "fakegit <fakegit@example.invalid>"

// CreateRepo creates the bare repository repo ("owner/name") with one
// commit on branch holding files (path → content; paths may contain '/'),
// HEAD pointing at branch, and returns that commit. It fails the test if
// the repository exists already.
func (s *Server) CreateRepo(tb testing.TB, repo, branch string, files map[string]string) (commit string) {
	tb.Helper()
	dir, err := s.repoDir(repo)
	if err != nil {
		tb.Fatalf("fakegit: CreateRepo: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		tb.Fatalf("fakegit: CreateRepo: %s exists already", repo)
	}
	if _, err := s.run(nil, "", "check-ref-format", "--branch", branch); err != nil {
		tb.Fatalf("fakegit: CreateRepo: branch %q: %v", branch, err)
	}
	if _, err := s.run(nil, "", "init", "--quiet", "--bare", "--initial-branch="+branch, dir); err != nil {
		tb.Fatalf("fakegit: CreateRepo %s: %v", repo, err)
	}
	// Also in the repository's own config (the server's environment sets
	// it too), so the rule holds for whatever reaches the repository.
	if _, err := s.run(nil, dir, "config", "receive.denyNonFastForwards", "true"); err != nil {
		tb.Fatalf("fakegit: CreateRepo %s: %v", repo, err)
	}
	return s.commit(tb, dir, branch, "", files, "Initial commit")
}

// Commit adds a commit with message on branch of repo, writing files on
// top of the branch's tree, and returns it. An absent branch is created
// from the default branch (HEAD). It bypasses the server's push rules,
// so a test can make a branch move or diverge under a client.
func (s *Server) Commit(tb testing.TB, repo, branch string, files map[string]string, message string) (commit string) {
	tb.Helper()
	dir, err := s.repoDir(repo)
	if err != nil || !s.exists(repo) {
		tb.Fatalf("fakegit: Commit: no repository %q", repo)
	}
	parent, ok := s.Branch(repo, branch)
	if !ok {
		out, err := s.run(nil, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
		if err != nil {
			tb.Fatalf("fakegit: Commit: %s has no default branch to start %s from: %v", repo, branch, err)
		}
		parent = strings.TrimSpace(string(out))
	}
	return s.commit(tb, dir, branch, parent, files, message)
}

// commit writes one commit with git fast-import: one process, exact
// bytes, no work tree or index to clean up.
func (s *Server) commit(tb testing.TB, dir, branch, parent string, files map[string]string, message string) string {
	tb.Helper()
	stream, err := fastImport(branch, parent, message, files, time.Now())
	if err != nil {
		tb.Fatalf("fakegit: commit: %v", err)
	}
	if _, err := s.run(stream, dir, "fast-import", "--quiet", "--done"); err != nil {
		tb.Fatalf("fakegit: commit on %s: %v", branch, err)
	}
	out, err := s.run(nil, dir, "rev-parse", "--verify", "refs/heads/"+branch)
	if err != nil {
		tb.Fatalf("fakegit: commit on %s: %v", branch, err)
	}
	return strings.TrimSpace(string(out))
}

// fastImport builds the fast-import stream of one commit on branch, child
// of parent ("" for a root commit).
func fastImport(branch, parent, message string, files map[string]string, when time.Time) ([]byte, error) {
	var b bytes.Buffer
	data := func(s string) {
		fmt.Fprintf(&b, "data %d\n%s\n", len(s), s)
	}
	fmt.Fprintf(&b, "commit refs/heads/%s\n", branch)
	fmt.Fprintf(&b, "committer %s %d +0000\n", committer, when.Unix())
	if !strings.HasSuffix(message, "\n") {
		message += "\n"
	}
	data(message)
	if parent != "" {
		fmt.Fprintf(&b, "from %s\n", parent)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "" || path.Clean(name) != name || strings.HasPrefix(name, "/") ||
			name == ".." || strings.HasPrefix(name, "../") ||
			strings.ContainsAny(name, "\n\x00") || strings.HasPrefix(name, `"`) {
			return nil, fmt.Errorf("file path %q is not a clean relative path", name)
		}
		fmt.Fprintf(&b, "M 100644 inline %s\n", name)
		data(files[name])
	}
	b.WriteString("\ndone\n")
	return b.Bytes(), nil
}

// Branch returns the tip of refs/heads/branch in repo, if both exist.
func (s *Server) Branch(repo, branch string) (commit string, ok bool) {
	dir, err := s.repoDir(repo)
	if err != nil || !s.exists(repo) || branch == "" {
		return "", false
	}
	out, err := s.run(nil, dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}")
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

// Show returns the content of path at rev (as git show rev:path would),
// failing the test if either is missing.
func (s *Server) Show(tb testing.TB, repo, rev, path string) string {
	tb.Helper()
	dir := s.mustDir(tb, repo)
	if strings.HasPrefix(rev, "-") {
		tb.Fatalf("fakegit: Show: bad revision %q", rev)
	}
	out, err := s.run(nil, dir, "cat-file", "blob", rev+":"+path)
	if err != nil {
		tb.Fatalf("fakegit: Show %s %s:%s: %v", repo, rev, path, err)
	}
	return string(out)
}

// Log returns the full messages of the commits reachable from rev, newest
// first, without their trailing newlines.
func (s *Server) Log(tb testing.TB, repo, rev string) []string {
	tb.Helper()
	dir := s.mustDir(tb, repo)
	if strings.HasPrefix(rev, "-") {
		tb.Fatalf("fakegit: Log: bad revision %q", rev)
	}
	out, err := s.run(nil, dir, "log", "-z", "--format=%B", rev, "--")
	if err != nil {
		tb.Fatalf("fakegit: Log %s %s: %v", repo, rev, err)
	}
	var msgs []string
	for _, m := range strings.Split(strings.TrimRight(string(out), "\x00\n"), "\x00") {
		msgs = append(msgs, strings.TrimRight(m, "\n"))
	}
	return msgs
}

func (s *Server) mustDir(tb testing.TB, repo string) string {
	tb.Helper()
	dir, err := s.repoDir(repo)
	if err != nil || !s.exists(repo) {
		tb.Fatalf("fakegit: no repository %q", repo)
	}
	return dir
}

// run runs git in the isolated environment, against gitDir if not "",
// and returns its stdout; the error carries its stderr.
func (s *Server) run(stdin []byte, gitDir string, args ...string) ([]byte, error) {
	sub := args[0]
	if gitDir != "" {
		args = append([]string{"--git-dir=" + gitDir}, args...)
	}
	cmd := exec.Command(s.git, args...)
	cmd.Env = s.baseEnv
	cmd.Dir = s.root
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", sub, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
