package testimage

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

var (
	requireOnce  sync.Once
	requireCli   *client.Client
	requireImage string
	requireSkip  string // why there is no daemon
	requireErr   error  // a daemon answered but the setup failed
)

// Require returns a client for the Docker daemon and the local test image,
// built once per test binary. Without a daemon it skips the test, except
// under CI=true, where it fails: CI must run the Docker tests (.ci/docker.sh
// starts a daemon).
func Require(t testing.TB) (*client.Client, string) {
	t.Helper()
	requireOnce.Do(func() {
		cli, err := client.New(client.FromEnv)
		if err != nil {
			requireErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
		_, err = cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
		pcancel()
		if err != nil {
			requireSkip = fmt.Sprintf("no Docker daemon answers at %s: %v", cli.DaemonHost(), err)
			return
		}
		requireCli = cli
		requireImage, requireErr = Ensure(ctx, cli)
	})
	if requireSkip != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: the Docker tests must run; .ci/docker.sh starts a daemon)", requireSkip)
		}
		t.Skipf("%s; skipping the Docker tests (with CI=true they fail instead; .ci/docker.sh starts a daemon)", requireSkip)
	}
	if requireErr != nil {
		t.Fatalf("docker test setup: %v", requireErr)
	}
	return requireCli, requireImage
}
