package docker_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/docker"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// BenchmarkExecOverhead measures the cost of one trivial command in the
// same container through the Backend (exec create + attach + inspect, and
// the wrapper that makes commands killable) and through the docker CLI,
// so the two can be reported side by side:
//
//	go test ./sandbox/docker/ -run '^$' -bench ExecOverhead
func BenchmarkExecOverhead(b *testing.B) {
	be := newBackend(b, docker.Options{})
	h := sandboxtest.NewSandbox(b, be)
	ctx := context.Background()
	b.Run("backend", func(b *testing.B) {
		for b.Loop() {
			res, err := be.Exec(ctx, h, sandbox.Cmd{Command: "true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("Exec: %+v, %v", res, err)
			}
		}
	})
	cli, err := exec.LookPath("docker")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"cli", []string{"exec", h.ID, "true"}},
		{"cli-sh", []string{"exec", h.ID, "/bin/sh", "-c", "true"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if err != nil {
				b.Skipf("no docker CLI to compare with: %v", err)
			}
			for b.Loop() {
				if out, err := exec.CommandContext(ctx, cli, tc.args...).CombinedOutput(); err != nil {
					b.Fatalf("docker %v: %v: %s", tc.args, err, out)
				}
			}
		})
	}
}
