package fakeslack

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Signing controls how an HTTP-mode request is signed.
type Signing struct {
	// Secret signs the request; "" means the server's SigningSecret.
	Secret string
	// Timestamp is X-Slack-Request-Timestamp; zero means now.
	Timestamp time.Time
	// Unsigned omits both signature headers.
	Unsigned bool
	// Retry sets X-Slack-Retry-Num (and X-Slack-Retry-Reason: http_timeout)
	// as Slack does on redelivery.
	Retry int
}

// Sign returns the X-Slack-Signature value for body sent at ts:
// "v0=" + hex(HMAC-SHA256(secret, "v0:<ts>:<body>")).
func Sign(secret string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + strconv.FormatInt(ts.Unix(), 10) + ":"))
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// HTTPResult is the app's answer to an HTTP-mode request.
type HTTPResult struct {
	Status int
	Body   string
	// Latency is the time until the app answered: Slack wants this under 3 s.
	Latency time.Duration
}

// PostSigned sends body to an app's request URL the way Slack does, signed
// per sig.
func (s *Server) PostSigned(ctx context.Context, target, contentType string, body []byte, sig Signing) (HTTPResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return HTTPResult{}, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	if !sig.Unsigned {
		secret := sig.Secret
		if secret == "" {
			secret = s.opts.SigningSecret
		}
		ts := sig.Timestamp
		if ts.IsZero() {
			ts = time.Now()
		}
		req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("X-Slack-Signature", Sign(secret, ts, body))
	}
	if sig.Retry > 0 {
		req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(sig.Retry))
		req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return HTTPResult{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return HTTPResult{Status: resp.StatusCode, Body: string(b), Latency: time.Since(start)}, nil
}

// PostEvent delivers an Events API payload (event_callback or
// url_verification) to the app's events URL.
func (s *Server) PostEvent(ctx context.Context, target string, payload json.RawMessage, sig Signing) (HTTPResult, error) {
	return s.PostSigned(ctx, target, "application/json", payload, sig)
}

// PostInteraction delivers an interactivity payload as Slack does over HTTP:
// a form with one field, payload=<json>.
func (s *Server) PostInteraction(ctx context.Context, target string, payload json.RawMessage, sig Signing) (HTTPResult, error) {
	body := url.Values{"payload": {string(payload)}}.Encode()
	return s.PostSigned(ctx, target, "application/x-www-form-urlencoded", []byte(body), sig)
}

// PostSlashCommand delivers a slash command as a signed form post.
func (s *Server) PostSlashCommand(ctx context.Context, target string, cmd SlashCommand, sig Signing) (HTTPResult, error) {
	form := url.Values{}
	for k, v := range s.slashPayload(cmd) {
		form.Set(k, v)
	}
	return s.PostSigned(ctx, target, "application/x-www-form-urlencoded", []byte(form.Encode()), sig)
}
