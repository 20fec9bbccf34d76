package pgtest

import (
	"strings"
	"testing"
)

// TestServer starts a throwaway server, uses it, restarts it cleanly and
// after a crash, and finds the data still there.
func TestServer(t *testing.T) {
	s := Start(t, Options{User: "tester"})
	if err := s.CreateDatabase("things"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SQL("things", "CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	out, err := s.SQL("things", "SELECT v FROM t")
	if err != nil || strings.TrimSpace(out) != "kept" {
		t.Fatalf("after restarts: %q, %v", out, err)
	}

	// Password authentication over TCP is enforced.
	wrong := &Server{Host: s.Host, Port: s.Port, User: s.User, Password: "not-the-password", bin: s.bin, base: s.base, cred: s.cred}
	if _, err := wrong.SQL("things", "SELECT 1"); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("a wrong password: %v", err)
	}
}
