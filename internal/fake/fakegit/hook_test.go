package fakegit

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runHook feeds one update line per branch to the hook written for
// patterns and returns the branches it refused and its exit status.
func runHook(t *testing.T, patterns []string, refs []string) (refused []string, exit int) {
	t.Helper()
	script, err := hookScript(patterns)
	if err != nil {
		t.Fatalf("hookScript(%q): %v", patterns, err)
	}
	file := filepath.Join(t.TempDir(), "pre-receive")
	if err := os.WriteFile(file, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for _, ref := range refs {
		in.WriteString("1111111111111111111111111111111111111111 2222222222222222222222222222222222222222 " + ref + "\n")
	}
	cmd := exec.Command(file)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	cmd.Dir = t.TempDir()
	cmd.Stdin = &in
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("run hook: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if ref, ok := strings.CutPrefix(line, "protected branch: "); ok {
			ref, ok = strings.CutSuffix(ref, " cannot be pushed to")
			if !ok {
				t.Fatalf("hook printed %q", line)
			}
			refused = append(refused, ref)
		} else if line != "" {
			t.Fatalf("hook printed %q", line)
		}
	}
	return refused, exit
}

// The hook must refuse exactly the branches path.Match matches, slashes
// and all, since that is the contract of Options.Protected.
func TestHookAgreesWithPathMatch(t *testing.T) {
	patterns := []string{
		"main", "release-*", "rel?ase", "feat/*", "*", "*/*", "v[0-9].x",
		"[^m]ain", `a\*b`, "it's", "x[a-c_]y", "[.]hidden",
	}
	branches := []string{
		"main", "mainline", "release-1", "release-", "release-1/x", "release",
		"relxase", "rel/ase", "feat/a", "feat/a/b", "feat", "v1.x", "va.x",
		"gain", "a*b", "ab", "axb", "it's", "x/y", "x/y/z", "xby", "x_y", "xdy",
		".hidden", "xhidden", "$(touch pwned)", "a;b",
	}
	var refs []string
	for _, b := range branches {
		refs = append(refs, "refs/heads/"+b)
	}
	for _, p := range patterns {
		var want []string
		for _, b := range branches {
			ok, err := path.Match(p, b)
			if err != nil {
				t.Fatalf("path.Match(%q): %v", p, err)
			}
			if ok {
				want = append(want, "refs/heads/"+b)
			}
		}
		got, exit := runHook(t, []string{p}, refs)
		if !slices.Equal(got, want) {
			t.Errorf("pattern %q refused %q, path.Match matches %q", p, got, want)
		}
		if wantExit := min(len(want), 1); exit != wantExit {
			t.Errorf("pattern %q: exit %d, want %d", p, exit, wantExit)
		}
	}
}

func TestHookIgnoresOtherRefsAndEmptyList(t *testing.T) {
	got, exit := runHook(t, []string{"main"}, []string{"refs/tags/main", "refs/notes/main", "refs/heads/dev"})
	if len(got) != 0 || exit != 0 {
		t.Errorf("refused %q (exit %d), want nothing", got, exit)
	}
	got, exit = runHook(t, nil, []string{"refs/heads/main"})
	if len(got) != 0 || exit != 0 {
		t.Errorf("no patterns: refused %q (exit %d)", got, exit)
	}
	got, exit = runHook(t, []string{"main", "dev"}, []string{"refs/heads/dev", "refs/heads/x", "refs/heads/main"})
	if !slices.Equal(got, []string{"refs/heads/dev", "refs/heads/main"}) || exit != 1 {
		t.Errorf("refused %q (exit %d), want dev and main", got, exit)
	}
}

func TestHookRejectsBadPatterns(t *testing.T) {
	for _, p := range []string{"", "[", "[a", "]", `a\`, "[/]", "[]", "[z-a]", "a\nb", "[!a]"} {
		if _, err := hookScript([]string{p}); err == nil {
			t.Errorf("hookScript(%q) accepted it", p)
		}
	}
}
