package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.temporal.io/sdk/temporal"
)

// Error types of the model activity's ApplicationErrors. The workflow tells
// failures apart by these (ApplicationError.Type()); messages are written for
// the chat user and never contain the API key.
const (
	// ErrTypeModelAuth: the endpoint rejected the key (401) or refused
	// access (403). Not retryable.
	ErrTypeModelAuth = "ModelAuth"
	// ErrTypeModelNotFound: the model or endpoint does not exist (404).
	// Not retryable.
	ErrTypeModelNotFound = "ModelNotFound"
	// ErrTypeModelBadRequest: the endpoint rejected the request itself
	// (400, 422, other 4xx). Not retryable.
	ErrTypeModelBadRequest = "ModelBadRequest"
	// ErrTypeModelContextTooLong: the transcript does not fit the model's
	// context window (400 context_length_exceeded, 413). Not retryable;
	// the workflow may budget the transcript harder and try again.
	ErrTypeModelContextTooLong = "ModelContextTooLong"
	// ErrTypeModelQuota: the account is out of credit (429
	// insufficient_quota). Not retryable.
	ErrTypeModelQuota = "ModelQuota"
	// ErrTypeModelRateLimited: 429 rate limiting. Retryable, honouring
	// Retry-After.
	ErrTypeModelRateLimited = "ModelRateLimited"
	// ErrTypeModelUnavailable: 408, 409, 5xx, network failures, broken
	// streams. Retryable, honouring Retry-After.
	ErrTypeModelUnavailable = "ModelUnavailable"
	// ErrTypeModelTimeout: the call exceeded Config.RequestTimeout.
	// Retryable.
	ErrTypeModelTimeout = "ModelTimeout"
	// ErrTypeModelBadResponse: the endpoint answered 2xx with something
	// unusable (no choices). Retryable.
	ErrTypeModelBadResponse = "ModelBadResponse"
)

// modelErrorTypes are the error classes a model call can end with; they
// label sandbot_model_calls_total.
var modelErrorTypes = map[string]bool{
	ErrTypeModelAuth: true, ErrTypeModelNotFound: true, ErrTypeModelBadRequest: true,
	ErrTypeModelContextTooLong: true, ErrTypeModelQuota: true, ErrTypeModelRateLimited: true,
	ErrTypeModelUnavailable: true, ErrTypeModelTimeout: true, ErrTypeModelBadResponse: true,
}

// errorClass names a classified model-call error for metrics: its
// ApplicationError type, "canceled", or "other" (never an unbounded text).
func errorClass(err error) string {
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && modelErrorTypes[appErr.Type()]:
		return appErr.Type()
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "other"
}

// MaxRetryDelay caps a server-requested retry delay, so a far-future
// Retry-After cannot park a turn for hours without anyone noticing.
const MaxRetryDelay = 10 * time.Minute

