// Package fakegithub is a wire-level fake of the part of GitHub's REST API
// that the worker's pull-request step uses, so the real client
// (repo/github) is tested against the HTTP it will meet, quirks included,
// rather than against a mock of its own calls.
//
// It serves, as an http.Handler:
//   - POST /repos/{owner}/{repo}/pulls, GET .../pulls (with GitHub's
//     filters: a head without the "owner:" prefix is silently ignored),
//     GET and PATCH .../pulls/{number};
//   - POST /app/installations/{id}/access_tokens, which verifies the
//     App's RS256 JWT (signature, iat, exp, iss) with the standard library
//     and mints one-hour "ghs_" installation tokens.
//
// Every request needs a User-Agent (else 403, as GitHub), may name only a
// real X-GitHub-Api-Version (else 400), and is answered with JSON,
// errors as {"message", "documentation_url", "errors": [...]}. The
// /repos endpoints take a static token or an unexpired installation token
// ("Bearer X" or "token X"); anything else is 401 "Bad credentials".
// Branches and their commits come from Options.Branch (a fakegit server in
// the product's tests), read again on every request, so a push between
// calls shows up as a new head SHA.
//
// A Server is safe for concurrent use.
package fakegithub

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sandbot/sandbot/internal/fake/fakehttp"
)

// Documentation URLs, as GitHub puts them in error bodies.
const (
	docRoot        = "https://docs.github.com/rest"
	docCreate      = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
	docList        = "https://docs.github.com/rest/pulls/pulls#list-pull-requests"
	docGet         = "https://docs.github.com/rest/pulls/pulls#get-a-pull-request"
	docUpdate      = "https://docs.github.com/rest/pulls/pulls#update-a-pull-request"
	docAccessToken = "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"
	docVersions    = "https://docs.github.com/rest/about-the-rest-api/api-versions"
	docUserAgent   = "https://docs.github.com/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent"
)

// apiVersions are the values of X-GitHub-Api-Version GitHub knows; the
// first is its default.
var apiVersions = []string{"2022-11-28", "2026-03-10"}

// Options configures a Server.
type Options struct {
	// Tokens are static tokens (personal access tokens), accepted for
	// every repository.
	Tokens []string
	// AppID, AppKey and InstallationID describe the one GitHub App and
	// installation the fake knows: a JWT must carry iss = AppID and be
	// signed by the key whose public half is AppKey.
	AppID          string
	AppKey         *rsa.PublicKey
	InstallationID int64
	// HTMLBase prefixes html_url, e.g. "https://github.example".
	HTMLBase string
	// Branch reports the commit a branch of repo ("owner/name") points
	// at; tests pass fakegit.Server.Branch. nil means no branch exists.
	Branch func(repo, branch string) (sha string, ok bool)
	// Now is the clock of token expiry and JWT checks; nil means
	// time.Now.
	Now func() time.Time
}

// PR is a pull request as the fake holds it, for test assertions.
type PR struct {
	Number int
	// Repo is "owner/name".
	Repo  string
	Title string
	Body  string
	// Head is the head branch name (without the "owner:" of its label);
	// Base the base branch.
	Head string
	Base string
	// HeadSHA is the head branch's commit, read from Options.Branch.
	HeadSHA string
	// State is "open" or "closed".
	State string
	Draft bool
}

// Server is the fake API. Create it with New and mount it on an
// httptest server (or call ServeHTTP directly).
type Server struct {
	opts Options
	mux  *http.ServeMux

	mu     sync.Mutex
	pulls  map[string][]*pull // by "owner/name", in number order
	nextID int64
	minted map[string]*installToken
	calls  []string
}

// New returns a fake with no pull requests.
func New(opts Options) *Server {
	s := &Server{
		opts:   opts,
		mux:    http.NewServeMux(),
		pulls:  map[string][]*pull{},
		nextID: 1000,
		minted: map[string]*installToken{},
	}
	s.mux.HandleFunc("POST /repos/{owner}/{repo}/pulls", s.createPull)
	s.mux.HandleFunc("GET /repos/{owner}/{repo}/pulls", s.listPulls)
	s.mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}", s.getPull)
	s.mux.HandleFunc("PATCH /repos/{owner}/{repo}/pulls/{number}", s.updatePull)
	s.mux.HandleFunc("POST /app/installations/{installation_id}/access_tokens", s.createAccessToken)
	return s
}

// ServeHTTP answers one API request and records it in Calls.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &fakehttp.StatusRecorder{ResponseWriter: w}
	s.serve(rec, r)
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf("%s %s %d", r.Method, r.URL.RequestURI(), rec.Status))
	s.mu.Unlock()
}

// Calls returns one line "METHOD PATH?QUERY STATUS" per request so far,
// oldest first, so a test can check what the client asked and how often
// (for instance that a cached token was not minted twice).
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if r.UserAgent() == "" {
		writeError(w, http.StatusForbidden, apiError{
			Message: "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (" + docUserAgent + "). Check https://developer.github.com for other possible causes.",
			DocURL:  docUserAgent,
		})
		return
	}
	version := r.Header.Get("X-GitHub-Api-Version")
	if version == "" {
		version = apiVersions[0]
	}
	if !slices.Contains(apiVersions, version) {
		writeError(w, http.StatusBadRequest, apiError{
			Message: fmt.Sprintf("Unsupported 'X-GitHub-Api-Version' header: %q. The supported versions are: %v.", version, apiVersions),
			DocURL:  docVersions,
		})
		return
	}
	w.Header().Set("X-GitHub-Api-Version-Selected", version)
	if _, pattern := s.mux.Handler(r); pattern == "" {
		// GitHub answers unknown paths and methods alike with 404.
		writeError(w, http.StatusNotFound, apiError{Message: "Not Found", DocURL: docRoot})
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

func (s *Server) branch(repo, branch string) (string, bool) {
	if s.opts.Branch == nil || branch == "" {
		return "", false
	}
	return s.opts.Branch(repo, branch)
}

// apiError is GitHub's error body.
type apiError struct {
	Message string       `json:"message"`
	Errors  []fieldError `json:"errors,omitempty"`
	DocURL  string       `json:"documentation_url"`
	Status  string       `json:"status"`
}

// fieldError is one entry of an error body's "errors".
type fieldError struct {
	Resource string `json:"resource"`
	Field    string `json:"field,omitempty"`
	Code     string `json:"code"`
	Message  string `json:"message,omitempty"`
}

func writeError(w http.ResponseWriter, status int, e apiError) {
	e.Status = fmt.Sprint(status)
	writeJSON(w, status, e)
}

// validationFailed answers 422 the way GitHub reports invalid fields.
func validationFailed(w http.ResponseWriter, doc string, errs ...fieldError) {
	writeError(w, http.StatusUnprocessableEntity, apiError{Message: "Validation Failed", Errors: errs, DocURL: doc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"message":"fakegithub: encode response"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
