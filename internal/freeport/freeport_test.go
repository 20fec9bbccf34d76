package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The ports are distinct, free (each can be listened on), and below the
// ephemeral range, where a restarted server's port cannot be taken by an
// outgoing connection.
func TestPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	hi := ephemeralLow()
	if hi <= low {
		t.Fatalf("this machine's ephemeral range starts at %d, not above %d: the test cannot check where ports come from", hi, low)
	}
	ports, err := Ports(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d returned twice in %v", p, ports)
		}
		seen[p] = true
		if p < low || p >= hi {
			t.Fatalf("port %d outside [%d, %d)", p, low, hi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		_ = l.Close()
	}
}
