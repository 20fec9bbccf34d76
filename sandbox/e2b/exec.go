package e2b

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// Connect framing: every message is flag(1) | length(4, big-endian) |
// JSON. Flag 0x02 marks the end-of-stream message; 0x01 (compressed) is
// never asked for, so it is a protocol error.
const (
	flagEndStream  = 0x02
	flagCompressed = 0x01
	// maxEnvelope bounds one incoming message, so a broken stream cannot
	// make the worker allocate without limit. envd sends output in chunks
	// of tens of KiB.
	maxEnvelope = 16 << 20
)

// backstop is how much longer than the command's timeout envd's own
// deadline (Connect-Timeout-Ms) is. The client's timer decides TimedOut
// and kills the whole group; envd's deadline only catches a client that
// could not.
const backstop = 5 * time.Second

// helperTimeout bounds internal commands (mkdir, tar, rm, the kill).
const helperTimeout = 10 * time.Minute

// outputGrace is how long Exec keeps reading after a kill, for the
// stream's end event.
const outputGrace = 5 * time.Second

// envelope frames one message.
func envelope(v any) ([]byte, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 5, 5+len(payload))
	binary.BigEndian.PutUint32(out[1:], uint32(len(payload)))
	return append(out, payload...), nil
}

// processEvent is process.StartResponse in proto3 JSON. Bytes fields are
// base64, which encoding/json decodes into []byte.
type processEvent struct {
	Event struct {
		Start *struct {
			Pid int `json:"pid"`
		} `json:"start"`
		Data *struct {
			Stdout []byte `json:"stdout"`
			Stderr []byte `json:"stderr"`
		} `json:"data"`
		End       *endEvent `json:"end"`
		Keepalive *struct{} `json:"keepalive"`
	} `json:"event"`
}

// endEvent is a process's end. proto3 JSON leaves zero values out: no
// exitCode means 0.
type endEvent struct {
	ExitCode int    `json:"exitCode"`
	Exited   bool   `json:"exited"`
	Status   string `json:"status"`
	Error    string `json:"error"`
}

// code is the exit code as a shell would report it: 128+n for a process
// killed by signal n.
func (e *endEvent) code() int {
	if !e.Exited && e.ExitCode == -1 {
		switch strings.TrimPrefix(e.Status, "signal: ") {
		case "killed":
			return 128 + int(syscall.SIGKILL)
		case "terminated":
			return 128 + int(syscall.SIGTERM)
		case "interrupt":
			return 128 + int(syscall.SIGINT)
		}
	}
	return e.ExitCode
}

// connectError is an end-of-stream error.
type connectError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// streamOutcome is what reading a Start stream produced.
type streamOutcome struct {
	end    *endEvent
	endErr *connectError
	err    error // the stream broke
}