// callError carries what Classify needs beyond the client's error: the
// endpoint and model for messages, the key to scrub, and the retry headers
// of the failed response (go-openai's APIError/RequestError do not expose
// response headers, so retryCapture records them; see below).
type callError struct {
	err         error
	model       string
	baseURL     string
	apiKey      string
	timeout     time.Duration
	retryAfter  time.Duration
	shouldRetry *bool
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// Classify turns a model-call error into a Temporal ApplicationError whose
// retryability follows the HTTP semantics: 401/403/404/400/422 (and other
// 4xx) are non-retryable with a clear user-facing message; 408/409/429/5xx
// and network errors are retryable, with NextRetryDelay taken from the
// response's retry-after-ms / Retry-After (seconds or HTTP date) when
// present. An x-should-retry header, when present, overrides the status.
// Context cancellation is returned unchanged, and errors that already are
// ApplicationErrors pass through. Messages never contain the API key.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return err
	}
	var ce callError
	if p := (*callError)(nil); errors.As(err, &p) {
		ce = *p
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	scrub := func(s string) string { return redact(s, ce.apiKey) }
	where := "the model endpoint"
	if ce.baseURL != "" {
		where = redactURL(ce.baseURL)
	}

	if errors.Is(err, context.DeadlineExceeded) {
		msg := fmt.Sprintf("model request to %s timed out", where)
		if ce.timeout > 0 {
			msg = fmt.Sprintf("model request to %s timed out after %s", where, ce.timeout)
		}
		return retryable(msg, ErrTypeModelTimeout, ce, scrub(err.Error()))
	}

	var bad *badResponseError
	if errors.As(err, &bad) {
		return retryable(fmt.Sprintf("model endpoint %s sent an unusable answer: %s", where, bad.what), ErrTypeModelBadResponse, ce, scrub(err.Error()))
	}

	status, upstream, code := httpDetails(err)
	upstream = scrub(truncateRunes(upstream, 300))
	detail := ""
	if upstream != "" {
		detail = ": " + upstream
	}
	switch {
	case status == 0 && errors.Is(err, io.ErrUnexpectedEOF):
		return retryable(fmt.Sprintf("the answer from model endpoint %s broke off before it was complete", where), ErrTypeModelUnavailable, ce, scrub(err.Error()))
	case status == 0:
		var netErr net.Error
		if errors.As(err, &netErr) || isNetworkish(err) {
			return retryable(fmt.Sprintf("model endpoint %s is unreachable: %s", where, scrub(rootCause(err))), ErrTypeModelUnavailable, ce, scrub(err.Error()))
		}
		if errors.Is(err, openai.ErrChatCompletionInvalidModel) || errors.Is(err, openai.ErrContentFieldsMisused) {
			return nonRetryable(fmt.Sprintf("model request is invalid: %s", scrub(err.Error())), ErrTypeModelBadRequest, scrub(err.Error()))
		}
		// A mid-stream error event carries no status; treat it as the
		// server failing.
		return retryable(fmt.Sprintf("model call to %s failed%s", where, orDefault(detail, ": "+scrub(rootCause(err)))), ErrTypeModelUnavailable, ce, scrub(err.Error()))
	case ce.shouldRetry != nil && !*ce.shouldRetry && retryableStatus(status):
		return nonRetryable(fmt.Sprintf("model endpoint %s failed (%d) and asked not to be retried%s", where, status, detail), ErrTypeModelUnavailable, scrub(err.Error()))
	case ce.shouldRetry != nil && *ce.shouldRetry && !retryableStatus(status) && !authOrMissing(status):
		return retryable(fmt.Sprintf("model endpoint %s failed (%d) and asked to be retried%s", where, status, detail), ErrTypeModelUnavailable, ce, scrub(err.Error()))
	case status == http.StatusUnauthorized:
		return nonRetryable(fmt.Sprintf("model endpoint rejected the API key (401): check the model API key configured for %s%s", where, detail), ErrTypeModelAuth, scrub(err.Error()))
	case status == http.StatusForbidden:
		return nonRetryable(fmt.Sprintf("model endpoint refused access (403): the API key may lack permission for model %q at %s%s", ce.model, where, detail), ErrTypeModelAuth, scrub(err.Error()))
	case status == http.StatusNotFound:
		return nonRetryable(fmt.Sprintf("model %q not found at %s (404): check the model name (on Azure, the deployment name) and that the base URL is the API root, e.g. https://api.openai.com/v1%s", ce.model, where, detail), ErrTypeModelNotFound, scrub(err.Error()))
	case status == http.StatusRequestEntityTooLarge || code == "context_length_exceeded" || code == "string_above_max_length":
		return nonRetryable(fmt.Sprintf("the conversation is too long for model %q (%d)%s", ce.model, status, detail), ErrTypeModelContextTooLong, scrub(err.Error()))
	case status == http.StatusTooManyRequests && code == "insufficient_quota":
		return nonRetryable(fmt.Sprintf("model endpoint %s reports the account is out of quota (429)%s", where, detail), ErrTypeModelQuota, scrub(err.Error()))
	case status == http.StatusTooManyRequests:
		return retryable(fmt.Sprintf("model endpoint %s is rate limiting requests (429)%s", where, detail), ErrTypeModelRateLimited, ce, scrub(err.Error()))
	case retryableStatus(status):
		return retryable(fmt.Sprintf("model endpoint %s is unavailable (%d)%s", where, status, detail), ErrTypeModelUnavailable, ce, scrub(err.Error()))
	case status >= 400 && status < 500:
		return nonRetryable(fmt.Sprintf("model endpoint %s rejected the request (%d)%s", where, status, detail), ErrTypeModelBadRequest, scrub(err.Error()))
	default:
		return retryable(fmt.Sprintf("model endpoint %s answered with unexpected status %d%s", where, status, detail), ErrTypeModelUnavailable, ce, scrub(err.Error()))
	}
}

