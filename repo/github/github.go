// Package github is the worker's client for the GitHub REST calls of the
// pull-request step: minting App installation tokens and opening, finding
// and updating a pull request. It runs only on the worker, never in the
// bot or a sandbox, because it holds the credentials; no token or JWT it
// handles ever appears in an error it returns.
//
// Every request sends Authorization: Bearer, Accept:
// application/vnd.github+json, X-GitHub-Api-Version: 2022-11-28 and
// User-Agent: sandbot. A non-2xx answer is an *APIError; a rate-limited
// one says when to retry instead of sleeping, so the caller (a Temporal
// activity) can schedule the retry.
package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Wire constants every request carries.
const (
	apiVersion = "2022-11-28"
	userAgent  = "sandbot"
	mediaType  = "application/vnd.github+json"
	defaultURL = "https://api.github.com"
	// maxResponse bounds a response body; a pull-request list of 100 is
	// well below it.
	maxResponse = 8 << 20
)

// Client calls GitHub's REST API. Its zero BaseURL means
// https://api.github.com and its zero HTTP means http.DefaultClient; Tokens
// is required. A Client is safe for concurrent use if its TokenSource is.
type Client struct {
	// BaseURL is the API root, e.g. https://api.github.com or, for
	// GitHub Enterprise Server, https://HOST/api/v3.
	BaseURL string
	// HTTP sends the requests (timeouts and proxies are its business).
	HTTP *http.Client
	// Tokens supplies the token of every request.
	Tokens TokenSource
}

// Branch is one end of a pull request.
type Branch struct {
	Ref string `json:"ref"`
	SHA string `json:"sha"`
}

// PullRequest is the part of GitHub's pull-request object the worker
// shows and acts on.
type PullRequest struct {
	Number int `json:"number"`
	// URL is the page a person opens (html_url), not the API URL.
	URL   string `json:"html_url"`
	State string `json:"state"`
	Title string `json:"title"`
	Body  string `json:"body"`
	Draft bool   `json:"draft"`
	Head  Branch `json:"head"`
	Base  Branch `json:"base"`
}

// NewPullRequest is what OpenOrUpdate proposes. Head is a branch of the
// same repository ("sandbot/x") or "owner:branch" for a fork.
type NewPullRequest struct {
	Title, Head, Base, Body string
	Draft                   bool
}

// OpenOrUpdate opens a pull request from pr.Head into pr.Base or, when
// one is already open for that head (GitHub's 422 "already exists"),
// finds it with GET ?head=owner:head&state=open (the owner prefix is
// mandatory: GitHub silently ignores a bare branch name) and updates its
// title and body, so pushing again for the same session is idempotent.
// created reports which happened. Draft applies only to a new pull
// request: the REST API cannot change it later.
func (c *Client) OpenOrUpdate(ctx context.Context, owner, repo string, pr NewPullRequest) (p PullRequest, created bool, err error) {
	path, err := pullsPath(owner, repo)
	if err != nil {
		return PullRequest{}, false, err
	}
	in := struct {
		Title string `json:"title"`
		Head  string `json:"head"`
		Base  string `json:"base"`
		Body  string `json:"body"`
		Draft bool   `json:"draft"`
	}{pr.Title, pr.Head, pr.Base, pr.Body, pr.Draft}
	createErr := c.do(ctx, request{method: http.MethodPost, path: path, in: in, out: &p})
	var apiErr *APIError
	if createErr == nil {
		return p, true, nil
	}
	if !errors.As(createErr, &apiErr) || !apiErr.alreadyExists() {
		return PullRequest{}, false, createErr
	}

	head := pr.Head
	if !strings.Contains(head, ":") {
		head = owner + ":" + head
	}
	q := url.Values{"head": {head}, "state": {"open"}}
	if pr.Base != "" {
		q.Set("base", pr.Base)
	}
	var open []PullRequest
	if err := c.do(ctx, request{method: http.MethodGet, path: path, query: q, out: &open}); err != nil {
		return PullRequest{}, false, fmt.Errorf("github: find the open pull request of %s: %w", head, err)
	}
	if len(open) == 0 {
		return PullRequest{}, false, fmt.Errorf("github: no open pull request of %s into %s, though creating one failed: %w", head, pr.Base, createErr)
	}
	p, err = c.Update(ctx, owner, repo, open[0].Number, pr.Title, pr.Body)
	return p, false, err
}

