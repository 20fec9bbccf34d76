package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// wrapper runs an unconfined command ($1) under a watcher that kills the
// whole process group once the worker closes its end of fd 3 (the read
// end of the command's worker pipe). The worker closes it when the command
// is over, and the kernel closes it when the worker dies, so a command
// tree never outlives a crashed worker (Pdeathsig alone only reaches the
// direct child). The watcher's output goes to /dev/null so it never holds
// the command's pipes open; the command does not inherit fd 3. The wrapper
// execs the command's shell, so a command costs two processes, not three.
const wrapper = `(read x <&3; kill -s KILL 0) </dev/null >/dev/null 2>&1 &
exec /bin/sh -c "$1" 3<&-`

// workerAlive starts a confined command's shell, before the limits: fd 3
// is the write end of the command's worker pipe, whose read end only the
// worker holds, so writing to it fails (SIGPIPE or EPIPE) once the worker
// is gone. Confined commands need no watcher: bwrap --die-with-parent
// kills the PID namespace when the worker dies, but only from when bwrap's
// pid 1 is set up; a worker dying while bwrap still builds the sandbox
// would leave the command to run on, orphaned and without a timeout. By
// the time this shell runs, that window is closed, and this write tells
// whether the worker died in it.
const workerAlive = `echo >&3 2>/dev/null || exit 125; exec 3>&-; `

// Exec runs c.Command with /bin/sh -c in the workspace root, confined
// (see Options.Unconfined) in its own namespaces: once the command's shell
// exits, its PID namespace dies and takes every process of the command
// along, setsid'd ones included.
//
// The exit code is the command's; a command killed by a signal reports
// 128+signal (137 for the SIGKILL of a timeout or cancellation), as a shell
// would, and -1 means the status could not be read.
func (b *Backend) Exec(ctx context.Context, h sandbox.Handle, c sandbox.Cmd) (sandbox.Result, error) {
	ws, tmp, err := b.workspace(h)
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("local: exec: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Result{}, fmt.Errorf("local: exec: %w", err)
	}
	if b.conf == nil {
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			return sandbox.Result{}, fmt.Errorf("local: exec: temp dir: %w", err)
		}
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = b.opts.DefaultTimeout
	}
	limit := c.OutputCap
	if limit <= 0 {
		limit = b.opts.DefaultOutputCap
	}

	p, err := newPipes(b.conf != nil)
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("local: exec: %w", err)
	}
	defer p.closeAll()

	var cmd *exec.Cmd
	var cg string // the command's pids cgroup, if any
	if b.conf == nil {
		cmd = exec.Command(b.shell, "-c", rlimitScript(b.opts, false)+wrapper, "sandbot-sh", c.Command)
		cmd.Env = b.commandEnv(ws, tmp)
	} else {
		cmd = exec.Command(b.conf.bwrap, b.conf.command(ws, c.Command)...)
		cmd.Env = b.commandEnv(ws, "/tmp")
		if b.conf.pidsBase != "" {
			if cg, err = b.conf.pidsCgroup(b.opts.MaxProcesses); err != nil {
				return sandbox.Result{}, fmt.Errorf("local: exec: pids cgroup: %w", err)
			}
			// Removed in the background: the kernel may report the
			// cgroup busy for a moment after its last process was reaped,
			// and the command's result need not wait for that.
			defer func() {
				go func() {
					if err := removeCgroup(cg); err != nil {
						b.log.Warn("local: cannot remove a command's pids cgroup", "cgroup", cg, "error", err)
					}
				}()
			}()
		}
	}
	cmd.Dir = ws
	cmd.Stdout, cmd.Stderr = p.outW, p.errW
	cmd.ExtraFiles = []*os.File{p.child}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	start := time.Now()
	if cg != "" {
		err = b.conf.startIn(cmd, cg)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("local: exec: start: %w", err)
	}
	pgid := cmd.Process.Pid
	p.closeChildEnds()

	stdout, stderr := sandbox.NewOutputBuffer(limit), sandbox.NewOutputBuffer(limit)
	var drained sync.WaitGroup
	drained.Add(2)
	go drain(&drained, stdout, p.outR)
	go drain(&drained, stderr, p.errR)

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	var timedOut bool
	var ctxErr error
	select {
	case <-waited:
	case <-timer.C:
		timedOut = true
		killGroup(pgid)
		<-waited
	case <-ctx.Done():
		ctxErr = ctx.Err()
		killGroup(pgid)
		<-waited
	}
	duration := time.Since(start)
	// Background jobs do not outlive the command that started them.
	killGroup(pgid)
	p.worker.Close() // unconfined: the watcher ends what is left

	drainDone := make(chan struct{})
	go func() { drained.Wait(); close(drainDone) }()
	grace := time.NewTimer(b.opts.OutputGrace)
	defer grace.Stop()
	select {
	case <-drainDone:
	case <-grace.C:
		// Something outside the group still holds the pipes; stop reading.
		b.log.Warn("local: a process outside the command's group holds its output open; output after the command ended is dropped",
			"sandbox", h.ID)
		p.outR.Close()
		p.errR.Close()
		<-drainDone
	}

	res := sandbox.Result{ExitCode: exitCode(cmd.ProcessState), TimedOut: timedOut, Duration: duration}
	res.FillOutput(stdout, stderr)
	if ctxErr != nil {
		return res, fmt.Errorf("local: exec: %w", ctxErr)
	}
	return res, nil
}

// commandEnv is the scrubbed environment: nothing from the worker.
func (b *Backend) commandEnv(ws, tmp string) []string {
	env := make([]string, 0, len(b.env)+3)
	env = append(env, b.env...)
	return append(env, "HOME="+ws, "TMPDIR="+tmp, markerVar+"="+ws)
}

func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
	return -1
}

// readerOnly hides an *os.File's WriterTo so io.CopyBuffer uses our buffer.
type readerOnly struct{ io.Reader }

func drain(wg *sync.WaitGroup, dst io.Writer, src *os.File) {
	defer wg.Done()
	buf := make([]byte, 64<<10)
	_, _ = io.CopyBuffer(dst, readerOnly{src}, buf)
}

// pipes are the command's stdout and stderr, and its worker pipe, which
// tells the command that the worker is gone (see wrapper and workerAlive):
// the command gets the write ends of stdout and stderr and child, the
// child's end of the worker pipe, as fd 3; the worker keeps the others.
// The worker's end closes when the worker dies.
type pipes struct {
	outR, outW, errR, errW *os.File
	child, worker          *os.File
}

// newPipes makes the pipes of a command; a confined command writes to its
// worker pipe, an unconfined one reads from it.
func newPipes(confined bool) (*pipes, error) {
	var p pipes
	var err error
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		p.closeAll()
		return nil, err
	}
	p.child, p.worker = r, w
	if confined {
		p.child, p.worker = w, r
	}
	return &p, nil
}

// closeChildEnds closes the worker's copies of the child's ends, so EOF
// arrives when the command's processes are gone.
func (p *pipes) closeChildEnds() {
	p.outW.Close()
	p.errW.Close()
	p.child.Close()
}

func (p *pipes) closeAll() {
	for _, f := range []*os.File{p.outR, p.outW, p.errR, p.errW, p.child, p.worker} {
		if f != nil {
			f.Close()
		}
	}
}
