package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandbot/sandbot/sandbox"
)

// sdkVersion is sent on toolbox requests: from 0.167.0 on, the daemon
// keeps stdout and stderr apart.
const sdkVersion = "0.190.0"

// errBodyLimit bounds how much of an error body is read.
const errBodyLimit = 64 << 10

// request is one HTTP call to the control plane or a toolbox.
type request struct {
	op     string // names the operation in errors: "exec: create session"
	method string
	url    string // absolute, without the query
	query  url.Values
	in     any // JSON body, when not nil
	// body makes a non-JSON body and its content type, once per attempt,
	// so a streamed upload can be sent again.
	body func() (io.Reader, string, error)
	// toolbox requests carry the SDK version header and are not retried
	// on 409 or 5xx here: the caller asks the control plane first
	// whether the sandbox is still started.
	toolbox bool
	// once marks a request that runs the user's command: it is never sent
	// again after the provider may have acted on it (a dropped connection,
	// a 5xx), since running a command twice is worse than reporting the
	// failure. Answers that say it was refused before anything ran (429,
	// the toolbox of a stopped sandbox) are still retried.
	once bool
}

// apiError is a non-2xx answer, with the provider's message.
type apiError struct {
	status  int
	message string
	url     string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.status, e.message) }

// statusOf returns the HTTP status of an apiError in err, or 0.
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	return 0
}

// userError is an error whose text is written for the person in the chat
// thread, while errors.Is still finds the sentinel and the cause.
type userError struct {
	msg      string
	sentinel error
	cause    error
}

func (e *userError) Error() string   { return e.msg }
func (e *userError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// decodeError reads the message of an error body: the API's
// {"statusCode","error","message"} or the daemon's
// {"statusCode","message","code"}, falling back to the raw body and the
// status text. NestJS may send message as an array of validation errors.
func decodeError(resp *http.Response) string {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, errBodyLimit))
	var body struct {
		Message    json.RawMessage `json:"message"`
		Error      string          `json:"error"`
		StatusCode int             `json:"statusCode"`
	}
	if json.Unmarshal(raw, &body) == nil {
		var s string
		var list []string
		switch {
		case json.Unmarshal(body.Message, &s) == nil && s != "":
			return s
		case json.Unmarshal(body.Message, &list) == nil && len(list) > 0:
			return strings.Join(list, ", ")
		case body.Error != "":
			return body.Error
		case body.StatusCode != 0:
			return http.StatusText(body.StatusCode)
		}
	}
	if t := strings.TrimSpace(string(raw)); t != "" {
		return t
	}
	return http.StatusText(resp.StatusCode)
}

// retryAfter is the wait a 429 asks for: the largest of Daytona's
// per-throttler Retry-After-<name> headers and a plain Retry-After, in
// seconds; zero when there is none.
func retryAfter(h http.Header) time.Duration {
	var d time.Duration
	for k, vs := range h {
		if !strings.HasPrefix(strings.ToLower(k), "retry-after") || len(vs) == 0 {
			continue
		}
		if n, err := strconv.ParseFloat(strings.TrimSpace(vs[0]), 64); err == nil && n > 0 {
			d = max(d, time.Duration(n*float64(time.Second)))
		}
	}
	return d
}

// stateChange reports a 409 that waits for a lifecycle change to finish.
func stateChange(status int, msg string) bool {
	return status == http.StatusConflict && strings.Contains(strings.ToLower(msg), "state change in progress")
}

// backoff is the wait before retry attempt n (0-based): exponential from
// RetryMin, capped at RetryMax, with jitter so workers do not retry in step.
func (b *Backend) backoff(n int) time.Duration {
	d := b.opts.RetryMin << min(n, 16)
	if d <= 0 || d > b.opts.RetryMax {
		d = b.opts.RetryMax
	}
	return d/2 + rand.N(d/2+1)
}

