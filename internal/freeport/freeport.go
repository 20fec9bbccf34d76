// Package freeport picks loopback ports for servers that tests and the
// chaos suite start, stop and start again on the same port.
//
// A port from ":0" is drawn from the system's ephemeral range, and while
// its server is down any outgoing connection may take it as its local end
// (or another ":0" listener may): CI's cluster restart test once found its
// frontend's HTTP port "already in use". These ports are drawn below that
// range instead, where only another picker choosing the same port at
// random can collide.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// low is the first port drawn from (below it sit well-known services).
const low = 20000

// Ports returns n distinct free ports on 127.0.0.1, below the ephemeral
// range where it can (from ":0" when the range is unknown or every draw
// was taken).
func Ports(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	hi := ephemeralLow()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		addr := "127.0.0.1:0"
		if hi > low && tries < 200 {
			addr = fmt.Sprintf("127.0.0.1:%d", low+rand.IntN(hi-low))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "127.0.0.1:0" {
				return nil, fmt.Errorf("free port on 127.0.0.1: %w", err)
			}
			continue // taken: draw another
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// Addr is one free "127.0.0.1:port" address, as Ports picks it.
func Addr() (string, error) {
	p, err := Ports(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p[0])), nil
}

// ephemeralLow is the first port of the system's ephemeral range (0 when
// unknown).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.Atoi(f[0])
	return v
}
