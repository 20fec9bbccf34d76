package app

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// The debug server serves the heap profile on its own address, and the
// health server does not serve profiles (they are kept off
// http.DefaultServeMux and off the metrics port).
func TestServeDebug(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	if s, err := ServeDebug("", log); s != nil || err != nil {
		t.Fatalf("an empty address serves %v, %v; want nothing", s, err)
	}
	s, err := ServeDebug("127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	resp, err := http.Get("http://" + s.Addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "HeapAlloc") {
		t.Errorf("heap profile: %s\n%.200s", resp.Status, body)
	}

	h, err := ServeHealth(Health{Addr: "127.0.0.1:0"}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	resp, err = http.Get("http://" + h.Addr + "/debug/pprof/heap")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("the health server serves profiles")
	}
}
