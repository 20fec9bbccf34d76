package fakegithub_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/internal/fake/fakegithub"
)

const (
	static = "ghp_static_token"
	appID  = "12345"
	instID = 42
)

// appKey is generated once: a 2048-bit key takes a while, and every test
// may share it.
var appKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a fake with its branches, clock and App key.
type env struct {
	t     *testing.T
	srv   *fakegithub.Server
	clock *clock

	mu       sync.Mutex
	branches map[string]string // "owner/name branch" → sha
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{
		t:        t,
		clock:    &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)},
		branches: map[string]string{},
	}
	e.setBranch("acme/widgets", "main", "aaaa000000000000000000000000000000000001")
	e.setBranch("acme/widgets", "feature", "bbbb000000000000000000000000000000000002")
	e.setBranch("acme/widgets", "release", "cccc000000000000000000000000000000000003")
	e.srv = fakegithub.New(fakegithub.Options{
		Tokens:         []string{static},
		AppID:          appID,
		AppKey:         &appKey().PublicKey,
		InstallationID: instID,
		HTMLBase:       "https://github.example/",
		Branch:         e.branch,
		Now:            e.clock.Now,
	})
	return e
}

func (e *env) setBranch(repo, branch, sha string) {
	e.mu.Lock()
	e.branches[repo+" "+branch] = sha
	e.mu.Unlock()
}

func (e *env) branch(repo, branch string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sha, ok := e.branches[repo+" "+branch]
	return sha, ok
}

// response is one answer of the fake.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// message is the "message" of an error body.
func (r response) message(t *testing.T) string {
	t.Helper()
	m, _ := r.json(t)["message"].(string)
	return m
}

// call sends one request the way a well-behaved client does (User-Agent,
// Accept, API version, "Bearer" auth when auth != ""); edit may change it.
func (e *env) call(method, path, auth string, body any, edit ...func(*http.Request)) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = strings.NewReader(string(raw))
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("User-Agent", "fakegithub-test")
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	for _, f := range edit {
		f(req)
	}
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		e.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// signJWT signs header and claims with key (RS256), whatever they say.
func signJWT(t *testing.T, key *rsa.PrivateKey, header, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(header) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// appJWT is a valid JWT for the env's App at its current time.
func (e *env) appJWT() string {
	now := e.clock.Now()
	return signJWT(e.t, appKey(), map[string]any{"alg": "RS256", "typ": "JWT"}, map[string]any{
		"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(9 * time.Minute).Unix(), "iss": appID,
	})
}

// mint returns a new installation token, asking for body (nil: all).
func (e *env) mint(body any) string {
	e.t.Helper()
	r := e.call("POST", "/app/installations/42/access_tokens", e.appJWT(), body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("mint: %d %s", r.status, r.body)
	}
	tok, _ := r.json(e.t)["token"].(string)
	return tok
}

// openPR creates a pull request from head into base and returns its number.
func (e *env) openPR(auth, head, base string) int {
	e.t.Helper()
	r := e.call("POST", "/repos/acme/widgets/pulls", auth, map[string]any{"title": "T " + head, "head": head, "base": base})
	if r.status != http.StatusCreated {
		e.t.Fatalf("create %s→%s: %d %s", head, base, r.status, r.body)
	}
	n, _ := r.json(e.t)["number"].(float64)
	return int(n)
}
