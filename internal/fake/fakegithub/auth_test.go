package fakegithub_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/internal/fake/fakegit"
)

func TestUserAgentRequired(t *testing.T) {
	e := newEnv(t)
	r := e.call("GET", "/repos/acme/widgets/pulls", static, nil, func(r *http.Request) { r.Header.Del("User-Agent") })
	if r.status != http.StatusForbidden || !strings.Contains(r.message(t), "User-Agent") {
		t.Errorf("%d %s", r.status, r.body)
	}
}

func TestAPIVersionHeader(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		version, selected string
		status            int
	}{
		{"2022-11-28", "2022-11-28", 200},
		{"2026-03-10", "2026-03-10", 200},
		{"", "2022-11-28", 200},
		{"2021-01-01", "", 400},
		{"latest", "", 400},
	} {
		r := e.call("GET", "/repos/acme/widgets/pulls", static, nil, func(r *http.Request) {
			r.Header.Set("X-GitHub-Api-Version", tc.version)
		})
		if r.status != tc.status || r.header.Get("X-GitHub-Api-Version-Selected") != tc.selected {
			t.Errorf("version %q: %d %q %s", tc.version, r.status, r.header.Get("X-GitHub-Api-Version-Selected"), r.body)
		}
		if tc.status == 400 && !strings.Contains(r.message(t), "X-GitHub-Api-Version") {
			t.Errorf("version %q: message %q", tc.version, r.message(t))
		}
	}
}

