package github

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestAPIErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  *APIError
		want string
	}{
		{&APIError{Status: 422, Message: "Validation Failed", Method: "POST", Path: "/repos/acme/widgets/pulls",
			Errors: []FieldError{{Resource: "PullRequest", Code: "custom", Message: "A pull request already exists for acme:sandbot/x."}}},
			"GitHub: 422 Validation Failed: A pull request already exists for acme:sandbot/x (POST /repos/acme/widgets/pulls)"},
		{&APIError{Status: 422, Message: "Validation Failed", Method: "POST", Path: "/p",
			Errors: []FieldError{{Resource: "PullRequest", Field: "title", Code: "missing_field"}, {Resource: "PullRequest", Field: "base", Code: "invalid"}}},
			"GitHub: 422 Validation Failed: PullRequest.title is required; PullRequest.base is invalid (POST /p)"},
		{&APIError{Status: 422, Message: "Validation Failed", Errors: []FieldError{{Field: "x", Code: "already_exists"}, {Resource: "Issue", Code: "missing"}, {Resource: "R", Field: "f", Code: "weird_code"}}},
			"GitHub: 422 Validation Failed: x already exists; Issue does not exist; R.f is weird code"},
		{&APIError{Status: 502, Method: "GET", Path: "/x"}, "GitHub: 502 Bad Gateway (GET /x)"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q\nwant      %q", got, tc.want)
		}
	}
}

// serve returns a client of a server that answers every request with h.
func serve(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Client{BaseURL: srv.URL, HTTP: srv.Client(), Tokens: StaticToken(static)}
}

func getErr(t *testing.T, c *Client) *APIError {
	t.Helper()
	_, err := c.Get(context.Background(), "acme", "widgets", 1)
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an *APIError", err)
	}
	return apiErr
}

func TestRateLimits(t *testing.T) {
	const reset = 1796126400 // 2026-12-01T12:00:00Z
	for _, tc := range []struct {
		name     string
		status   int
		header   map[string]string
		msg      string
		wantMsg  string
		wantWait time.Duration // from now; 0: use wantAt
		wantAt   time.Time
		limited  bool
	}{
		{"primary, reset", 403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1796126400"},
			"API rate limit exceeded for installation ID 42.",
			"API rate limit exceeded for installation ID 42; rate limited, retry at 2026-12-01T12:00:00Z", 0, time.Unix(reset, 0), true},
		{"retry-after seconds", 429, map[string]string{"Retry-After": "30"},
			"You have exceeded a secondary rate limit.",
			"You have exceeded a secondary rate limit; rate limited, retry after 30s", 30 * time.Second, time.Time{}, true},
		{"retry-after wins over reset", 403, map[string]string{"Retry-After": "5", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1796126400"},
			"slow down", "slow down; rate limited, retry after 5s", 5 * time.Second, time.Time{}, true},
		{"retry-after date", 429, map[string]string{"Retry-After": "Tue, 01 Dec 2026 12:00:00 GMT"},
			"slow down", "slow down; rate limited, retry at 2026-12-01T12:00:00Z", 0, time.Unix(reset, 0), true},
		{"secondary, no header", 403, nil,
			"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"You have exceeded a secondary rate limit. Please wait a few minutes before you try again; rate limited, retry after 1m0s", time.Minute, time.Time{}, true},
		{"plain 403", 403, map[string]string{"X-RateLimit-Remaining": "4999"},
			"Resource not accessible by integration", "Resource not accessible by integration", 0, time.Time{}, false},
		{"404 is no rate limit", 404, map[string]string{"Retry-After": "30"}, "Not Found", "Not Found", 0, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"message":"` + tc.msg + `","documentation_url":"https://docs.github.com/rest"}`))
			})
			before := time.Now()
			e := getErr(t, c)
			after := time.Now()
			if e.Message != tc.wantMsg || e.RateLimited() != tc.limited || e.Status != tc.status {
				t.Errorf("got %d %q limited=%v", e.Status, e.Message, e.RateLimited())
			}
			switch {
			case tc.wantWait > 0:
				if e.RetryAt.Before(before.Add(tc.wantWait)) || e.RetryAt.After(after.Add(tc.wantWait)) {
					t.Errorf("RetryAt = %v, want %v from now", e.RetryAt, tc.wantWait)
				}
			case !e.RetryAt.Equal(tc.wantAt):
				t.Errorf("RetryAt = %v, want %v", e.RetryAt, tc.wantAt)
			}
		})
	}
}

func TestEchoedTokenIsRedacted(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		w.WriteHeader(401)
		_, _ = w.Write([]byte(`{"message":"bad: ` + a + `","documentation_url":"https://x/` + a + `","errors":[{"resource":"` + a + `","field":"f","code":"c","message":"` + a + `"}]}`))
	})
	e := getErr(t, c)
	if s := e.Error() + e.DocURL; strings.Contains(s, static) || !strings.Contains(s, "[redacted]") {
		t.Errorf("error = %q", s)
	}
}

func TestNonJSONErrorBody(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(502)
		_, _ = w.Write([]byte("<html>upstream " + static + " down</html>\nmore"))
	})
	e := getErr(t, c)
	if want := "Bad Gateway: <html>upstream [redacted] down</html>"; e.Message != want {
		t.Errorf("Message = %q, want %q", e.Message, want)
	}
}

func TestTransportErrorHidesTheToken(t *testing.T) {
	c := &Client{
		BaseURL: "http://127.0.0.1:1",
		HTTP: &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			return nil, errors.New("proxy refused " + r.Header.Get("Authorization"))
		})},
		Tokens: StaticToken(static),
	}
	_, err := c.Get(context.Background(), "acme", "widgets", 1)
	if err == nil || strings.Contains(err.Error(), static) || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("err = %v", err)
	}
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		if strings.Contains(e.Error(), static) {
			t.Errorf("a wrapped error still holds the token: %q", e)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
