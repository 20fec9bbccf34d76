package github

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// JWT and cache timing: iat a minute back absorbs clock skew, exp 9
// minutes ahead stays under GitHub's 10-minute cap (exactly 10 has been
// seen to fail), and a cached token is replaced 5 minutes before it
// expires so a clone or push that starts with it can finish.
const (
	jwtBackdate = 60 * time.Second
	jwtLifetime = 9 * time.Minute
	tokenMargin = 5 * time.Minute
)

// TokenSource supplies the token of a GitHub call (and of the worker's
// git commands). Implementations must be safe for concurrent use and must
// keep the token out of their errors.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// StaticToken is a TokenSource for a fixed token (a personal access
// token). It prints as "github.StaticToken(redacted)", so logging it by
// accident leaks nothing.
func StaticToken(tok string) TokenSource { return staticToken{tok: tok} }

type staticToken struct{ tok string }

func (s staticToken) Token(context.Context) (string, error) {
	if s.tok == "" {
		return "", errors.New("github: the static token is empty")
	}
	return s.tok, nil
}

func (staticToken) String() string   { return "github.StaticToken(redacted)" }
func (staticToken) GoString() string { return "github.StaticToken(redacted)" }

// AppTokens mints installation tokens for a GitHub App: a JWT signed
// RS256 with claims iat=now-60s, exp=now+9min, iss=appID, exchanged at
// POST {baseURL}/app/installations/{id}/access_tokens. It caches the token
// until 5 minutes before its expires_at. It is safe for concurrent use:
// one caller mints while the others wait (or give up with their context).
// A nil hc means http.DefaultClient.
func AppTokens(baseURL, appID string, installationID int64, key *rsa.PrivateKey, hc *http.Client) TokenSource {
	if hc == nil {
		hc = http.DefaultClient
	}
	if baseURL == "" {
		baseURL = defaultURL
	}
	return &appTokens{
		baseURL: baseURL, appID: appID, installationID: installationID,
		key: key, hc: hc, now: time.Now, lock: make(chan struct{}, 1),
	}
}

type appTokens struct {
	baseURL        string
	appID          string
	installationID int64
	key            *rsa.PrivateKey
	hc             *http.Client
	now            func() time.Time // replaced in tests

	// lock is a one-slot semaphore rather than a mutex so a waiter can
	// give up when its context ends; it guards tok and expires.
	lock    chan struct{}
	tok     string
	expires time.Time
}

func (a *appTokens) String() string {
	return fmt.Sprintf("github.AppTokens(app %s, installation %d)", a.appID, a.installationID)
}
func (a *appTokens) GoString() string { return a.String() }

func (a *appTokens) Token(ctx context.Context) (string, error) {
	select {
	case a.lock <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("github: installation token: %w", ctx.Err())
	}
	defer func() { <-a.lock }()
	now := a.now()
	if a.tok != "" && now.Before(a.expires.Add(-tokenMargin)) {
		return a.tok, nil
	}
	tok, expires, err := a.mint(ctx, now)
	if err != nil {
		return "", fmt.Errorf("github: mint installation token: %w", err)
	}
	a.tok, a.expires = tok, expires
	return tok, nil
}

func (a *appTokens) mint(ctx context.Context, now time.Time) (string, time.Time, error) {
	if a.key == nil || a.appID == "" {
		return "", time.Time{}, errors.New("the App ID or private key is missing")
	}
	jwt, err := signJWT(a.key, a.appID, now)
	if err != nil {
		return "", time.Time{}, err
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	path := fmt.Sprintf("/app/installations/%d/access_tokens", a.installationID)
	if err := send(ctx, a.hc, a.baseURL, jwt, request{method: http.MethodPost, path: path, out: &out}); err != nil {
		return "", time.Time{}, err
	}
	if out.Token == "" || out.ExpiresAt.IsZero() {
		return "", time.Time{}, fmt.Errorf("POST %s: the answer has no token or expires_at", path)
	}
	return out.Token, out.ExpiresAt, nil
}

// signJWT returns the App's JWT, signed with the standard library only.
func signJWT(key *rsa.PrivateKey, appID string, now time.Time) (string, error) {
	enc := base64.RawURLEncoding
	claims, err := json.Marshal(struct {
		IAT int64  `json:"iat"`
		EXP int64  `json:"exp"`
		ISS string `json:"iss"`
	}{now.Add(-jwtBackdate).Unix(), now.Add(jwtLifetime).Unix(), appID})
	if err != nil {
		return "", fmt.Errorf("encode JWT claims: %w", err)
	}
	signing := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign JWT: %w", err)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// ParsePrivateKey reads an App's private key from PEM: PKCS#1 ("RSA
// PRIVATE KEY", what GitHub lets you download) or PKCS#8 ("PRIVATE KEY",
// what openssl pkcs8 and most secret stores produce). Errors never quote
// the key.
func ParsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("github: private key: no PEM block found")
	}
	if strings.Contains(block.Headers["Proc-Type"], "ENCRYPTED") {
		return nil, errors.New("github: private key: encrypted PEM keys are not supported")
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("github: private key: PKCS#1: %w", err)
		}
		return k, nil
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("github: private key: PKCS#8: %w", err)
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("github: private key: PKCS#8 holds a %T, GitHub Apps use RSA", k)
		}
		return rk, nil
	default:
		return nil, fmt.Errorf("github: private key: PEM block %q is not RSA PRIVATE KEY or PRIVATE KEY", block.Type)
	}
}
