package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// envdPort is envd's port inside every sandbox.
const envdPort = "49983"

// basicUser is the Authorization header naming the sandbox's Linux user.
func basicUser(user string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))
}

// request is one HTTP call to the control plane (env == nil) or to a
// sandbox's envd.
type request struct {
	op     string
	method string
	path   string
	query  url.Values
	// json is encoded as the body (Content-Type application/json).
	json any
	// body opens a raw body; it is called again for every retry.
	body        func() (io.Reader, int64, error)
	contentType string
	header      http.Header
	// env routes the call to a sandbox's envd.
	env *envd
	// conflictRetry waits out 409s (a state change in progress).
	conflictRetry bool
}

// apiError is a non-2xx answer the client did not retry (or gave up on).
type apiError struct {
	op      string
	status  int
	code    string // a Connect error code, when envd sent one
	message string
	// gone: the sandbox proxy answered "The sandbox was not found" (502):
	// the sandbox is paused, killed or unknown.
	gone bool
}

func (e *apiError) Error() string {
	return fmt.Sprintf("e2b: %s: %d %s", e.op, e.status, e.message)
}

// userError is an error whose message is for the person in the thread,
// while errors.Is still finds the sentinel and the cause.
type userError struct {
	msg      string
	sentinel error
	cause    error
}

func (e *userError) Error() string   { return e.msg }
func (e *userError) Unwrap() []error { return []error{e.sentinel, e.cause} }

func notFound(op, id string, cause error) error {
	return &userError{msg: fmt.Sprintf("e2b: %s: sandbox %s no longer exists", op, id), sentinel: sandbox.ErrNotFound, cause: cause}
}

// isStatus reports whether err is an API answer with that status.
func isStatus(err error, status int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.status == status
}

// decodeError reads a provider error body: the API's {"code":int,
// "message"}, the proxy's 502 {"sandboxId","message","code"}, or a
// Connect error {"code":"not_found","message"}.
func decodeError(op string, resp *http.Response) *apiError {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &apiError{op: op, status: resp.StatusCode}
	var body struct {
		Code      json.RawMessage `json:"code"`
		Message   string          `json:"message"`
		SandboxID string          `json:"sandboxId"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Message != "" {
		e.message = body.Message
		_ = json.Unmarshal(body.Code, &e.code)
	} else {
		e.message = strings.TrimSpace(string(raw))
		if e.message == "" {
			e.message = http.StatusText(resp.StatusCode)
		}
	}
	e.gone = resp.StatusCode == http.StatusBadGateway && strings.Contains(strings.ToLower(e.message), "sandbox was not found")
	return e
}

// sleep waits d or until ctx ends, through the injectable hook.
func (b *Backend) sleep(ctx context.Context, d time.Duration) error {
	if b.opts.Sleep != nil {
		return b.opts.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is the wait before retry number n (0-based).
func (b *Backend) backoff(n int) time.Duration {
	d := b.opts.MinBackoff << min(n, 16)
	return min(d, b.opts.MaxBackoff)
}

// retryAfter reads a Retry-After header (seconds or an HTTP date).
func retryAfter(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// Retry budgets: outages (connection errors, 502/503/504) are retried
// maxUnavailable times, 429s and 409s up to maxThrottled times; all
// waits end with ctx.
const (
	maxUnavailable = 4
	maxThrottled   = 30
)

// send performs r with auth headers and retries, and returns a 2xx
// response for the caller to read and close. Any other outcome is an
// error: ErrUnauthenticated for 401/403 from the control plane,
// ErrUnavailable for an outage that outlasted the retries, else an
// *apiError (a proxy 502 for a sandbox that is not running is returned at
// once, for the caller to look at the sandbox's state).
func (b *Backend) send(ctx context.Context, r *request) (*http.Response, error) {
	base := b.opts.APIURL
	if r.env != nil {
		base = r.env.base
	}
	u := base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var payload []byte
	if r.json != nil {
		var err error
		if payload, err = json.Marshal(r.json); err != nil {
			return nil, fmt.Errorf("e2b: %s: encode request: %w", r.op, err)
		}
	}
	unavailable, throttled := 0, 0
	for {
		req, err := http.NewRequestWithContext(ctx, r.method, u, nil)
		if err != nil {
			return nil, fmt.Errorf("e2b: %s: %w", r.op, err)
		}
		switch {
		case r.json != nil:
			req.Body = io.NopCloser(bytes.NewReader(payload))
			req.ContentLength = int64(len(payload))
			req.Header.Set("Content-Type", "application/json")
		case r.body != nil:
			body, n, err := r.body()
			if err != nil {
				return nil, fmt.Errorf("e2b: %s: %w", r.op, err)
			}
			req.Body, req.ContentLength = io.NopCloser(body), n
			req.Header.Set("Content-Type", r.contentType)
		}
		for k, v := range r.header {
			req.Header[k] = v
		}
		if r.env != nil {
			r.env.authorize(req, b.opts.User)
		} else {
			req.Header.Set("X-API-Key", b.opts.APIKey)
		}
		resp, err := b.opts.HTTPClient.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("e2b: %s: %w", r.op, ctx.Err())
			}
			if unavailable < maxUnavailable {
				if serr := b.sleep(ctx, b.backoff(unavailable)); serr != nil {
					return nil, fmt.Errorf("e2b: %s: %w", r.op, serr)
				}
				unavailable++
				continue
			}
			return nil, &userError{msg: fmt.Sprintf("e2b: %s: cannot reach %s: %v", r.op, base, err), sentinel: sandbox.ErrUnavailable, cause: err}
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		ae := decodeError(r.op, resp)
		hdr := resp.Header
		resp.Body.Close()
		var wait time.Duration
		switch {
		case ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden:
			if r.env != nil {
				return nil, ae // a stale envd token: the caller re-reads it
			}
			return nil, &userError{
				msg:      fmt.Sprintf("e2b: %s was refused by %s (%d %s)", b.opts.KeySetting, b.opts.APIURL, ae.status, ae.message),
				sentinel: sandbox.ErrUnauthenticated, cause: ae,
			}
		case ae.status == http.StatusTooManyRequests && throttled < maxThrottled:
			d, ok := retryAfter(hdr)
			if !ok {
				d = b.backoff(throttled)
			}
			wait = d
			throttled++
		case ae.status == http.StatusConflict && r.conflictRetry && throttled < maxThrottled:
			wait = b.backoff(throttled)
			throttled++
		case ae.gone:
			return nil, ae
		case ae.status == http.StatusBadGateway || ae.status == http.StatusServiceUnavailable || ae.status == http.StatusGatewayTimeout:
			if unavailable >= maxUnavailable {
				return nil, &userError{
					msg:      fmt.Sprintf("e2b: %s: %s is unavailable (%d %s)", r.op, base, ae.status, ae.message),
					sentinel: sandbox.ErrUnavailable, cause: ae,
				}
			}
			wait = b.backoff(unavailable)
			unavailable++
		default:
			return nil, ae
		}
		b.log.Debug("e2b: retrying", "op", r.op, "status", ae.status, "wait", wait)
		if err := b.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("e2b: %s: %w", r.op, err)
		}
	}
}

// call is send for JSON answers: it decodes a 2xx body into out (when
// not nil) and returns the status.
func (b *Backend) call(ctx context.Context, r *request, out any) (int, error) {
	resp, err := b.send(ctx, r)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("e2b: %s: decode answer: %w", r.op, err)
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// decodeJSON decodes a response body into out and closes it.
func decodeJSON(resp *http.Response, out any) error {
	defer resp.Body.Close()
	return json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out)
}
