package devserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"
)

// untilContinueAsNewSuggested grows its history by about 15 events per round until the server
// suggests continue-as-new, and returns the round in which it did.
func untilContinueAsNewSuggested(ctx workflow.Context, maxRounds int) (int, error) {
	for round := 1; round <= maxRounds; round++ {
		for range 10 { // marker events, recorded with this workflow task
			workflow.SideEffect(ctx, func(workflow.Context) any { return round })
		}
		// A timer ends this workflow task; the next one's start carries the suggestion.
		if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
			return 0, err
		}
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return round, nil
		}
	}
	return 0, fmt.Errorf("continue-as-new not suggested after %d rounds", maxRounds)
}

// TestEphemeralWithOverridesAndUI covers the in-memory mode the integration tests use: a
// custom namespace, a dynamic config override that makes continue-as-new come early, the Web
// UI wired to the frontend, and a repeatable Stop.
func TestEphemeralWithOverridesAndUI(t *testing.T) {
	uiPort := freePort(t)
	s := startServer(t, Options{
		Ephemeral: true,
		Namespace: "sandbot-test",
		// Suggested after 20 events instead of the default 4096 (about 270 rounds).
		DynamicConfig: map[string]any{"limit.historyCount.suggestContinueAsNew": 20},
		UIPort:        uiPort,
		Logger:        testLogger(t),
	})
	if s.DBPath() != "" {
		t.Errorf("DBPath in ephemeral mode = %q, want empty", s.DBPath())
	}
	if want := fmt.Sprintf("http://127.0.0.1:%d", uiPort); s.UIURL() != want {
		t.Errorf("UIURL = %q, want %q", s.UIURL(), want)
	}

	c := newClient(t, s)
	stopWorker := startWorker(t, c, untilContinueAsNewSuggested)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "can", TaskQueue: taskQueue}, untilContinueAsNewSuggested, 5)
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	var round int
	if err := run.Get(ctx, &round); err != nil {
		t.Fatalf("workflow (the history count override did not take effect?): %v", err)
	}
	t.Logf("continue-as-new suggested in round %d", round)

	// The UI's API reaches the frontend: it lists our namespace.
	body := httpGet(t, s.UIURL()+"/api/v1/namespaces")
	if !strings.Contains(body, `"sandbot-test"`) {
		t.Errorf("UI namespaces response does not list sandbot-test: %.300s", body)
	}
	if page := httpGet(t, s.UIURL()+"/"); !strings.Contains(strings.ToLower(page), "<html") {
		t.Errorf("UI root is not an HTML page: %.200s", page)
	}

	stopWorker()
	c.Close()
	first := s.Stop()
	if first != nil {
		t.Fatalf("Stop: %v", first)
	}
	if second := s.Stop(); second != nil {
		t.Fatalf("second Stop: %v", second)
	}
	if _, err := http.Get(s.UIURL() + "/healthz"); err == nil {
		t.Errorf("UI still answers after Stop")
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func httpGet(t testing.TB, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %.300s", url, resp.Status, b)
	}
	return string(b)
}
