package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/sandbox"
)

// pidfilePrefix names the pid files of running commands in /dev/shm.
const pidfilePrefix = ".sandbot-exec-"

// reapScript kills the process group of every command whose pid file is
// still there, and prints the groups it killed.
const reapScript = `for f in /dev/shm/` + pidfilePrefix + `*.pid; do
	[ -s "$f" ] || continue
	p=$(cat "$f")
	kill -KILL -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
	rm -f "$f"
	echo "$p"
done
exit 0`

// reapLeftovers runs once per container in this process, before its first
// command: it kills whatever commands a previous worker process started
// and never saw end. A worker that dies mid-command cannot kill the
// command (the container, not the worker, is its parent), and nobody else
// would: it would run past its timeout, for as long as it likes. Within
// one process every command's pid file belongs to a live Exec, which kills
// its own group, so later Execs leave them alone.
func (b *Backend) reapLeftovers(ctx context.Context, id string) error {
	b.mu.Lock()
	if b.reaped == nil {
		b.reaped = map[string]*reap{}
	}
	r := b.reaped[id]
	if r == nil {
		r = &reap{}
		b.reaped[id] = r
	}
	b.mu.Unlock()
	r.once.Do(func() {
		var out strings.Builder
		_, r.err = b.run(ctx, "exec: reap leftovers", id, []string{"/bin/sh", "-c", reapScript}, &out, io.Discard)
		if groups := strings.Fields(out.String()); len(groups) > 0 {
			b.log.Warn("docker: killed commands a previous worker left running", "sandbox", id, "process_groups", strings.Join(groups, ","))
		}
	})
	if r.err != nil {
		// Try again on the next command rather than run beside them.
		b.mu.Lock()
		delete(b.reaped, id)
		b.mu.Unlock()
		return r.err
	}
	return nil
}

// outputGrace is how long Exec keeps reading after killing a command, for
// processes that escaped its group but still hold its output open.
const outputGrace = 2 * time.Second

// Exec runs c.Command with /bin/sh -c in the workspace as the sandbox
// user. The exit code is the command's; a command killed by a timeout or a
// cancellation reports 137 (128+SIGKILL), and -1 means the status could
// not be read.
func (b *Backend) Exec(ctx context.Context, h sandbox.Handle, c sandbox.Cmd) (sandbox.Result, error) {
	id, workdir, err := b.container(h)
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("docker: exec: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Result{}, fmt.Errorf("docker: exec: %w", err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = b.opts.DefaultTimeout
	}
	limit := c.OutputCap
	if limit <= 0 {
		limit = b.opts.DefaultOutputCap
	}
	if err := b.reapLeftovers(ctx, id); err != nil {
		return sandbox.Result{}, err
	}
	// /dev/shm is a tmpfs in every container: cheaper than the image's
	// file system, which may be a FUSE overlay.
	pidfile := "/dev/shm/" + pidfilePrefix + sandbox.RandomHex(8) + ".pid"
	execID, err := b.execCreate(ctx, "exec", id, client.ExecCreateOptions{
		Cmd:          []string{"/bin/sh", "-c", sandbox.GroupWrapper, "sandbot-exec", pidfile, c.Command},
		AttachStdout: true,
		AttachStderr: true,
		WorkingDir:   workdir,
		Env:          commandEnv(workdir),
	})
	if err != nil {
		return sandbox.Result{}, err
	}
	start := time.Now()
	att, err := b.cli.ExecAttach(ctx, execID, client.ExecAttachOptions{})
	if err != nil {
		if ctx.Err() != nil {
			// The daemon may have started the command before the
			// cancellation cut the attach short; it must not run on.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			if kerr := b.killExec(cctx, id, execID, pidfile); kerr != nil {
				b.log.Debug("docker: kill after a canceled attach", "sandbox", id, "error", kerr)
			}
		}
		return sandbox.Result{}, b.classify("exec: attach", err)
	}
	defer att.Close()

	stdout, stderr := sandbox.NewOutputBuffer(limit), sandbox.NewOutputBuffer(limit)
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, att.Reader)
		copied <- err
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	var timedOut bool
	var ctxErr, copyErr error
	select {
	case copyErr = <-copied:
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	// After a timeout or cancellation the caller's context may be done;
	// killing and collecting the status must still happen.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if timedOut || ctxErr != nil {
		if err := b.killExec(cctx, id, execID, pidfile); err != nil {
			b.log.Warn("docker: cannot kill command", "sandbox", id, "error", err)
		}
		grace := time.NewTimer(outputGrace)
		select {
		case <-copied:
		case <-grace.C:
			b.log.Warn("docker: a process outside the command's group holds its output open; output after the kill is dropped", "sandbox", id)
			att.Close()
			<-copied
		}
		grace.Stop()
	}
	duration := time.Since(start)

	res := sandbox.Result{TimedOut: timedOut, Duration: duration, ExitCode: -1}
	res.FillOutput(stdout, stderr)

	code, inspectErr := b.exitCode(cctx, execID)
	if inspectErr == nil {
		res.ExitCode = code
	}
	switch {
	case ctxErr != nil:
		return res, fmt.Errorf("docker: exec: %w", ctxErr)
	case copyErr != nil:
		return res, outcomeLost("read output", copyErr)
	case inspectErr != nil && !timedOut:
		return res, outcomeLost("exit status", inspectErr)
	}
	return res, nil
}

