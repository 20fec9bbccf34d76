package devserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// TestMain doubles as the body of the child process in TestSessionSurvivesKill.
func TestMain(m *testing.M) {
	if db := os.Getenv(childDBEnv); db != "" {
		if err := runChild(db); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRestartKeepsSessions stops the server and starts it again on the same file: the running
// workflow, its search attributes and visibility records must all come back, and a search
// attribute added on the second start must be usable at once.
func TestRestartKeepsSessions(t *testing.T) {
	db := filepath.Join(t.TempDir(), "state", "dev.db") // the parent directory is created too
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	// First life.
	s1 := startServer(t, Options{DBPath: db, SearchAttributes: sessionAttributes(false), Logger: testLogger(t)})
	if s1.DBPath() != db || s1.Namespace() != DefaultNamespace {
		t.Fatalf("DBPath, Namespace = %q, %q; want %q, %q", s1.DBPath(), s1.Namespace(), db, DefaultNamespace)
	}
	if _, err := Start(ctx, Options{DBPath: db}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Start on a file in use: err = %v; want an 'in use' error", err)
	}

	c1 := newClient(t, s1)
	stopWorker1 := startWorker(t, c1, waitForFinish)
	_, err := c1.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        "session-1",
		TaskQueue: taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			saPlatform.ValueSet("slack"), saChannel.ValueSet("C1"), saOwner.ValueSet("alice"),
			saBackend.ValueSet("local"), saActiveTurn.ValueSet(true),
		),
	}, waitForFinish, "hello")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	waitForState(t, c1, "session-1", "waiting")
	waitListed(t, c1, `SandbotOwner = 'alice' AND SandbotActiveTurn = true`, "session-1")
	stopWorker1()
	c1.Close()
	if err := s1.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	// Second life, with one more search attribute than before.
	s2 := startServer(t, Options{DBPath: db, SearchAttributes: sessionAttributes(true), Logger: testLogger(t)})
	c2 := newClient(t, s2)

	list, err := c2.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s2.Namespace()})
	if err != nil {
		t.Fatalf("ListSearchAttributes: %v", err)
	}
	for name, typ := range sessionAttributes(true) {
		if got := list.GetCustomAttributes()[name]; got != typ {
			t.Errorf("search attribute %s after restart: type %v, want %v", name, got, typ)
		}
	}

	desc, err := c2.DescribeWorkflowExecution(ctx, "session-1", "")
	if err != nil {
		t.Fatalf("describe after restart: %v", err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("session-1 after restart: status %v, want RUNNING", st)
	}
	waitListed(t, c2, `SandbotOwner = 'alice' AND SandbotPlatform = 'slack' AND SandbotActiveTurn = true`, "session-1")

	// The attribute added on this start works in a start and in a query right away.
	if _, err := c2.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    "session-2",
		TaskQueue:             taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(saOwner.ValueSet("alice"), saParent.ValueSet("session-1")),
	}, waitForFinish, "fork"); err != nil {
		t.Fatalf("start workflow with the new search attribute: %v", err)
	}
	waitListed(t, c2, `SandbotParent = 'session-1'`, "session-2")
	waitListed(t, c2, `SandbotOwner = 'alice'`, "session-1", "session-2")

	// The workflow carries on after the restart.
	stopWorker2 := startWorker(t, c2, waitForFinish)
	if err := c2.SignalWorkflow(ctx, "session-1", "", finishSignal, "bye"); err != nil {
		t.Fatalf("signal: %v", err)
	}
	var got string
	if err := c2.GetWorkflow(ctx, "session-1", "").Get(ctx, &got); err != nil {
		t.Fatalf("workflow result: %v", err)
	}
	if got != "hello:bye" {
		t.Fatalf("workflow result %q, want %q", got, "hello:bye")
	}
	if err := c2.TerminateWorkflow(ctx, "session-2", "", "test done"); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	stopWorker2()
	c2.Close()
	if err := s2.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	// Changing the type of an existing attribute is refused, and the failed start cleans up
	// after itself: the file is free for the next start.
	changed := sessionAttributes(true)
	changed[saOwner.GetName()] = enumspb.INDEXED_VALUE_TYPE_BOOL
	_, err = Start(ctx, Options{DBPath: db, SearchAttributes: changed, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "SandbotOwner already exists") || !strings.Contains(err.Error(), "Keyword") {
		t.Fatalf("Start with a changed search attribute type: err = %v; want it to name SandbotOwner and its type Keyword", err)
	}
	s3 := startServer(t, Options{DBPath: db, SearchAttributes: sessionAttributes(true), Logger: testLogger(t)})
	c3 := newClient(t, s3)
	desc, err = c3.DescribeWorkflowExecution(ctx, "session-1", "")
	if err != nil {
		t.Fatalf("describe on the third start: %v", err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("session-1 on the third start: status %v, want COMPLETED", st)
	}
}
