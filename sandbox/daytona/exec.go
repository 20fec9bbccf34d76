package daytona

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// killedExit is the exit code of a command killed by a timeout or a
// cancellation: 128+SIGKILL, as GroupWrapper reports it.
const killedExit = 137

// collectScript measures the output files $1 and $2 and, for each one
// longer than the head $3 plus the tail $4 the output cap keeps, writes
// those two parts next to it (.h, .t) for download. It prints the two
// sizes. When both are empty it removes them itself, sparing the
// common command without output one more call.
const collectScript = `n1=$(wc -c 2>/dev/null <"$1") || n1=0
n2=$(wc -c 2>/dev/null <"$2") || n2=0
n1=$((n1+0)); n2=$((n2+0))
for f in "$1:$n1" "$2:$n2"; do
	p=${f%:*}; n=${f##*:}
	if [ "$n" -gt $(($3+$4)) ]; then head -c "$3" "$p" >"$p.h"; tail -c "$4" "$p" >"$p.t"; fi
done
[ "$n1" -eq 0 ] && [ "$n2" -eq 0 ] && rm -f "$1" "$2"
echo "$n1 $n2"`

// Exec runs c.Command with /bin/sh -c in the workspace. The exit code is
// the command's; a command killed by a timeout or a cancellation reports
// 137 (128+SIGKILL). On cancellation Exec kills the command, then returns
// what it had printed with an error wrapping ctx.Err().
func (b *Backend) Exec(ctx context.Context, h sandbox.Handle, c sandbox.Cmd) (sandbox.Result, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.Result{}, fmt.Errorf("daytona: exec: %w", err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = b.opts.DefaultTimeout
	}
	limit := c.OutputCap
	if limit <= 0 {
		limit = b.opts.DefaultOutputCap
	}
	workdir := h.Workdir
	if workdir == "" {
		workdir = b.opts.Workdir
	}
	tmp := "/tmp/sandbot-" + sandbox.RandomHex(8)
	pidfile, outFile, errFile := tmp+".pid", tmp+".out", tmp+".err"
	sid := "sandbot-" + sandbox.RandomHex(8)

	req := request{op: "exec: create session", method: http.MethodPost, url: "/process/session", in: map[string]string{"sessionId": sid}}
	if err := b.tbCall(ctx, h, req, nil); err != nil {
		return sandbox.Result{}, err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	sessionOpen := true
	deleteSession := func() {
		if !sessionOpen {
			return
		}
		sessionOpen = false
		req := request{op: "exec: delete session", method: http.MethodDelete, url: "/process/session/" + url.PathEscape(sid)}
		if err := b.tbCall(cctx, h, req, nil, http.StatusNotFound); err != nil && statusOf(err) != http.StatusNotFound {
			b.log.Warn("daytona: cannot delete exec session", "sandbox", h.ID, "error", err)
		}
	}
	defer deleteSession()

	// The session shell sources what it is sent: run everything in a
	// shell of its own so that nothing (cd, exit) touches the session's.
	inner := "cd " + sandbox.ShellQuote(workdir) + " || exit 126\n" +
		"HOME=" + sandbox.ShellQuote(workdir) + " LANG=C.UTF-8 TERM=dumb exec /bin/sh -c " + sandbox.ShellQuote(sandbox.GroupWrapper) +
		" sandbot-exec " + sandbox.ShellQuote(pidfile) + " " + sandbox.ShellQuote(c.Command) +
		" >" + sandbox.ShellQuote(outFile) + " 2>" + sandbox.ShellQuote(errFile)
	var started struct {
		CmdID string `json:"cmdId"`
	}
	req = request{op: "exec: start", once: true, method: http.MethodPost, url: "/process/session/" + url.PathEscape(sid) + "/exec",
		in: map[string]any{"command": "/bin/sh -c " + sandbox.ShellQuote(inner) + " </dev/null", "runAsync": true}}
	if err := b.tbCall(ctx, h, req, &started); err != nil {
		if ctx.Err() != nil {
			// The daemon may have started the command before the
			// cancellation cut the request short; it must not run on.
			if kerr := b.kill(cctx, h, pidfile); kerr != nil {
				b.log.Debug("daytona: kill after a canceled start", "sandbox", h.ID, "error", kerr)
			}
		}
		return sandbox.Result{}, err
	}
	start := time.Now()
	code, waitErr := b.waitCommand(ctx, h, sid, started.CmdID, timeout)
	res := sandbox.Result{ExitCode: code}
	octx := ctx
	var ctxErr error
	switch {
	case waitErr == errTimedOut || ctx.Err() != nil:
		res.TimedOut = waitErr == errTimedOut
		ctxErr = ctx.Err()
		res.ExitCode = killedExit
		if err := b.kill(cctx, h, pidfile); err != nil {
			b.log.Warn("daytona: cannot kill command", "sandbox", h.ID, "error", err)
		}
		deleteSession()
		octx = cctx
	case waitErr != nil:
		return res, waitErr
	}
	res.Duration = time.Since(start)
	deleteSession()
	stdout, stderr := sandbox.NewOutputBuffer(limit), sandbox.NewOutputBuffer(limit)
	if err := b.collect(octx, h, outFile, errFile, limit, stdout, stderr); err != nil {
		if ctxErr == nil && !res.TimedOut {
			return res, err
		}
		b.log.Warn("daytona: cannot read a killed command's output", "sandbox", h.ID, "error", err)
	}
	res.FillOutput(stdout, stderr)
	if ctxErr != nil {
		return res, fmt.Errorf("daytona: exec: %w", ctxErr)
	}
	return res, nil
}

type timedOut struct{}

func (timedOut) Error() string { return "command timed out" }

var errTimedOut error = timedOut{}

// waitCommand polls the command's status until it has an exit code, the
// timeout passes (errTimedOut) or ctx ends. Polls start fast, for the many
// short commands, and slow down to MaxPollInterval.
func (b *Backend) waitCommand(ctx context.Context, h sandbox.Handle, sid, cmdID string, timeout time.Duration) (int, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	wait := 2 * time.Millisecond
	path := "/process/session/" + url.PathEscape(sid) + "/command/" + url.PathEscape(cmdID)
	for {
		var st struct {
			ExitCode *int `json:"exitCode"`
		}
		err := b.tbCall(ctx, h, request{op: "exec: status", method: http.MethodGet, url: path}, &st)
		if ctx.Err() != nil {
			return -1, ctx.Err()
		}
		if err != nil {
			return -1, err
		}
		if st.ExitCode != nil {
			return *st.ExitCode, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return -1, ctx.Err()
		case <-deadline.C:
			t.Stop()
			return -1, errTimedOut
		case <-t.C:
		}
		wait = min(wait*2, b.opts.MaxPollInterval)
	}
}

// kill kills the command's process group, recorded in its pid file, with
// a second call: the toolbox cannot signal a session command, and
// deleting the session kills only the session's own group, which the
// command has left.
func (b *Backend) kill(ctx context.Context, h sandbox.Handle, pidfile string) error {
	code, out, err := b.sh(ctx, h, "exec: kill", 20*time.Second, sandbox.GroupKill, pidfile)
	if err != nil {
		return err
	}
	if code == 3 {
		return fmt.Errorf("the command never recorded its process group")
	}
	if code != 0 {
		return fmt.Errorf("kill: exit status %d: %s", code, strings.TrimSpace(out))
	}
	return nil
}

// collect fetches what the output cap keeps of the two output files into
// stdout and stderr, then removes the files.
func (b *Backend) collect(ctx context.Context, h sandbox.Handle, outFile, errFile string, limit int, stdout, stderr *sandbox.OutputBuffer) error {
	head, tail := sandbox.HeadTail(limit)
	code, out, err := b.sh(ctx, h, "exec: collect output", time.Minute, collectScript, outFile, errFile, strconv.Itoa(head), strconv.Itoa(tail))
	if err != nil {
		return err
	}
	sizes := strings.Fields(out)
	if code != 0 || len(sizes) != 2 {
		return fmt.Errorf("daytona: exec: collect output: exit status %d: %s", code, strings.TrimSpace(out))
	}
	var n [2]int64
	for i := range n {
		// The sandbox's own tools print the sizes, and the agent may have
		// replaced them: a negative size would ask for an uncapped read.
		if n[i], err = strconv.ParseInt(sizes[i], 10, 64); err != nil || n[i] < 0 {
			return fmt.Errorf("daytona: exec: collect output: the sandbox reported sizes %q, not two byte counts", strings.TrimSpace(out))
		}
	}
	if n[0] == 0 && n[1] == 0 {
		return nil // the script removed the files
	}
	defer func() {
		if _, _, err := b.sh(ctx, h, "exec: remove output", time.Minute, `rm -f -- "$1" "$1.h" "$1.t" "$2" "$2.h" "$2.t"`, outFile, errFile); err != nil {
			b.log.Warn("daytona: cannot remove output files", "sandbox", h.ID, "error", err)
		}
	}()
	for i, f := range []struct {
		path string
		buf  *sandbox.OutputBuffer
	}{{outFile, stdout}, {errFile, stderr}} {
		switch size := n[i]; {
		case size == 0:
		case size <= int64(head+tail):
			if err := b.download(ctx, h, "exec: read output", f.path, f.buf, size); err != nil {
				return err
			}
		default:
			if err := b.download(ctx, h, "exec: read output", f.path+".h", f.buf, int64(head)); err != nil {
				return err
			}
			f.buf.Skip(size - int64(head+tail))
			if err := b.download(ctx, h, "exec: read output", f.path+".t", f.buf, int64(tail)); err != nil {
				return err
			}
		}
	}
	return nil
}

// download copies up to n bytes (all when n < 0) of a sandbox file to w.
func (b *Backend) download(ctx context.Context, h sandbox.Handle, op, path string, w io.Writer, n int64) error {
	resp, err := b.tb(ctx, h, request{op: op, method: http.MethodGet, url: "/files/download", query: url.Values{"path": {path}}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	if n >= 0 {
		r = io.LimitReader(r, n)
	}
	if _, err := io.Copy(w, r); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("daytona: %s: %w", op, ctx.Err())
		}
		return fmt.Errorf("daytona: %s: %w", op, err)
	}
	return nil
}