// send performs a request and returns a 2xx response, whose body the
// caller closes. It retries what waiting can fix, always bounded by ctx:
// connection failures and (for the control plane) 502/503/504 a few
// times with backoff, 409 "state change in progress" until the change is
// over, and 429 after the Retry-After the provider asked for. A refused
// key wraps sandbox.ErrUnauthenticated, an outage sandbox.ErrUnavailable;
// other failures are an *apiError wrapped with the op.
func (b *Backend) send(ctx context.Context, req request) (*http.Response, error) {
	u := req.url
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	var failures, throttled, conflicts int
	for {
		resp, err := b.attempt(ctx, req, u)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("daytona: %s: %w", req.op, ctx.Err())
			}
			var pe permanent
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("daytona: %s: %w", req.op, pe.err)
			}
			if failures >= b.opts.Retries || req.once {
				return nil, &userError{
					msg:      fmt.Sprintf("daytona: %s: %s is unreachable: %v", req.op, hostOf(u), err),
					sentinel: sandbox.ErrUnavailable, cause: err,
				}
			}
			if err := b.opts.Sleep(ctx, b.backoff(failures)); err != nil {
				return nil, fmt.Errorf("daytona: %s: %w", req.op, err)
			}
			failures++
			continue
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		msg := decodeError(resp)
		resp.Body.Close()
		status := resp.StatusCode
		var wait time.Duration
		switch {
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			return nil, &userError{
				msg:      fmt.Sprintf("daytona: %s was refused by %s (%d %s)", b.opts.KeySetting, hostOf(u), status, msg),
				sentinel: sandbox.ErrUnauthenticated, cause: &apiError{status, msg, u},
			}
		case status == http.StatusTooManyRequests && throttled < maxThrottled:
			wait = retryAfter(resp.Header)
			if wait <= 0 {
				wait = b.backoff(throttled)
			}
			throttled++
		case !req.toolbox && stateChange(status, msg):
			wait = b.backoff(conflicts)
			conflicts++
		case !req.toolbox && status >= 502 && status <= 504 && failures < b.opts.Retries:
			wait = b.backoff(failures)
			failures++
		case status == http.StatusTooManyRequests, status >= 500 && !req.toolbox:
			return nil, unavailable(req.op, u, status, msg)
		default:
			return nil, fmt.Errorf("daytona: %s: %w", req.op, &apiError{status, msg, u})
		}
		b.log.Debug("daytona: retrying", "op", req.op, "status", status, "message", msg, "wait", wait)
		if err := b.opts.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("daytona: %s: %d %s: %w", req.op, status, msg, err)
		}
	}
}

// maxThrottled bounds the 429 retries of one request.
const maxThrottled = 10

func unavailable(op, u string, status int, msg string) error {
	return &userError{
		msg:      fmt.Sprintf("daytona: %s: %s is unavailable (%d %s)", op, hostOf(u), status, msg),
		sentinel: sandbox.ErrUnavailable, cause: &apiError{status, msg, u},
	}
}

// hostOf is the scheme and host of a URL, for messages: the path may hold
// a sandbox id, which says nothing to the person reading.
func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return u
	}
	return p.Scheme + "://" + p.Host
}

// permanent is a failure to build a request: sending it again cannot help.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }

func (b *Backend) attempt(ctx context.Context, req request, u string) (*http.Response, error) {
	var body io.Reader
	ctype := ""
	switch {
	case req.in != nil:
		p, err := json.Marshal(req.in)
		if err != nil {
			return nil, permanent{err}
		}
		body, ctype = bytes.NewReader(p), "application/json"
	case req.body != nil:
		r, ct, err := req.body()
		if err != nil {
			return nil, permanent{err}
		}
		body, ctype = r, ct
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return nil, permanent{err}
	}
	hr.Header.Set("Authorization", "Bearer "+b.opts.APIKey)
	hr.Header.Set("X-Daytona-Source", "sandbot")
	if ctype != "" {
		hr.Header.Set("Content-Type", ctype)
	}
	if req.toolbox {
		hr.Header.Set("X-Daytona-SDK-Version", sdkVersion)
	}
	return b.opts.HTTPClient.Do(hr)
}

// call sends a request and decodes a JSON answer into out (when not nil).
func (b *Backend) call(ctx context.Context, req request, out any) error {
	resp, err := b.send(ctx, req)
	if err != nil {
		return err
	}
	return decodeInto(ctx, req.op, resp, out)
}

// decodeInto decodes a JSON answer into out (when not nil) and closes it.
func decodeInto(ctx context.Context, op string, resp *http.Response, out any) error {
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, errBodyLimit))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("daytona: %s: %w", op, ctx.Err())
		}
		return fmt.Errorf("daytona: %s: decode answer: %w", op, err)
	}
	return nil
}

// api is a control-plane request.
func (b *Backend) api(op, method, path string) request {
	return request{op: op, method: method, url: b.opts.APIURL + path}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
