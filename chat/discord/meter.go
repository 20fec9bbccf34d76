package discord

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandbot/sandbot/internal/metrics"
)

// meter counts every REST request the adapter makes (discordgo retries
// and its own rate-limit sleeps happen above it, so each attempt counts
// once): the call as its HTTP method and top-level resource, whether it
// failed, and the Retry-After of a 429.
type meter struct{ base http.RoundTripper }

func (m meter) RoundTrip(req *http.Request) (*http.Response, error) {
	base := m.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	metrics.ChatCall(Platform, callName(req), err != nil || resp.StatusCode >= 400)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		metrics.ChatRateLimited(Platform, retryAfter(resp.Header))
	}
	return resp, err
}

// resources are the REST resources whose names label calls; paths carry
// IDs and interaction tokens, which must never become label values.
var resources = map[string]bool{
	"applications": true, "channels": true, "gateway": true, "guilds": true,
	"interactions": true, "users": true, "webhooks": true,
}

// callName is "METHOD resource" for a Discord REST path such as
// /api/v10/channels/123/messages ("PATCH channels"); "METHOD other" for
// anything else.
func callName(req *http.Request) string {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) > 0 && parts[0] == "api" {
		parts = parts[1:]
	}
	if len(parts) > 0 && strings.HasPrefix(parts[0], "v") {
		if _, err := strconv.Atoi(parts[0][1:]); err == nil {
			parts = parts[1:]
		}
	}
	res := "other"
	if len(parts) > 0 && resources[parts[0]] {
		res = parts[0]
	}
	return req.Method + " " + res
}

// retryAfter reads a 429's Retry-After (seconds, possibly fractional).
func retryAfter(h http.Header) time.Duration {
	for _, k := range []string{"Retry-After", "X-RateLimit-Reset-After"} {
		if f, err := strconv.ParseFloat(h.Get(k), 64); err == nil && f > 0 {
			return time.Duration(f * float64(time.Second))
		}
	}
	return 0
}
