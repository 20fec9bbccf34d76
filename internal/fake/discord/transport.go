package fakediscord

import (
	"net/http"
	"net/url"
	"strings"
)

// discordHosts are the hosts the rewriting transport sends to the fake.
var discordHosts = map[string]bool{
	"discord.com": true, "discordapp.com": true, "www.discord.com": true, "canary.discord.com": true,
}

// Transport returns an http.RoundTripper that sends requests for
// discord.com to the fake and everything else to base (nil:
// http.DefaultTransport). It rewrites both URL.Host and Host, so the fake
// sees its own address and advertises a gateway URL the client can dial.
func (s *Server) Transport(base http.RoundTripper) http.RoundTripper {
	u, _ := url.Parse(s.srv.URL)
	return Rewrite(u, base)
}

// Client returns an http.Client for discordgo.Session.Client that talks
// to the fake.
func (s *Server) Client() *http.Client {
	return &http.Client{Transport: s.Transport(nil)}
}

// Rewrite returns a RoundTripper that sends requests for discord.com to
// target (scheme and host), leaving path and query alone.
func Rewrite(target *url.URL, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &rewriter{target: target, base: base}
}

type rewriter struct {
	target *url.URL
	base   http.RoundTripper
}

func (rw *rewriter) RoundTrip(req *http.Request) (*http.Response, error) {
	if !discordHosts[strings.ToLower(req.URL.Hostname())] {
		return rw.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.URL.Scheme = rw.target.Scheme
	r.URL.Host = rw.target.Host
	r.Host = rw.target.Host
	return rw.base.RoundTrip(r)
}