// outcomeLost is the error of a command that was started (its attach, which
// starts it, succeeded) but whose end Exec could not see: the daemon went
// away while it ran, or came back without the exec (a restarted daemon
// forgets every exec). The command may have run to its end, so the error
// must not say that nothing ran: it wraps neither sandbox.ErrNotFound nor
// sandbox.ErrUnavailable (the container is gone, the daemon unreachable),
// after which the session restores the sandbox and runs the call again,
// which would run this command a second time.
func outcomeLost(op string, err error) error {
	return &userError{
		msg:      fmt.Sprintf("docker: exec: the command was started, but the Docker daemon went away before it was known to finish (%s: %v); it was not run again, and it may have run", op, err),
		sentinel: sandbox.ErrOutcomeUnknown,
		cause:    err,
	}
}

// commandEnv is what commands get on top of the image's environment:
// nothing of the worker's.
func commandEnv(workdir string) []string {
	return []string{"HOME=" + workdir, "LANG=C.UTF-8", "TERM=dumb"}
}

// execCreate creates an exec, starting a stopped (suspended) container
// first if needed.
func (b *Backend) execCreate(ctx context.Context, op, id string, opts client.ExecCreateOptions) (string, error) {
	created, err := b.cli.ExecCreate(ctx, id, opts)
	if cerrdefs.IsConflict(err) {
		// "container is not running" or "is paused".
		if rerr := b.ensureRunning(ctx, op, id); rerr != nil {
			return "", rerr
		}
		created, err = b.cli.ExecCreate(ctx, id, opts)
	}
	if err != nil {
		return "", b.classify(op, err)
	}
	return created.ID, nil
}

// killExec kills the process group of a running command. Docker cannot
// kill an exec, so this is a second exec that reads the group from the
// command's pid file.
func (b *Backend) killExec(ctx context.Context, id, execID, pidfile string) error {
	info, err := b.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
	if err == nil && !info.Running && info.PID != 0 {
		return nil // it has already finished
	}
	code, err := b.run(ctx, "exec: kill", id, []string{"/bin/sh", "-c", sandbox.GroupKill, "sandbot-kill", pidfile}, io.Discard, io.Discard)
	if err != nil {
		return err
	}
	if code == 3 {
		return errors.New("the command never recorded its process group")
	}
	return nil
}

// exitCode waits until the exec has ended and returns its exit code. The
// output stream can end a moment before the daemon records the exit.
func (b *Backend) exitCode(ctx context.Context, execID string) (int, error) {
	delay := time.Millisecond
	for {
		info, err := b.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return -1, err
		}
		if !info.Running {
			return info.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("exec still running: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

// run executes an internal helper command (not the user's) to completion
// and returns its exit code. Cancelling ctx stops reading; helpers are
// short and need no kill.
func (b *Backend) run(ctx context.Context, op, id string, cmd []string, stdout, stderr io.Writer) (int, error) {
	execID, err := b.execCreate(ctx, op, id, client.ExecCreateOptions{
		Cmd:          cmd,
		AttachStdout: true,
		AttachStderr: true,
		Env:          []string{"LANG=C", "LC_ALL=C"},
	})
	if err != nil {
		return -1, err
	}
	att, err := b.cli.ExecAttach(ctx, execID, client.ExecAttachOptions{})
	if err != nil {
		return -1, b.classify(op, err)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	if _, err := stdcopy.StdCopy(stdout, stderr, att.Reader); err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("docker: %s: %w", op, ctx.Err())
		}
		return -1, b.classify(op, err)
	}
	code, err := b.exitCode(ctx, execID)
	if err != nil {
		return -1, b.classify(op, err)
	}
	return code, nil
}
