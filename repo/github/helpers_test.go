package github

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/internal/fake/fakegithub"
)

const (
	static   = "ghp_static_secret_0123456789"
	testApp  = "12345"
	testInst = 42
	headSHA  = "bbbb000000000000000000000000000000000002"
	mainSHA  = "aaaa000000000000000000000000000000000001"
)

// testKey is generated once; every test may share it.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// clock is a settable time source shared by the fake and the client.
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

// harness is fakegithub on a loopback server, with branches in a map and
// every request's headers recorded.
type harness struct {
	fake  *fakegithub.Server
	srv   *httptest.Server
	clock *clock

	mu       sync.Mutex
	branches map[string]string
	headers  []http.Header
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{
		clock: &clock{t: time.Now()},
		branches: map[string]string{
			"acme/widgets main":       mainSHA,
			"acme/widgets sandbot/x":  headSHA,
			"acme/widgets sandbot/y":  "cccc000000000000000000000000000000000003",
			"acme/widgets release-1":  "dddd000000000000000000000000000000000004",
			"acme/widgets no-changes": mainSHA,
		},
	}
	h.fake = fakegithub.New(fakegithub.Options{
		Tokens:         []string{static},
		AppID:          testApp,
		AppKey:         &testKey().PublicKey,
		InstallationID: testInst,
		HTMLBase:       "https://github.example",
		Branch:         h.branch,
		Now:            h.clock.Now,
	})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.headers = append(h.headers, r.Header.Clone())
		h.mu.Unlock()
		h.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *harness) branch(repo, branch string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sha, ok := h.branches[repo+" "+branch]
	return sha, ok
}

// client is a Client of the harness with tokens.
func (h *harness) client(tokens TokenSource) *Client {
	return &Client{BaseURL: h.srv.URL, HTTP: h.srv.Client(), Tokens: tokens}
}

// appTokens is an AppTokens source of the harness on the harness clock.
func (h *harness) appTokens(key *rsa.PrivateKey) *appTokens {
	a := AppTokens(h.srv.URL, testApp, testInst, key, h.srv.Client()).(*appTokens)
	a.now = h.clock.Now
	return a
}

// mints counts the installation tokens minted so far.
func (h *harness) mints() int {
	n := 0
	for _, c := range h.fake.Calls() {
		if strings.HasPrefix(c, "POST /app/installations/42/access_tokens 201") {
			n++
		}
	}
	return n
}

func (h *harness) recorded() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.headers...)
}
