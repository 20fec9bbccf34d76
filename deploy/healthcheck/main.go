// Command healthcheck is the container health check of the sandbot images
// (installed as /usr/local/bin/sandbot-healthcheck). The worker and bot
// images have no shell, curl or wget, so Docker's HEALTHCHECK and Compose's
// healthcheck run this instead: it asks the process in the same container
// for /readyz (or the path given as its argument) on the address in
// SANDBOT_METRICS_ADDR and exits 0 on 200, 1 otherwise, printing the answer
// (which names the failing check) for `docker inspect`.
//
//	sandbot-healthcheck            # GET /readyz
//	sandbot-healthcheck /healthz   # liveness only
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// timeout bounds one probe; Compose's healthcheck timeout is longer.
const timeout = 5 * time.Second

func main() {
	path := "/readyz"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	msg, err := probe(os.Getenv("SANDBOT_METRICS_ADDR"), path)
	if msg != "" {
		fmt.Println(msg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbot-healthcheck:", err)
		os.Exit(1)
	}
}

// probe GETs path from the health server listening on addr (a listen
// address such as ":9090"; a wildcard host is reached on loopback) and
// returns the body; an error unless the answer is 200. It speaks HTTP/1.0
// over a plain connection: net/http would triple the size of this binary,
// which every image carries.
func probe(addr, path string) (string, error) {
	hostport, err := target(addr)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := "http://" + hostport + path
	conn, err := net.DialTimeout("tcp", hostport, timeout)
	if err != nil {
		return "", fmt.Errorf("%s: %w", u, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: sandbot-healthcheck\r\n\r\n", path, hostport); err != nil {
		return "", fmt.Errorf("%s: %w", u, err)
	}
	resp, err := io.ReadAll(io.LimitReader(conn, 64<<10))
	if err != nil {
		return "", fmt.Errorf("%s: %w", u, err)
	}
	status, body, err := parse(string(resp))
	if err != nil {
		return "", fmt.Errorf("%s: %w", u, err)
	}
	if status != "200" {
		return body, fmt.Errorf("%s: HTTP %s", u, status)
	}
	return body, nil
}

// parse splits an HTTP/1.x response into its status code and its body
// (trimmed; at most a few KiB are kept).
func parse(resp string) (status, body string, err error) {
	line, rest, _ := strings.Cut(resp, "\r\n")
	proto, code, ok := strings.Cut(line, " ")
	if !ok || !strings.HasPrefix(proto, "HTTP/1.") || len(code) < 3 {
		return "", "", fmt.Errorf("not an HTTP response: %q", line)
	}
	_, body, _ = strings.Cut(rest, "\r\n\r\n")
	body = strings.TrimSpace(body)
	if len(body) > 4096 {
		body = body[:4096]
	}
	return code[:3], body, nil
}

// target is the host:port to reach the health server listening on addr.
func target(addr string) (string, error) {
	if addr == "" {
		return "", fmt.Errorf("SANDBOT_METRICS_ADDR is empty, so the process serves no health endpoint; set it to a listen address such as :9090")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("SANDBOT_METRICS_ADDR %q: %w", addr, err)
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}
