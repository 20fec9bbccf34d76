package github

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAppTokensMintOnceAndCache(t *testing.T) {
	h := newHarness(t)
	c := h.client(h.appTokens(testKey()))
	ctx := context.Background()
	if _, _, err := c.OpenOrUpdate(ctx, "acme", "widgets", NewPullRequest{Title: "t", Head: "sandbot/x", Base: "main"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "acme", "widgets", 1); err != nil {
		t.Fatal(err)
	}
	if n := h.mints(); n != 1 {
		t.Errorf("minted %d tokens, want 1 (calls %q)", n, h.fake.Calls())
	}
	hdrs := h.recorded()
	if len(hdrs) != 3 {
		t.Fatalf("%d requests", len(hdrs))
	}
	jwt, ok := strings.CutPrefix(hdrs[0].Get("Authorization"), "Bearer ")
	if !ok {
		t.Fatalf("mint Authorization = %q", hdrs[0].Get("Authorization"))
	}
	for _, hdr := range hdrs[1:] {
		if a := hdr.Get("Authorization"); !strings.HasPrefix(a, "Bearer ghs_") {
			t.Errorf("API call Authorization = %q, want the installation token", a)
		}
	}
	// The JWT says exactly what the contract says.
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("JWT has %d parts", len(parts))
	}
	var header map[string]any
	var claims struct {
		Iat, Exp int64
		Iss      string
	}
	decodeSeg(t, parts[0], &header)
	decodeSeg(t, parts[1], &claims)
	now := h.clock.Now().Unix()
	if header["alg"] != "RS256" || header["typ"] != "JWT" || claims.Iat != now-60 || claims.Exp != now+540 || claims.Iss != testApp {
		t.Errorf("JWT header %v, claims %+v (now %d)", header, claims, now)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&testKey().PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		t.Errorf("signature: %v", err)
	}
}

func decodeSeg(t *testing.T, seg string, v any) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func TestAppTokensRefreshBeforeExpiry(t *testing.T) {
	h := newHarness(t)
	a := h.appTokens(testKey())
	ctx := context.Background()
	first, err := a.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The token lasts an hour and is replaced 5 minutes before that.
	h.clock.Advance(54 * time.Minute)
	if tok, err := a.Token(ctx); err != nil || tok != first || h.mints() != 1 {
		t.Errorf("at 54 min: same token %v, %v, %d mints", tok == first, err, h.mints())
	}
	h.clock.Advance(2 * time.Minute)
	second, err := a.Token(ctx)
	if err != nil || second == first || h.mints() != 2 {
		t.Errorf("at 56 min: new token %v, %v, %d mints", second != first, err, h.mints())
	}
	if !h.fake.ValidToken(second) {
		t.Error("the fake does not know the new token")
	}
}

func TestAppTokensConcurrentCallersMintOnce(t *testing.T) {
	h := newHarness(t)
	a := h.appTokens(testKey())
	var wg sync.WaitGroup
	toks := make([]string, 8)
	errs := make([]error, 8)
	for i := range toks {
		wg.Go(func() { toks[i], errs[i] = a.Token(context.Background()) })
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != toks[0] {
			t.Errorf("caller %d: %q, %v", i, toks[i], errs[i])
		}
	}
	if n := h.mints(); n != 1 {
		t.Errorf("minted %d tokens", n)
	}
}

func TestAppTokensRejectedJWT(t *testing.T) {
	h := newHarness(t)
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	c := h.client(h.appTokens(otherKey))
	_, err = c.Get(context.Background(), "acme", "widgets", 1)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 401 || apiErr.Message != "A JSON web token could not be decoded" {
		t.Fatalf("err = %v", err)
	}
	want := "github: GET /repos/acme/widgets/pulls/1: get token: github: mint installation token: " +
		"GitHub: 401 A JSON web token could not be decoded (POST /app/installations/42/access_tokens)"
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
	jwt := strings.TrimPrefix(h.recorded()[0].Get("Authorization"), "Bearer ")
	if len(jwt) < 100 || strings.Contains(fmt.Sprintf("%v %+v", err, c.Tokens), jwt) {
		t.Error("the JWT leaks into the error")
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v", c.Tokens, c.Tokens, c), "PrivateKey") {
		t.Error("printing the token source shows the key")
	}
}

func TestAppTokensWaiterGivesUp(t *testing.T) {
	h := newHarness(t)
	a := h.appTokens(testKey())
	a.lock <- struct{}{} // another caller is minting
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Token(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	<-a.lock
	if h.mints() != 0 {
		t.Error("minted while the lock was held")
	}
	if _, err := AppTokens(h.srv.URL, testApp, testInst, nil, nil).Token(context.Background()); err == nil {
		t.Error("no key, yet a token")
	}
}

func TestParsePrivateKey(t *testing.T) {
	key := testKey()
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(typ string, der []byte, hdr map[string]string) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der, Headers: hdr})
	}
	for _, in := range [][]byte{
		enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), nil),
		enc("PRIVATE KEY", pkcs8, nil),
		append([]byte("leading text\n"), enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key), nil)...),
	} {
		got, err := ParsePrivateKey(in)
		if err != nil || !got.Equal(key) {
			t.Errorf("ParsePrivateKey: %v", err)
		}
	}
	for _, tc := range []struct {
		name, want string
		in         []byte
	}{
		{"not PEM", "no PEM block", []byte("hello")},
		{"EC key", "GitHub Apps use RSA", enc("PRIVATE KEY", ecDER, nil)},
		{"certificate", `"CERTIFICATE"`, enc("CERTIFICATE", []byte{1, 2, 3}, nil)},
		{"encrypted", "encrypted", enc("RSA PRIVATE KEY", []byte{1, 2, 3}, map[string]string{"Proc-Type": "4,ENCRYPTED", "DEK-Info": "AES-128-CBC,00"})},
		{"corrupt PKCS#1", "PKCS#1", enc("RSA PRIVATE KEY", pkcs8[:40], nil)},
		{"corrupt PKCS#8", "PKCS#8", enc("PRIVATE KEY", pkcs8[:40], nil)},
	} {
		_, err := ParsePrivateKey(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), base64.StdEncoding.EncodeToString(pkcs8[:20])) {
			t.Errorf("%s: the error quotes the key", tc.name)
		}
	}
}
