package devserver

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Generous deadlines: the machine is shared and slow; nothing here waits for a fixed time.
const (
	startTimeout = 2 * time.Minute
	waitTimeout  = time.Minute
	taskQueue    = "devserver-test"
	finishSignal = "finish"
	stateQuery   = "state"
)

// The search attributes sandbot registers for session discovery.
var (
	saPlatform   = temporal.NewSearchAttributeKeyKeyword("SandbotPlatform")
	saChannel    = temporal.NewSearchAttributeKeyKeyword("SandbotChannel")
	saOwner      = temporal.NewSearchAttributeKeyKeyword("SandbotOwner")
	saBackend    = temporal.NewSearchAttributeKeyKeyword("SandbotBackend")
	saActiveTurn = temporal.NewSearchAttributeKeyBool("SandbotActiveTurn")
	saParent     = temporal.NewSearchAttributeKeyKeyword("SandbotParent")
)

func sessionAttributes(withParent bool) map[string]enumspb.IndexedValueType {
	m := map[string]enumspb.IndexedValueType{
		saPlatform.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		saChannel.GetName():    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		saOwner.GetName():      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		saBackend.GetName():    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
		saActiveTurn.GetName(): enumspb.INDEXED_VALUE_TYPE_BOOL,
	}
	if withParent {
		m[saParent.GetName()] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	return m
}

// waitForFinish stands in for a session: it idles until signalled, then returns.
func waitForFinish(ctx workflow.Context, greeting string) (string, error) {
	state := "waiting"
	if err := workflow.SetQueryHandler(ctx, stateQuery, func() (string, error) { return state, nil }); err != nil {
		return "", err
	}
	var msg string
	workflow.GetSignalChannel(ctx, finishSignal).Receive(ctx, &msg)
	state = "finished"
	return greeting + ":" + msg, nil
}

// testLogger sends the server's warnings to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func startServer(t testing.TB, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	began := time.Now()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("server started in %v at %s", time.Since(began).Round(time.Millisecond), s.HostPort())
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

func newClient(t testing.TB, s *Server) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := s.NewClient(ctx, client.Options{})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(c.Close) // closing twice is harmless
	return c
}

// startWorker runs a worker for the workflows; the returned func stops it (once; it also
// runs at cleanup).
func startWorker(t testing.TB, c client.Client, workflows ...any) (stop func()) {
	t.Helper()
	w := worker.New(c, taskQueue, worker.Options{})
	for _, wf := range workflows {
		w.RegisterWorkflow(wf)
	}
	if err := w.Start(); err != nil {
		t.Fatalf("worker start: %v", err)
	}
	stop = sync.OnceFunc(w.Stop)
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it reports true, failing the test at the deadline with the last
// state cond described.
func waitFor(t testing.TB, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	last := ""
	for {
		ok, state := cond(ctx)
		if ok {
			return
		}
		last = state
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; last: %s", what, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitForState waits until the workflow's query handler reports state, which also proves a
// worker has run its first workflow task.
func waitForState(t testing.TB, c client.Client, id, state string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("workflow %s in state %q", id, state), func(ctx context.Context) (bool, string) {
		v, err := c.QueryWorkflow(ctx, id, "", stateQuery)
		if err != nil {
			return false, err.Error()
		}
		var got string
		if err := v.Get(&got); err != nil {
			return false, err.Error()
		}
		return got == state, got
	})
}

// waitListed waits until the visibility query returns exactly the workflow IDs want (sorted).
// Visibility is written asynchronously, hence the wait.
func waitListed(t testing.TB, c client.Client, query string, want ...string) {
	t.Helper()
	slices.Sort(want)
	waitFor(t, fmt.Sprintf("%q to list %v", query, want), func(ctx context.Context) (bool, string) {
		ids, err := listIDs(ctx, c, query)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(ids, want), fmt.Sprint(ids)
	})
}

func listIDs(ctx context.Context, c client.Client, query string) ([]string, error) {
	var ids []string
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			ids = append(ids, e.GetExecution().GetWorkflowId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	slices.Sort(ids)
	return ids, nil
}