// authOrMissing statuses never turn retryable: retrying cannot fix a key
// or a model name.
func authOrMissing(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound
}

func retryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// The cause attached to the ApplicationError is a scrubbed copy of the
// client's error, not the error itself: the cause's text travels into
// workflow history and may be shown.
func nonRetryable(msg, typ, cause string) error {
	return temporal.NewNonRetryableApplicationError(msg, typ, errors.New(cause))
}

func retryable(msg, typ string, ce callError, cause string) error {
	delay := ce.retryAfter
	if delay > MaxRetryDelay {
		delay = MaxRetryDelay
	}
	return temporal.NewApplicationErrorWithOptions(msg, typ, temporal.ApplicationErrorOptions{
		Cause:          errors.New(cause),
		NextRetryDelay: delay,
	})
}

// httpDetails extracts status, upstream message and code from go-openai's
// error types.
func httpDetails(err error) (status int, message, code string) {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		if c, ok := apiErr.Code.(string); ok {
			code = c
		}
		return apiErr.HTTPStatusCode, apiErr.Message, code
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		msg := strings.TrimSpace(string(reqErr.Body))
		if strings.HasPrefix(msg, "<") {
			msg = "" // an HTML error page says nothing useful
		}
		return reqErr.HTTPStatusCode, msg, ""
	}
	return 0, "", ""
}

func isNetworkish(err error) bool {
	s := err.Error()
	return strings.Contains(s, "unexpected EOF") || strings.Contains(s, "connection reset") ||
		strings.Contains(s, "connection refused") || strings.Contains(s, "broken pipe")
}

// rootCause is the innermost error's text (url.Error and friends prefix the
// method and URL, which the message already names).
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var secretPattern = regexp.MustCompile(`(?i)(\bsk-[A-Za-z0-9_*.\-]{2,}|\bBearer\s+\S+|\bapi[-_]?key[=:]\s*\S+)`)

// redact removes the configured key and anything shaped like an API key
// (the real service echoes a masked key in its 401 message).
func redact(s, key string) string {
	if key != "" {
		s = strings.ReplaceAll(s, key, "[redacted]")
	}
	return secretPattern.ReplaceAllString(s, "[redacted]")
}

func truncateRunes(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !isRuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// retryCapture is the HTTPDoer handed to go-openai. go-openai turns a failed
// response into *APIError / *RequestError without its headers, so this
// wrapper records Retry-After, retry-after-ms and x-should-retry of any
// failed response into the per-call retryHint found in the request context;
// Complete then attaches them to the error for Classify.
type retryCapture struct {
	next *http.Client
	now  func() time.Time
}

type retryHintKey struct{}

type retryHint struct {
	mu          sync.Mutex
	delay       time.Duration
	shouldRetry *bool
}

func (h *retryHint) get() (time.Duration, *bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.delay, h.shouldRetry
}

func (rc retryCapture) Do(req *http.Request) (*http.Response, error) {
	resp, err := rc.next.Do(req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	if h, ok := req.Context().Value(retryHintKey{}).(*retryHint); ok {
		d := retryAfter(resp.Header, rc.now())
		var sr *bool
		switch strings.ToLower(strings.TrimSpace(resp.Header.Get("x-should-retry"))) {
		case "true":
			t := true
			sr = &t
		case "false":
			f := false
			sr = &f
		}
		h.mu.Lock()
		h.delay, h.shouldRetry = d, sr
		h.mu.Unlock()
	}
	return resp, nil
}

// retryAfter reads retry-after-ms (milliseconds, OpenAI's precise form) or
// Retry-After (delay-seconds or an HTTP date). Zero means absent or invalid.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < float64(24*time.Hour/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < float64(24*time.Hour/time.Second) {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
