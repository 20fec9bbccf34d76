package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// Validate checks every variable role reads and returns every problem at
// once, values Load could not parse included, each as
// "<variable>: what is wrong; use what is allowed". Variables other
// processes read are not checked: a bot does not care about the model.
func (c *Config) Validate(role Role) error {
	var errs []error
	for _, v := range registry {
		if v.Readers&role == 0 {
			continue
		}
		if msg, ok := c.problems[v.Name]; ok {
			errs = append(errs, fmt.Errorf("%s: %s", v.Name, msg))
			continue
		}
		if v.check == nil {
			continue
		}
		var p probs
		v.check(c, &p)
		for _, msg := range p {
			errs = append(errs, fmt.Errorf("%s: %s", v.Name, msg))
		}
	}
	return errors.Join(errs...)
}

// probs collects one variable's problems; the variable's name is added by
// Validate.
type probs []string

func (p *probs) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func checkNotEmpty(p *probs, s, use string) {
	if s == "" {
		p.add("is empty; use %s", use)
	}
}

// checkPositive reports a zero or negative duration; it returns whether d
// is fine.
func checkPositive(p *probs, d time.Duration, example string) bool {
	if d <= 0 {
		p.add("%s is not allowed; use a positive duration such as %s", d, example)
		return false
	}
	return true
}

func checkMin(p *probs, n, lowest int, unit string) {
	if n < lowest {
		p.add("%d is too low; use at least %d %s", n, lowest, unit)
	}
}

func checkHostPort(p *probs, addr, use string, required bool) {
	if addr == "" {
		if required {
			p.add("is empty; use %s", use)
		}
		return
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		p.add("%q is not host:port; use %s", addr, use)
	}
}

// checkLoopbackAddr reports an address that is not host:port, or whose
// host is not a loopback IP or "localhost" (an empty host would listen on
// every interface).
func checkLoopbackAddr(p *probs, addr, use string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		p.add("%q is not host:port; use %s", addr, use)
		return
	}
	if host == "localhost" {
		return
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		p.add("%q does not listen on loopback only; use %s", addr, use)
	}
}

// checkPort reports a port out of range; it returns whether n is fine.
func checkPort(p *probs, n int, use string) bool {
	if n < 0 || n > 65535 {
		p.add("%d is not a port; use %s", n, use)
		return false
	}
	return true
}

// checkHTTPURL reports a value that is not an absolute http(s) URL (and,
// with slash, one that does not end in "/"). The value is quoted: URLs
// checked here carry no credentials by convention, but user info is cut.
func checkHTTPURL(p *probs, raw, example string, slash bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.add("%q is not an http(s) URL; use a URL such as %s", redact(raw, u, err), example)
		return
	}
	if slash && raw[len(raw)-1] != '/' {
		p.add("%q does not end in /; use a URL such as %s", redact(raw, u, nil), example)
	}
}

// redact drops user info from a URL before it is shown.
func redact(raw string, u *url.URL, err error) string {
	if err != nil || u == nil || u.User == nil {
		return raw
	}
	v := *u
	v.User = nil
	return v.String()
}

func known(backend string) bool { return slices.Contains(KnownBackends, backend) }

func contains(list []string, s string) bool { return slices.Contains(list, s) }

func cleanPath(p string) string { return path.Clean(p) }

// whenDocker runs check only when the worker serves the docker backend.
func whenDocker(check func(*Config, *probs)) func(*Config, *probs) {
	return func(c *Config, p *probs) {
		if contains(c.Sandbox.Backends, "docker") {
			check(c, p)
		}
	}
}

// checkWorkdir reports a set workspace path that is not a clean absolute
// path other than the root.
func checkWorkdir(p *probs, w, example string) {
	if w != "" && (!strings.HasPrefix(w, "/") || cleanPath(w) != w || w == "/") {
		p.add("%q is not a clean absolute path other than /; use a path such as %s", w, example)
	}
}

// checkCloudKey checks a cloud backend's API key on a worker: it must be
// set when SANDBOT_SANDBOX_BACKENDS lists the backend, and look like the
// provider's keys. The provider itself checks it at start-up.
func checkCloudKey(p *probs, c *Config, backend, key, prefix, where string) {
	switch {
	case key == "" && contains(c.Sandbox.Backends, backend):
		p.add("is not set, but SANDBOT_SANDBOX_BACKENDS lists %s; set the API key from %s, or remove %s", backend, where, backend)
	case key != "" && !strings.HasPrefix(key, prefix):
		p.add("does not start with %q; use an API key from %s", prefix, where)
	}
}

// checkReadableFile reports a set path that cannot be read.
func checkReadableFile(p *probs, path string) {
	if path == "" {
		return
	}
	if _, err := os.ReadFile(path); err != nil {
		p.add("cannot read %s (%v); use the path of a readable PEM file", path, errors.Unwrap(err))
	}
}
