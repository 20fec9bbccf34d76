package daytona

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// toolboxBase returns the toolbox base URL of a sandbox: remembered from a
// DTO, else from the handle, else read from the control plane (a fresh
// worker with an old handle).
func (b *Backend) toolboxBase(ctx context.Context, op string, h sandbox.Handle) (string, error) {
	b.mu.Lock()
	base := b.toolbox[h.ID]
	b.mu.Unlock()
	if base == "" {
		base = strings.TrimRight(h.Meta[metaToolbox], "/")
	}
	if base == "" {
		sb, err := b.get(ctx, op, h.ID)
		if err != nil {
			return "", err
		}
		base = strings.TrimRight(sb.ToolboxProxyURL, "/")
	}
	return base + "/" + h.ID, nil
}

// toolboxAttempts bounds how often a toolbox request is sent again after
// the control plane said the sandbox is (again) started.
const toolboxAttempts = 5

// tb sends a toolbox request (req.url is the path below the sandbox's
// toolbox base) and returns a 2xx response, or an error. Statuses in pass
// come back as an *apiError without further ado. Any other refusal is
// checked with the control plane, since the proxy's answer for a sandbox
// that is not running is not documented: a sandbox that is gone gives an
// error wrapping sandbox.ErrNotFound, a stopped one is started and the
// request sent again, and a started one whose toolbox answers 5xx is
// retried with backoff before the error wraps sandbox.ErrUnavailable.
func (b *Backend) tb(ctx context.Context, h sandbox.Handle, req request, pass ...int) (*http.Response, error) {
	if h.ID == "" {
		return nil, fmt.Errorf("daytona: %s: handle has no sandbox id", req.op)
	}
	req.toolbox = true
	path := req.url
	for attempt := 0; ; attempt++ {
		base, err := b.toolboxBase(ctx, req.op, h)
		if err != nil {
			return nil, err
		}
		req.url = base + path
		resp, err := b.send(ctx, req)
		var ae *apiError
		if err == nil || !errors.As(err, &ae) || slices.Contains(pass, ae.status) {
			return resp, err
		}
		if attempt+1 >= toolboxAttempts {
			if ae.status >= 500 {
				return nil, unavailable(req.op, ae.url, ae.status, ae.message)
			}
			return nil, err
		}
		sb, gerr := b.get(ctx, req.op, h.ID)
		if gerr != nil {
			return nil, gerr
		}
		switch {
		case gone(sb.State):
			return nil, notFound(req.op, sb)
		case sb.State == "started" && ae.status < 500:
			if attempt > 0 || (ae.status != http.StatusNotFound && ae.status != http.StatusConflict) {
				return nil, err // the toolbox's own answer, not the proxy's
			}
			// It may have started between the two answers: once more.
		case sb.State == "started" && req.once:
			// The toolbox may have started the command before failing.
			return nil, unavailable(req.op, ae.url, ae.status, ae.message)
		case sb.State == "started":
			if serr := b.opts.Sleep(ctx, b.backoff(attempt)); serr != nil {
				return nil, fmt.Errorf("daytona: %s: %w", req.op, serr)
			}
		default:
			b.log.Info("daytona: starting sandbox on demand", "sandbox", h.ID, "state", sb.State, "op", req.op)
			if _, err := b.ensureStarted(ctx, req.op+": start", h.ID); err != nil {
				return nil, err
			}
		}
	}
}

// tbCall is tb with a JSON answer decoded into out (when not nil).
func (b *Backend) tbCall(ctx context.Context, h sandbox.Handle, req request, out any, pass ...int) error {
	resp, err := b.tb(ctx, h, req, pass...)
	if err != nil {
		return err
	}
	return decodeInto(ctx, req.op, resp, out)
}

// execute runs a helper command (not the user's) with POST
// /process/execute and returns its exit code and merged output. The daemon
// feeds the command to a shell's stdin, so the script runs in its own
// /bin/sh with stdin from /dev/null; timeout is enforced by the daemon,
// whose 408 becomes an error.
func (b *Backend) sh(ctx context.Context, h sandbox.Handle, op string, timeout time.Duration, script string, args ...string) (int, string, error) {
	cmd := "/bin/sh -c " + sandbox.ShellQuote(script) + " sandbot"
	for _, a := range args {
		cmd += " " + sandbox.ShellQuote(a)
	}
	cmd += " </dev/null"
	secs := int((timeout + time.Second - 1) / time.Second)
	var out struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	req := request{op: op, method: http.MethodPost, url: "/process/execute", in: map[string]any{"command": cmd, "timeout": secs}}
	err := b.tbCall(ctx, h, req, &out, http.StatusRequestTimeout)
	if statusOf(err) == http.StatusRequestTimeout {
		return -1, "", fmt.Errorf("daytona: %s: timed out after %s", op, timeout)
	}
	if err != nil {
		return -1, "", err
	}
	return out.ExitCode, out.Result, nil
}
