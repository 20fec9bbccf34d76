package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file builds the binaries the cluster runs: cmd/worker and cmd/bot
// of this tree, and cmd/worker of an older commit for the rolling upgrade.
// Each is built once per test binary, with the go command that runs the
// tests (the build cache makes a rebuild of an unchanged tree a link).

var builds struct {
	mu  sync.Mutex
	dir string
	m   map[string]*build
}

type build struct {
	done chan struct{}
	path string
	err  error
	took time.Duration
}

// binary returns the path of the binary key, building it with mk on
// first use; concurrent callers wait for the one build.
func binary(t testing.TB, key string, mk func(out string) error) string {
	t.Helper()
	builds.mu.Lock()
	if builds.m == nil {
		builds.m = map[string]*build{}
	}
	b := builds.m[key]
	if b == nil {
		b = &build{done: make(chan struct{})}
		builds.m[key] = b
		if builds.dir == "" {
			builds.dir, b.err = os.MkdirTemp("", "sandbot-cluster-bin-")
		}
		dir := builds.dir
		builds.mu.Unlock()
		if b.err == nil {
			start := time.Now()
			b.path = filepath.Join(dir, strings.NewReplacer("/", "-", "@", "-").Replace(key))
			b.err = mk(b.path)
			b.took = time.Since(start)
		}
		close(b.done)
		if b.err == nil {
			t.Logf("built %s in %s", key, b.took.Round(100*time.Millisecond))
		}
	} else {
		builds.mu.Unlock()
		<-b.done
	}
	if b.err != nil {
		t.Fatalf("build %s: %v", key, b.err)
	}
	return b.path
}

// removeBuilds deletes the built binaries (TestMain, at the end).
func removeBuilds() {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
}

// goCommand is the go command on PATH (go test runs with it there).
func goCommand() string { return "go" }

// repoRoot is the module root (this package is integration/cluster).
func repoRoot() (string, error) {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("module root: %w", err)
	}
	return dir, nil
}

func goBuild(dir, pkg, out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCommand(), "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", pkg, dir, err, b)
	}
	return nil
}

// currentBinary builds a command of this tree ("cmd/worker", "cmd/bot").
func currentBinary(t testing.TB, cmdDir string) string {
	t.Helper()
	return binary(t, cmdDir, func(out string) error {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		return goBuild(root, "./"+cmdDir, out)
	})
}