func TestRepoAuth(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name, header string
		status       int
		msg          string
	}{
		{"bearer", "Bearer " + static, 200, ""},
		{"token scheme", "token " + static, 200, ""},
		{"lower-case bearer", "bearer " + static, 200, ""},
		{"missing", "", 401, "Requires authentication"},
		{"wrong token", "Bearer ghp_wrong", 401, "Bad credentials"},
		{"basic", "Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+static)), 401, "Bad credentials"},
		{"the App JWT is no API token", "Bearer " + e.appJWT(), 401, "Bad credentials"},
	} {
		r := e.call("GET", "/repos/acme/widgets/pulls", "", nil, func(r *http.Request) {
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
		})
		if r.status != tc.status || (tc.msg != "" && r.message(t) != tc.msg) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	if !e.srv.ValidToken(static) || e.srv.ValidToken("ghp_wrong") || e.srv.ValidToken("") {
		t.Error("ValidToken is wrong about static tokens")
	}
}

func TestUnknownRoute(t *testing.T) {
	e := newEnv(t)
	for _, tc := range [][2]string{{"GET", "/nope"}, {"DELETE", "/repos/acme/widgets/pulls/1"}, {"PUT", "/repos/acme/widgets/pulls"}} {
		if r := e.call(tc[0], tc[1], static, nil); r.status != 404 || r.message(t) != "Not Found" {
			t.Errorf("%s %s: %d %s", tc[0], tc[1], r.status, r.body)
		}
	}
}

func TestCalls(t *testing.T) {
	e := newEnv(t)
	e.openPR(static, "feature", "main")
	e.call("GET", "/repos/acme/widgets/pulls?head=acme:feature", "nope", nil)
	want := []string{
		"POST /repos/acme/widgets/pulls 201",
		"GET /repos/acme/widgets/pulls?head=acme:feature 401",
	}
	if got := e.srv.Calls(); !slices.Equal(got, want) {
		t.Errorf("Calls = %q", got)
	}
}

func TestInstallationToken(t *testing.T) {
	e := newEnv(t)
	r := e.call("POST", "/app/installations/42/access_tokens", e.appJWT(), nil)
	if r.status != http.StatusCreated {
		t.Fatalf("%d %s", r.status, r.body)
	}
	m := r.json(t)
	tok, _ := m["token"].(string)
	if !strings.HasPrefix(tok, "ghs_") || len(tok) < 40 {
		t.Errorf("token = %q", tok)
	}
	if m["expires_at"] != "2026-12-01T11:00:00Z" || m["repository_selection"] != "all" ||
		!reflect.DeepEqual(m["permissions"], map[string]any{"contents": "write", "metadata": "read", "pull_requests": "write"}) {
		t.Errorf("response = %v", m)
	}
	if other := e.mint(nil); other == tok {
		t.Error("two mints gave the same token")
	}
	if !e.srv.ValidToken(tok) {
		t.Error("ValidToken(minted) = false")
	}
	if n := e.openPR(tok, "feature", "main"); n != 1 {
		t.Errorf("number = %d", n)
	}
	r = e.call("GET", "/repos/acme/widgets/pulls/1", "", nil, func(r *http.Request) { r.Header.Set("Authorization", "token "+tok) })
	if user := r.json(t)["user"].(map[string]any); r.status != 200 || user["login"] != "fake-app[bot]" || user["type"] != "Bot" {
		t.Errorf("GET with the minted token: %d %s", r.status, r.body)
	}

	e.clock.Advance(59 * time.Minute)
	if !e.srv.ValidToken(tok) {
		t.Error("token expired early")
	}
	e.clock.Advance(time.Minute)
	if e.srv.ValidToken(tok) {
		t.Error("token valid after an hour")
	}
	if r := e.call("GET", "/repos/acme/widgets/pulls", tok, nil); r.status != 401 || r.message(t) != "Bad credentials" {
		t.Errorf("expired token: %d %s", r.status, r.body)
	}
}

func TestInstallationTokenScope(t *testing.T) {
	e := newEnv(t)
	other := e.mint(map[string]any{"repositories": []string{"gadgets"}})
	if r := e.call("GET", "/repos/acme/widgets/pulls", other, nil); r.status != 404 || r.message(t) != "Not Found" {
		t.Errorf("repo outside the token: %d %s", r.status, r.body)
	}
	own := e.mint(map[string]any{"repositories": []string{"Widgets"}})
	if r := e.call("GET", "/repos/acme/widgets/pulls", own, nil); r.status != 200 {
		t.Errorf("repo of the token: %d %s", r.status, r.body)
	}

	readOnly := e.mint(map[string]any{"permissions": map[string]string{"pull_requests": "read"}})
	if r := e.call("GET", "/repos/acme/widgets/pulls", readOnly, nil); r.status != 200 {
		t.Errorf("read with a read token: %d %s", r.status, r.body)
	}
	r := e.call("POST", "/repos/acme/widgets/pulls", readOnly, map[string]any{"title": "t", "head": "feature", "base": "main"})
	if r.status != 403 || r.message(t) != "Resource not accessible by integration" ||
		r.header.Get("X-Accepted-GitHub-Permissions") != "pull_requests=write" {
		t.Errorf("write with a read token: %d %q %s", r.status, r.header.Get("X-Accepted-GitHub-Permissions"), r.body)
	}
	noPRs := e.mint(map[string]any{"permissions": map[string]string{"contents": "read"}})
	if r := e.call("GET", "/repos/acme/widgets/pulls", noPRs, nil); r.status != 403 {
		t.Errorf("read without pull_requests: %d %s", r.status, r.body)
	}

	r = e.call("POST", "/app/installations/42/access_tokens", e.appJWT(), map[string]any{"permissions": map[string]string{"administration": "write"}})
	if r.status != 422 {
		t.Errorf("more than the installation has: %d %s", r.status, r.body)
	}
	r = e.call("POST", "/app/installations/42/access_tokens", e.appJWT(), map[string]any{"repositories": "widgets"})
	if r.status != 422 || !strings.Contains(r.message(t), "'properties/repositories'") {
		t.Errorf("repositories not a list: %d %s", r.status, r.body)
	}
}

func TestJWTRejected(t *testing.T) {
	e := newEnv(t)
	now := e.clock.Now()
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]any{"alg": "RS256", "typ": "JWT"}
	claims := func(iat, exp time.Duration, iss any) map[string]any {
		return map[string]any{"iat": now.Add(iat).Unix(), "exp": now.Add(exp).Unix(), "iss": iss}
	}
	good := claims(-time.Minute, 9*time.Minute, appID)
	for _, tc := range []struct {
		name   string
		jwt    string
		scheme string
		status int
		msg    string
	}{
		{"valid", signJWT(t, appKey(), hdr, good), "Bearer", 201, ""},
		{"iss as a number", signJWT(t, appKey(), hdr, claims(0, 5*time.Minute, 12345)), "Bearer", 201, ""},
		{"iat 30 s ahead (clock skew)", signJWT(t, appKey(), hdr, claims(30*time.Second, 5*time.Minute, appID)), "Bearer", 201, ""},
		{"exactly 10 minutes", signJWT(t, appKey(), hdr, claims(-time.Minute, 9*time.Minute, appID)), "Bearer", 201, ""},
		{"expired", signJWT(t, appKey(), hdr, claims(-10*time.Minute, -time.Second, appID)), "Bearer", 401,
			"'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"},
		{"exp too far after iat", signJWT(t, appKey(), hdr, claims(-time.Minute, 10*time.Minute, appID)), "Bearer", 401,
			"'Expiration time' claim ('exp') is too far in the future"},
		{"iat in the future", signJWT(t, appKey(), hdr, claims(2*time.Minute, 9*time.Minute, appID)), "Bearer", 401,
			"'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"},
		{"iat a string", signJWT(t, appKey(), hdr, map[string]any{"iat": "1", "exp": now.Add(time.Minute).Unix(), "iss": appID}), "Bearer", 401,
			"'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"},
		{"missing exp", signJWT(t, appKey(), hdr, map[string]any{"iat": now.Unix(), "iss": appID}), "Bearer", 401,
			"'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"},
		{"wrong iss", signJWT(t, appKey(), hdr, claims(-time.Minute, 9*time.Minute, "999")), "Bearer", 401,
			"'Issuer' claim ('iss') does not match a GitHub App"},
		{"other key", signJWT(t, otherKey, hdr, good), "Bearer", 401, "A JSON web token could not be decoded"},
		{"alg HS256", signJWT(t, appKey(), map[string]any{"alg": "HS256", "typ": "JWT"}, good), "Bearer", 401, "A JSON web token could not be decoded"},
		{"typ not JWT", signJWT(t, appKey(), map[string]any{"alg": "RS256", "typ": "JWS"}, good), "Bearer", 401, "A JSON web token could not be decoded"},
		{"tampered claims", tamper(t, signJWT(t, appKey(), hdr, good)), "Bearer", 401, "A JSON web token could not be decoded"},
		{"garbage", "not-a-jwt", "Bearer", 401, "A JSON web token could not be decoded"},
		{"token scheme", signJWT(t, appKey(), hdr, good), "token", 401, "A JSON web token could not be decoded"},
		{"a static token", static, "Bearer", 401, "A JSON web token could not be decoded"},
	} {
		r := e.call("POST", "/app/installations/42/access_tokens", "", nil, func(r *http.Request) {
			r.Header.Set("Authorization", tc.scheme+" "+tc.jwt)
		})
		if r.status != tc.status || (tc.msg != "" && r.message(t) != tc.msg) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	if r := e.call("POST", "/app/installations/7/access_tokens", e.appJWT(), nil); r.status != 404 {
		t.Errorf("unknown installation: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/app/installations/42/access_tokens", "", nil); r.status != 401 {
		t.Errorf("no JWT: %d %s", r.status, r.body)
	}
}

// tamper rewrites the claims of a signed JWT (a later exp) and keeps the
// old signature.
func tamper(t *testing.T, jwt string) string {
	t.Helper()
	parts := strings.Split(jwt, ".")
	claims := base64.RawURLEncoding.EncodeToString([]byte(`{"iat":1,"exp":99999999999,"iss":"12345"}`))
	return parts[0] + "." + claims + "." + parts[2]
}

// A minted token opens git too when fakegit asks ValidToken, which is how
// the product's tests share one credential between API and git.
func TestMintedTokenOpensGit(t *testing.T) {
	e := newEnv(t)
	git := fakegit.New(t, fakegit.Options{Token: func(tok, repo string) (bool, bool) {
		ok := e.srv.ValidToken(tok)
		return ok, ok
	}})
	git.CreateRepo(t, "acme/widgets", "main", map[string]string{"README.md": "hi\n"})
	tok := e.mint(nil)
	lsRemote := func(token string) error {
		cmd := exec.Command("git", "ls-remote", git.RepoURL("acme/widgets"))
		auth := base64.StdEncoding.EncodeToString([]byte("x-access-token:" + token))
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(t.TempDir()),
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Basic " + auth,
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("git ls-remote: %s", out)
		}
		return err
	}
	if err := lsRemote(tok); err != nil {
		t.Errorf("ls-remote with a minted token: %v", err)
	}
	e.clock.Advance(time.Hour)
	if err := lsRemote(tok); err == nil {
		t.Error("ls-remote with an expired token succeeded")
	}
}