// readStream reads envelopes until the end-of-stream message, writing
// output to stdout and stderr as it arrives (so a flood costs what the
// writers keep, not what the command prints) and reporting the pid.
func readStream(body io.Reader, pid *atomic.Int64, stdout, stderr io.Writer) streamOutcome {
	var out streamOutcome
	var hdr [5]byte
	buf := make([]byte, 0, 64<<10)
	for {
		if _, err := io.ReadFull(body, hdr[:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			out.err = fmt.Errorf("read stream: %w", err)
			return out
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if hdr[0]&flagCompressed != 0 || n > maxEnvelope {
			out.err = fmt.Errorf("protocol error: envelope flags %#x, %d bytes", hdr[0], n)
			return out
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(body, buf); err != nil {
			out.err = fmt.Errorf("read stream: %w", err)
			return out
		}
		if hdr[0]&flagEndStream != 0 {
			var es struct {
				Error *connectError `json:"error"`
			}
			if err := json.Unmarshal(buf, &es); err != nil {
				out.err = fmt.Errorf("decode end of stream: %w", err)
			}
			out.endErr = es.Error
			return out
		}
		var ev processEvent
		if err := json.Unmarshal(buf, &ev); err != nil {
			out.err = fmt.Errorf("decode event: %w", err)
			return out
		}
		switch e := ev.Event; {
		case e.Start != nil:
			pid.Store(int64(e.Start.Pid))
		case e.Data != nil:
			_, _ = stdout.Write(e.Data.Stdout)
			_, _ = stderr.Write(e.Data.Stderr)
		case e.End != nil:
			out.end = e.End
		}
	}
}

// startProcess starts argv through envd's process.Process/Start and
// returns the response whose body is the event stream.
func (b *Backend) startProcess(ctx context.Context, op, id string, argv []string, env map[string]string, cwd string, deadline time.Duration) (*http.Response, error) {
	msg := map[string]any{
		"process": map[string]any{"cmd": argv[0], "args": argv[1:], "envs": env, "cwd": cwd},
		"stdin":   false,
	}
	frame, err := envelope(msg)
	if err != nil {
		return nil, fmt.Errorf("e2b: %s: %w", op, err)
	}
	header := http.Header{
		"Connect-Protocol-Version": {"1"},
		"Keepalive-Ping-Interval":  {"50"},
		"Connect-Timeout-Ms":       {strconv.FormatInt(deadline.Milliseconds(), 10)},
	}
	resp, _, err := b.sendEnvd(ctx, op, id, func(e *envd) *request {
		return &request{
			op: op, method: http.MethodPost, path: "/process.Process/Start", env: e,
			body:        func() (io.Reader, int64, error) { return bytes.NewReader(frame), int64(len(frame)), nil },
			contentType: "application/connect+json", header: header,
		}
	})
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/connect+json" {
		resp.Body.Close()
		return nil, fmt.Errorf("e2b: %s: envd answered %s, not a Connect stream", op, resp.Header.Get("Content-Type"))
	}
	return resp, nil
}

// commandEnv is what commands get on top of envd's own environment:
// nothing of the worker's.
func commandEnv(workdir string) map[string]string {
	return map[string]string{"HOME": workdir, "LANG": "C.UTF-8", "TERM": "dumb"}
}

// Exec runs c.Command with /bin/sh -c in the workspace. The exit code is
// the command's; a command killed by a timeout or a cancellation reports
// 137 (128+SIGKILL).
func (b *Backend) Exec(ctx context.Context, h sandbox.Handle, c sandbox.Cmd) (sandbox.Result, error) {
	id, err := b.sandboxID("exec", h)
	if err != nil {
		return sandbox.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return sandbox.Result{}, fmt.Errorf("e2b: exec: %w", err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = b.opts.DefaultTimeout
	}
	limit := c.OutputCap
	if limit <= 0 {
		limit = b.opts.DefaultOutputCap
	}
	workdir := b.workdir(h)
	pidfile := "/tmp/sandbot-exec-" + sandbox.RandomHex(8) + ".pid"
	argv := []string{"/bin/sh", "-c", sandbox.GroupWrapper, "sandbot-exec", pidfile, c.Command}

	// The stream outlives ctx: after a cancellation the kill and the
	// stream's end must still be read.
	streamCtx, cancelStream := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelStream()
	stopSetup := context.AfterFunc(ctx, cancelStream)
	start := time.Now()
	resp, err := b.startProcess(streamCtx, "exec", id, argv, commandEnv(workdir), workdir, timeout+backstop)
	if !stopSetup() {
		// ctx ended while starting: the command may be running already.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if resp != nil {
			resp.Body.Close()
		}
		b.killGroup(cctx, id, pidfile, 0)
		return sandbox.Result{}, fmt.Errorf("e2b: exec: %w", ctx.Err())
	}
	if err != nil {
		return sandbox.Result{}, err
	}
	defer resp.Body.Close()

	stdout, stderr := sandbox.NewOutputBuffer(limit), sandbox.NewOutputBuffer(limit)
	var pid atomic.Int64
	done := make(chan streamOutcome, 1)
	go func() { done <- readStream(resp.Body, &pid, stdout, stderr) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()

	var o streamOutcome
	var timedOut, finished bool
	var ctxErr error
	select {
	case o = <-done:
		finished = true
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	if finished && o.endErr != nil && o.endErr.Code == "deadline_exceeded" {
		// envd's backstop fired before our timer: it killed the wrapper
		// only, so the group still has to go.
		timedOut = true
	}
	if timedOut || ctxErr != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		b.killGroup(cctx, id, pidfile, int(pid.Load()))
		if !finished {
			grace := time.NewTimer(outputGrace)
			select {
			case o = <-done:
			case <-grace.C:
				b.log.Warn("e2b: the stream did not end after the kill; output after it is dropped", "sandbox", id)
				cancelStream()
				o = <-done
			}
			grace.Stop()
		}
	}
	res := sandbox.Result{TimedOut: timedOut, Duration: time.Since(start), ExitCode: -1}
	res.FillOutput(stdout, stderr)
	switch {
	case timedOut || ctxErr != nil:
		res.ExitCode = 128 + int(syscall.SIGKILL)
	case o.end != nil:
		res.ExitCode = o.end.code()
	}
	switch {
	case ctxErr != nil:
		return res, fmt.Errorf("e2b: exec: %w", ctxErr)
	case timedOut:
		return res, nil
	case o.err != nil:
		return res, b.brokenStream(ctx, "exec", id, o.err)
	case o.endErr != nil:
		return res, fmt.Errorf("e2b: exec: %s: %s", o.endErr.Code, o.endErr.Message)
	case o.end == nil:
		return res, errors.New("e2b: exec: the stream ended without the process's end")
	}
	return res, nil
}

// brokenStream explains a stream that broke: the sandbox may have gone
// (killed, or paused by its TTL) under the command.
func (b *Backend) brokenStream(ctx context.Context, op, id string, cause error) error {
	if _, err := b.get(ctx, op, id); errors.Is(err, sandbox.ErrNotFound) {
		return err
	}
	return &userError{msg: fmt.Sprintf("e2b: %s: lost the command's output stream: %v", op, cause), sentinel: sandbox.ErrUnavailable, cause: cause}
}

// killGroup kills a command's process group through a second command,
// then signals the wrapper itself (envd kills exactly one pid, so the
// wrapper alone would leave the group running). Failures are logged: the
// caller is already reporting why it killed.
func (b *Backend) killGroup(ctx context.Context, id, pidfile string, pid int) {
	code, out, err := b.helper(ctx, "exec: kill", id, []string{"/bin/sh", "-c", sandbox.GroupKill, "sandbot-kill", pidfile}, "/", nil)
	switch {
	case err != nil:
		b.log.Warn("e2b: cannot kill a command's process group", "sandbox", id, "error", err)
	case code == 3:
		b.log.Debug("e2b: the command never recorded its process group", "sandbox", id)
	case code != 0:
		b.log.Warn("e2b: killing a command's process group failed", "sandbox", id, "exit_code", code, "stderr", out)
	}
	if pid <= 0 {
		return
	}
	_, _, err = b.sendEnvd(ctx, "exec: signal", id, func(e *envd) *request {
		return &request{op: "exec: signal", method: http.MethodPost, path: "/process.Process/SendSignal", env: e,
			json: map[string]any{"process": map[string]any{"pid": pid}, "signal": "SIGNAL_SIGKILL"}}
	})
	if err != nil && !isStatus(err, http.StatusNotFound) { // not_found: it already ended
		b.log.Warn("e2b: cannot signal a command", "sandbox", id, "pid", pid, "error", err)
	}
}

// helper runs an internal command (not the user's) to completion in cwd
// and returns its exit code and the start of its stderr. stdout goes to
// w (discarded when nil).
func (b *Backend) helper(ctx context.Context, op, id string, argv []string, cwd string, w io.Writer) (int, string, error) {
	if w == nil {
		w = io.Discard
	}
	resp, err := b.startProcess(ctx, op, id, argv, map[string]string{"LANG": "C", "LC_ALL": "C"}, cwd, helperTimeout)
	if err != nil {
		return -1, "", err
	}
	defer resp.Body.Close()
	stderr := sandbox.NewOutputBuffer(4096)
	var pid atomic.Int64
	o := readStream(resp.Body, &pid, w, stderr)
	msg := strings.TrimSpace(stderr.Output().Text)
	switch {
	case o.err != nil:
		if ctx.Err() != nil {
			return -1, msg, fmt.Errorf("e2b: %s: %w", op, ctx.Err())
		}
		return -1, msg, b.brokenStream(ctx, op, id, o.err)
	case o.endErr != nil:
		return -1, msg, fmt.Errorf("e2b: %s: %s: %s", op, o.endErr.Code, o.endErr.Message)
	case o.end == nil:
		return -1, msg, fmt.Errorf("e2b: %s: the stream ended without the process's end", op)
	}
	return o.end.code(), msg, nil
}
