package docker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/internal/testimage"
	"github.com/sandbot/sandbot/sandbox"
)

// restartingDaemon is a client on a real daemon that restarts (as far as
// Exec can tell) while a user's command runs: the command runs to its end,
// and then the daemon answers for its exec as a restarted daemon does,
// which has forgotten every exec (not found), or not at all (unreachable).
type restartingDaemon struct {
	*client.Client
	inspectErr error

	mu   sync.Mutex
	user map[string]bool // exec IDs of user commands
}

func (d *restartingDaemon) ExecCreate(ctx context.Context, id string, opts client.ExecCreateOptions) (client.ExecCreateResult, error) {
	res, err := d.Client.ExecCreate(ctx, id, opts)
	if err == nil && slices.Contains(opts.Cmd, "sandbot-exec") {
		d.mu.Lock()
		d.user[res.ID] = true
		d.mu.Unlock()
	}
	return res, err
}

func (d *restartingDaemon) ExecInspect(ctx context.Context, execID string, opts client.ExecInspectOptions) (client.ExecInspectResult, error) {
	d.mu.Lock()
	user := d.user[execID]
	d.mu.Unlock()
	if user {
		return client.ExecInspectResult{}, d.inspectErr
	}
	return d.Client.ExecInspect(ctx, execID, opts)
}

// A command whose end Exec could not see (the daemon restarted while it
// ran) may have run: its error must not say that nothing ran. Before the
// fix Exec classified the lost exec as sandbox.ErrNotFound (a restarted
// daemon no longer knows the exec) or sandbox.ErrUnavailable (the daemon
// still down), which the Exec activity reports as "nothing ran", and the
// session then restored the sandbox and ran the call again: the chaos
// suite's Docker daemon fault would find the command's marker written
// twice.
func TestExecWhoseEndWasLostMayHaveRun(t *testing.T) {
	cli, image := testimage.Require(t)
	ctx := context.Background()
	for name, inspectErr := range map[string]error{
		"restarted (exec forgotten)": cerrdefs.ErrNotFound.WithMessage("No such exec instance"),
		"still down":                 &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED},
	} {
		t.Run(name, func(t *testing.T) {
			d := &restartingDaemon{Client: cli, inspectErr: inspectErr, user: map[string]bool{}}
			b, err := New(d, Options{Image: image, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			h, err := b.Create(ctx, sandbox.Spec{SessionID: "lost-exec-" + sandbox.RandomHex(4)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Destroy(context.Background(), h) })
			res, err := b.Exec(ctx, h, sandbox.Cmd{Command: "echo ran >> marker; echo done"})
			if err == nil {
				t.Fatalf("Exec succeeded without the command's exit status: %+v", res)
			}
			if errors.Is(err, sandbox.ErrNotFound) || errors.Is(err, sandbox.ErrUnavailable) {
				t.Fatalf("a command that ran failed as if nothing ran (the session would run it again): %v", err)
			}
			if !strings.Contains(err.Error(), "may have run") {
				t.Errorf("the error does not say the command may have run: %v", err)
			}
			if !errors.Is(err, sandbox.ErrOutcomeUnknown) {
				t.Errorf("the error is not sandbox.ErrOutcomeUnknown, so the session would report the command as not run: %v", err)
			}
			if !strings.Contains(res.Stdout, "done") {
				t.Errorf("the output read before the loss is dropped: %+v", res)
			}
		})
	}
}
