package docker

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/internal/testimage"
	"github.com/sandbot/sandbot/sandbox"
)

// A worker killed mid-command leaves the command running in the container:
// the container is its parent, the worker's timer died with the worker. The
// next worker process to use the container kills it before running
// anything. Here the leftover is made exactly as a dead worker leaves it:
// the exec wrapper with its pid file, started and then abandoned.
func TestNextWorkerKillsWhatADeadWorkerLeftRunning(t *testing.T) {
	cli, image := testimage.Require(t)
	ctx := context.Background()
	newBackend := func() *Backend {
		b, err := New(cli, Options{Image: image, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dead := newBackend()
	h, err := dead.Create(ctx, sandbox.Spec{SessionID: "reap-test-" + sandbox.RandomHex(4)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dead.Destroy(context.Background(), h) })
	id, workdir, err := dead.container(h)
	if err != nil {
		t.Fatal(err)
	}
	// The dead worker's command: started, never waited for.
	pidfile := "/dev/shm/" + pidfilePrefix + "deadworker.pid"
	execID, err := dead.execCreate(ctx, "exec", id, client.ExecCreateOptions{
		Cmd: []string{"/bin/sh", "-c", sandbox.GroupWrapper, "sandbot-exec", pidfile, "sleep 1000"}, WorkingDir: workdir,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ExecStart(ctx, execID, client.ExecStartOptions{Detach: true}); err != nil {
		t.Fatal(err)
	}
	sleeping := func(b *Backend) bool {
		var out strings.Builder
		if _, err := b.run(ctx, "test: ps", id, []string{"/bin/sh", "-c", `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f" 2>/dev/null; echo; done`}, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out.String(), "sleep 1000")
	}
	deadline := time.Now().Add(30 * time.Second)
	for !sleeping(dead) {
		if time.Now().After(deadline) {
			t.Fatal("the leftover command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A new worker process takes the session over and runs a command.
	next := newBackend()
	res, err := next.Exec(ctx, h, sandbox.Cmd{Command: "echo hello", Timeout: time.Minute})
	if err != nil || res.ExitCode != 0 || res.Stdout != "hello\n" {
		t.Fatalf("the new worker's command: %+v, %v", res, err)
	}
	if sleeping(next) {
		t.Fatal("the dead worker's command is still running after the new worker's first command")
	}
	// It reaps once: a second command of its own does not kill the first.
	done := make(chan sandbox.Result, 1)
	go func() {
		r, _ := next.Exec(ctx, h, sandbox.Cmd{Command: "touch started; sleep 1; echo finished", Timeout: time.Minute})
		done <- r
	}()
	for {
		r, err := next.Exec(ctx, h, sandbox.Cmd{Command: "test -e started", Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if r.ExitCode == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := <-done; r.Stdout != "finished\n" {
		t.Fatalf("a concurrent command of the same worker was killed: %+v", r)
	}
}
