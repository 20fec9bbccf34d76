package integration

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// A worker keeps at most SANDBOT_SESSION_CACHE sessions in memory. Every
// idle session the Temporal SDK's workflow cache holds keeps its state
// (the transcript, a fork's whole seed) and its goroutines, and the SDK's
// own bound is 10,000: before the setting, a worker's memory grew with
// every session it had served (the soak's idle forks, docs/RELIABILITY.md).
// Past the bound the least recently used session is evicted, and its next
// turn replays its history. The cache's size is the SDK's gauge
// temporal_sticky_cache_size on the worker's /metrics. A real cmd/worker
// process: the cache is the process's, and this test binary's embedded
// server made it with the SDK's default before any test ran.
func TestIdleSessionsBeyondTheCacheAreEvicted(t *testing.T) {
	const cache, sessions = 3, 8
	bin := buildWorkerTB(t)
	s := newStack(t, func(c *config.Config) { c.Session.ApprovalMode = "never" })
	s.worker.Stop()
	s.model.SetResponder(func(fakeopenai.RecordedRequest) fakeopenai.Step { return fakeopenai.FinalStep("ok") })
	metrics := freeLoopbackAddr(t)
	proc := exec.Command(bin)
	proc.Env = s.workerProcEnv("SANDBOT_LOG_LEVEL=error", "SANDBOT_METRICS_ADDR="+metrics,
		"SANDBOT_SESSION_CACHE="+strconv.Itoa(cache))
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })

	most := 0.0
	for i := range sessions {
		th := s.thread(fmt.Sprintf("cached-%d", i))
		s.say(th, fmt.Sprintf("ev-cached-%d-1", i), "hello")
		s.waitState(th, th.Thread+"'s first turn", func(ts session.TurnState) bool { return ts.Turn == 1 && done(ts) })
		most = max(most, stickyCacheSize(t, metrics))
	}
	if most == 0 || most > cache {
		t.Fatalf("the worker's workflow cache held up to %v of %d idle sessions; its bound is %d", most, sessions, cache)
	}
	// The first session was evicted long ago: its next turn replays it.
	th := s.thread("cached-0")
	s.say(th, "ev-cached-0-2", "again")
	ts := s.waitState(th, "cached-0's second turn", func(ts session.TurnState) bool { return ts.Turn == 2 && done(ts) })
	if ts.Status != session.StatusComplete || ts.FinalText != "ok" {
		t.Fatalf("the evicted session's next turn: %s", dump(ts))
	}
	if n := stickyCacheSize(t, metrics); n > cache {
		t.Fatalf("the cache holds %v sessions after a wake-up; its bound is %d", n, cache)
	}
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// stickyCacheSize is the largest value of the SDK's gauge
// temporal_sticky_cache_size on the worker's /metrics at addr (0 if it
// reports none yet).
func stickyCacheSize(t *testing.T, addr string) float64 {
	t.Helper()
	hc := http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("the worker's metrics: %v", err)
	}
	defer resp.Body.Close()
	n := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "temporal_sticky_cache_size") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			n = max(n, v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}
