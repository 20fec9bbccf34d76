package attach

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/session"
)

// fileHost is a file host on loopback that records whether it was reached
// and with which Authorization header.
type fileHost struct {
	*httptest.Server
	hits atomic.Int64
	auth atomic.Value
}

func newFileHost(t *testing.T, body string) *fileHost {
	t.Helper()
	h := &fileHost{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hits.Add(1)
		h.auth.Store(r.Header.Get("Authorization"))
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(h.Close)
	return h
}

func fetch(t *testing.T, f *Fetcher, a session.Attachment, max int64) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	_, _, err := f.Fetch(context.Background(), a, max, &buf)
	return buf.String(), err
}

// TestFetchFromTheConfiguredFileHost: a Slack file from the configured
// base (the fake's origin) comes down with the bot token; a Discord file
// from its base comes down without it.
func TestFetchFromTheConfiguredFileHost(t *testing.T) {
	slack, discord := newFileHost(t, "slack bytes"), newFileHost(t, "discord bytes")
	f, err := New(Config{SlackToken: "xoxb-test", SlackBase: slack.URL + "/api/", DiscordBase: discord.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := fetch(t, f, session.Attachment{Platform: "slack", Name: "a.txt", URL: slack.URL + "/files-pri/T-F1/download/a.txt"}, 100)
	if err != nil || got != "slack bytes" || slack.auth.Load() != "Bearer xoxb-test" {
		t.Fatalf("slack: %q %v, auth %q", got, err, slack.auth.Load())
	}
	got, err = fetch(t, f, session.Attachment{Platform: "discord", Name: "b.txt", URL: discord.URL + "/attachments/1/2/b.txt"}, 100)
	if err != nil || got != "discord bytes" || discord.auth.Load() != "" {
		t.Fatalf("discord: %q %v, auth %q", got, err, discord.auth.Load())
	}
	if _, err := fetch(t, f, session.Attachment{Platform: "discord", Name: "b.txt", URL: discord.URL + "/x"}, 5); !errors.Is(err, sandbox.ErrAttachmentTooLarge) {
		t.Fatalf("over the cap: %v", err)
	}
}

// TestFetchRefusesOtherHosts is the SSRF attack: a descriptor that points
// the worker at the Temporal frontend on loopback, at the cloud metadata
// service, at another port of the fake's own host, at another platform's
// host, or at a real host over http, is refused, the target is never
// reached, and the Slack token goes nowhere but Slack's file host.
func TestFetchRefusesOtherHosts(t *testing.T) {
	slack := newFileHost(t, "ok")
	temporal := newFileHost(t, "frontend") // stands in for 127.0.0.1:7233
	discord := newFileHost(t, "discord")
	f, err := New(Config{SlackToken: "xoxb-secret", SlackBase: slack.URL + "/api/", DiscordBase: discord.URL})
	if err != nil {
		t.Fatal(err)
	}
	cases := []session.Attachment{
		{Platform: "slack", URL: temporal.URL + "/"},
		{Platform: "slack", URL: "http://127.0.0.1:7233/"},
		{Platform: "slack", URL: "http://169.254.169.254/latest/meta-data/"},
		{Platform: "slack", URL: "http://files.slack.com/files-pri/x"}, // not https
		{Platform: "slack", URL: "https://files.slack.com.evil.example/x"},
		{Platform: "slack", URL: "https://user:pw@files.slack.com/x"},
		{Platform: "slack", URL: discord.URL + "/attachments/1/2/x"}, // Discord's host with Slack's token
		{Platform: "discord", URL: slack.URL + "/files-pri/x"},
		{Platform: "discord", URL: "https://cdn.discordapp.com:8443/x"},
		{Platform: "github", URL: "https://files.slack.com/x"},
		{Platform: "slack", URL: ""},
		{Platform: "slack", URL: "file:///etc/passwd"},
	}
	for _, a := range cases {
		a.Name = "f"
		if _, err := fetch(t, f, a, 100); !errors.Is(err, ErrRefused) {
			t.Errorf("%s %q: err = %v, want refused", a.Platform, a.URL, err)
		}
	}
	if n := temporal.hits.Load(); n != 0 {
		t.Fatalf("the loopback service was reached %d times", n)
	}
	if discord.hits.Load() != 0 || slack.hits.Load() != 0 {
		t.Fatalf("a refused URL reached a file host: slack %d, discord %d", slack.hits.Load(), discord.hits.Load())
	}
}

// TestFetchRefusesRedirectsAway: the allowed host redirecting to loopback
// elsewhere (or anywhere not allowed) is refused before the request.
func TestFetchRefusesRedirectsAway(t *testing.T) {
	slack := newFileHost(t, "ok")
	inner := newFileHost(t, "inner")
	f, err := New(Config{SlackToken: "xoxb-secret", SlackBase: slack.URL + "/api/"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = fetch(t, f, session.Attachment{Platform: "slack", Name: "f", URL: slack.URL + "/redirect?to=" + inner.URL + "/"}, 100)
	if !errors.Is(err, ErrRefused) || inner.hits.Load() != 0 {
		t.Fatalf("redirect to %s: %v, hits %d", inner.URL, err, inner.hits.Load())
	}
}

// TestDialGuardRefusesPrivateAddresses: a real file host's name that
// resolves somewhere private (a poisoned resolver, DNS rebinding) is
// refused at connect time; the configured fake's own address is not.
func TestDialGuardRefusesPrivateAddresses(t *testing.T) {
	f, err := New(Config{SlackBase: "http://127.0.0.1:8080/api/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"127.0.0.1:443", "10.0.0.5:443", "169.254.169.254:80", "192.168.1.1:443", "[::1]:443", "100.64.1.1:443", "0.0.0.0:443", "127.0.0.1:8081"} {
		if err := f.checkDial("tcp", addr, nil); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want refused", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:8080", "52.1.2.3:443", net.JoinHostPort("2600:1f18::1", "443")} {
		if err := f.checkDial("tcp", addr, nil); err != nil {
			t.Errorf("%s: %v, want allowed", addr, err)
		}
	}
}

// TestSlackLoginPageIsNotAFile: Slack answers a token without files:read
// with its sign-in page; that is an error naming the scope, not a file.
func TestSlackLoginPageIsNotAFile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<html>sign in</html>"))
	}))
	defer srv.Close()
	f, _ := New(Config{SlackToken: "xoxb-1", SlackBase: srv.URL + "/api/"})
	_, err := fetch(t, f, session.Attachment{Platform: "slack", Name: "a.png", MimeType: "image/png", URL: srv.URL + "/f"}, 100)
	if err == nil || !strings.Contains(err.Error(), "files:read") {
		t.Fatalf("err = %v", err)
	}
}