// Update sets the title and body of pull request number.
func (c *Client) Update(ctx context.Context, owner, repo string, number int, title, body string) (PullRequest, error) {
	path, err := pullsPath(owner, repo)
	if err != nil {
		return PullRequest{}, err
	}
	in := struct {
		Title string `json:"title"`
		Body  string `json:"body"`
	}{title, body}
	var p PullRequest
	err = c.do(ctx, request{method: http.MethodPatch, path: fmt.Sprintf("%s/%d", path, number), in: in, out: &p})
	return p, err
}

// Get returns pull request number.
func (c *Client) Get(ctx context.Context, owner, repo string, number int) (PullRequest, error) {
	path, err := pullsPath(owner, repo)
	if err != nil {
		return PullRequest{}, err
	}
	var p PullRequest
	err = c.do(ctx, request{method: http.MethodGet, path: fmt.Sprintf("%s/%d", path, number), out: &p})
	return p, err
}

func pullsPath(owner, repo string) (string, error) {
	if owner == "" || repo == "" || strings.Contains(owner, "/") || strings.Contains(repo, "/") {
		return "", fmt.Errorf("github: repository %q/%q is not owner and name", owner, repo)
	}
	return "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(repo) + "/pulls", nil
}

func (c *Client) do(ctx context.Context, r request) error {
	if c.Tokens == nil {
		return fmt.Errorf("github: %s %s: the client has no token source", r.method, r.path)
	}
	tok, err := c.Tokens.Token(ctx)
	if err != nil {
		return fmt.Errorf("github: %s %s: get token: %w", r.method, r.path, err)
	}
	base := c.BaseURL
	if base == "" {
		base = defaultURL
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	return send(ctx, hc, base, tok, r)
}

// request is one REST call: path is below the base URL, without query.
type request struct {
	method, path string
	query        url.Values
	in, out      any
}

// send performs r with secret as the bearer credential and decodes the
// answer into r.out, or returns an *APIError scrubbed of secret.
func send(ctx context.Context, hc *http.Client, base, secret string, r request) error {
	if secret == "" {
		return fmt.Errorf("github: %s %s: empty token", r.method, r.path)
	}
	u := strings.TrimRight(base, "/") + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.in != nil {
		b, err := json.Marshal(r.in)
		if err != nil {
			return fmt.Errorf("github: %s %s: encode request: %w", r.method, r.path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return fmt.Errorf("github: %s %s: %w", r.method, r.path, err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Accept", mediaType)
	req.Header.Set("X-GitHub-Api-Version", apiVersion)
	req.Header.Set("User-Agent", userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("github: %s %s: %w", r.method, r.path, scrub(err, secret))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("github: %s %s: read response: %w", r.method, r.path, scrub(err, secret))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newAPIError(resp, raw, r.method, r.path, secret, time.Now())
	}
	if r.out != nil {
		if err := json.Unmarshal(raw, r.out); err != nil {
			return fmt.Errorf("github: %s %s: decode response: %w", r.method, r.path, err)
		}
	}
	return nil
}

// scrubbed hides a secret that a transport error happened to quote. It
// unwraps only to the context's error, so errors.Is still sees a
// cancellation but nothing can reach the original text.
type scrubbed struct {
	msg   string
	cause error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.cause }

func scrub(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	s := &scrubbed{msg: strings.ReplaceAll(err.Error(), secret, redacted)}
	for _, c := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, c) {
			s.cause = c
		}
	}
	return s
}
