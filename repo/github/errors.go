package github

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// redacted replaces a credential wherever GitHub (or a proxy) echoed it.
const redacted = "[redacted]"

// secondaryWait is how long to wait after a secondary rate limit that
// names no time, as GitHub's documentation advises (at least a minute).
const secondaryWait = time.Minute

// APIError is a non-2xx answer of GitHub, decoded from its error body so
// callers can tell a missing branch from an existing pull request or a
// rate limit, and so users see GitHub's own words.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Message is GitHub's "message" ("Validation Failed", "Bad
	// credentials"); for a rate limit it ends with when to retry.
	Message string
	// Errors are GitHub's per-field details.
	Errors []FieldError
	// DocURL is GitHub's "documentation_url".
	DocURL string
	// Method and Path name the call (path without base URL or query).
	Method, Path string
	// RetryAt is when a rate-limited call may be retried; zero when the
	// answer was no rate limit.
	RetryAt time.Time
}

// FieldError is one entry of an error body's "errors": Code is one of
// missing, missing_field, invalid, already_exists, unprocessable or
// custom, and for custom the explanation is in Message.
type FieldError struct {
	Resource string `json:"resource"`
	Field    string `json:"field"`
	Code     string `json:"code"`
	Message  string `json:"message"`
}

// Error reads like "GitHub: 422 Validation Failed: A pull request already
// exists for acme:sandbot/x (POST /repos/acme/widgets/pulls)".
func (e *APIError) Error() string {
	var b strings.Builder
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	fmt.Fprintf(&b, "GitHub: %d %s", e.Status, msg)
	var details []string
	for _, fe := range e.Errors {
		if d := fe.String(); d != "" {
			details = append(details, d)
		}
	}
	if len(details) > 0 {
		b.WriteString(": " + strings.Join(details, "; "))
	}
	if e.Method != "" {
		fmt.Fprintf(&b, " (%s %s)", e.Method, e.Path)
	}
	return b.String()
}

// RateLimited reports whether GitHub refused the call for a rate limit;
// RetryAt then says when to try again.
func (e *APIError) RateLimited() bool { return !e.RetryAt.IsZero() }

// String describes the field error for people: GitHub's message if it
// gave one, else what the code says about Resource.Field.
func (fe FieldError) String() string {
	if fe.Message != "" {
		return strings.TrimSuffix(fe.Message, ".")
	}
	what := fe.Resource
	if fe.Field != "" {
		what = strings.TrimPrefix(what+"."+fe.Field, ".")
	}
	switch fe.Code {
	case "":
		return what
	case "missing":
		return what + " does not exist"
	case "missing_field":
		return what + " is required"
	case "invalid":
		return what + " is invalid"
	case "already_exists":
		return what + " already exists"
	default:
		return what + " is " + strings.ReplaceAll(fe.Code, "_", " ")
	}
}

// alreadyExists reports GitHub's answer to a second pull request for the
// same head and base.
func (e *APIError) alreadyExists() bool {
	if e.Status != http.StatusUnprocessableEntity {
		return false
	}
	for _, fe := range e.Errors {
		if strings.Contains(strings.ToLower(fe.Message), "already exists") {
			return true
		}
	}
	return strings.Contains(strings.ToLower(e.Message), "already exists")
}

// newAPIError decodes a failed answer; secret is scrubbed from every
// string GitHub sent back.
func newAPIError(resp *http.Response, raw []byte, method, path, secret string, now time.Time) *APIError {
	e := &APIError{Status: resp.StatusCode, Method: method, Path: path}
	var body struct {
		Message string       `json:"message"`
		Errors  []FieldError `json:"errors"`
		DocURL  string       `json:"documentation_url"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Message != "" {
		e.Message, e.Errors, e.DocURL = body.Message, body.Errors, body.DocURL
	} else {
		// Not GitHub's JSON (a proxy's page, say): keep a short excerpt.
		e.Message = http.StatusText(resp.StatusCode)
		if line, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n"); line != "" {
			if len(line) > 200 {
				line = line[:200] + "…"
			}
			e.Message += ": " + line
		}
	}
	if secret != "" {
		clean := func(s string) string { return strings.ReplaceAll(s, secret, redacted) }
		e.Message, e.DocURL = clean(e.Message), clean(e.DocURL)
		for i := range e.Errors {
			fe := &e.Errors[i]
			fe.Resource, fe.Field, fe.Code, fe.Message = clean(fe.Resource), clean(fe.Field), clean(fe.Code), clean(fe.Message)
		}
	}
	if resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests {
		e.rateLimit(resp.Header, now)
	}
	return e
}

// rateLimit fills RetryAt and appends when to retry to Message, following
// GitHub's rules: honour retry-after; else, with no requests remaining,
// wait for x-ratelimit-reset; else a secondary limit waits a minute. A
// plain 403 (no permission) is left alone.
func (e *APIError) rateLimit(h http.Header, now time.Time) {
	var note string
	if ra := strings.TrimSpace(h.Get("Retry-After")); ra != "" {
		if secs, err := strconv.Atoi(ra); err == nil && secs >= 0 {
			d := time.Duration(secs) * time.Second
			e.RetryAt = now.Add(d)
			note = "retry after " + d.String()
		} else if t, err := http.ParseTime(ra); err == nil {
			e.RetryAt = t
			note = "retry at " + t.UTC().Format(time.RFC3339)
		}
	}
	if note == "" && h.Get("X-Ratelimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(h.Get("X-Ratelimit-Reset"), 10, 64); err == nil {
			e.RetryAt = time.Unix(reset, 0)
			note = "retry at " + e.RetryAt.UTC().Format(time.RFC3339)
		} else {
			e.RetryAt = now.Add(secondaryWait)
			note = "retry after " + secondaryWait.String()
		}
	}
	if note == "" && strings.Contains(strings.ToLower(e.Message), "rate limit") {
		e.RetryAt = now.Add(secondaryWait)
		note = "retry after " + secondaryWait.String()
	}
	if note != "" {
		e.Message = strings.TrimSuffix(strings.TrimSpace(e.Message), ".") + "; rate limited, " + note
	}
}
