package devserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
)

const (
	childDBEnv  = "DEVSERVER_TEST_CHILD_DB"
	childReady  = "CHILD READY"
	killedID    = "session-killed"
	killedInput = "before the crash"
)

// TestSessionSurvivesKill runs the first life of the server in a child process (this test
// binary, see TestMain) and kills it with SIGKILL while a workflow waits for a signal, as when
// cmd/dev crashes or the laptop loses power. A new server on the same file must carry the
// workflow on.
func TestSessionSurvivesKill(t *testing.T) {
	db := filepath.Join(t.TempDir(), "dev.db")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDBEnv+"="+db)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == childReady {
				ready <- nil
				return
			}
		}
		ready <- errors.New("child exited before it was ready")
	}()
	select {
	case err := <-ready:
		if err != nil {
			_ = cmd.Wait()
			t.Fatalf("%v; child stderr:\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("child not ready: %v; child stderr:\n%s", ctx.Err(), stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	_ = cmd.Wait() // "signal: killed"

	s := startServer(t, Options{DBPath: db, SearchAttributes: sessionAttributes(true), Logger: testLogger(t)})
	c := newClient(t, s)
	waitListed(t, c, `SandbotOwner = 'bob'`, killedID)
	startWorker(t, c, waitForFinish)
	waitForState(t, c, killedID, "waiting")
	if err := c.SignalWorkflow(ctx, killedID, "", finishSignal, "after"); err != nil {
		t.Fatalf("signal: %v", err)
	}
	var got string
	if err := c.GetWorkflow(ctx, killedID, "").Get(ctx, &got); err != nil {
		t.Fatalf("workflow result: %v", err)
	}
	if want := killedInput + ":after"; got != want {
		t.Fatalf("workflow result %q, want %q", got, want)
	}
}

// runChild is the child process of TestSessionSurvivesKill: it starts a server on db, starts
// a workflow, waits until a worker has run it up to its signal wait, reports ready on stdout and
// then waits to be killed.
func runChild(db string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := Start(ctx, Options{DBPath: db, SearchAttributes: sessionAttributes(true)})
	if err != nil {
		return err
	}
	c, err := s.NewClient(ctx, client.Options{})
	if err != nil {
		return err
	}
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(waitForFinish)
	if err := w.Start(); err != nil {
		return err
	}
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    killedID,
		TaskQueue:             taskQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(saOwner.ValueSet("bob")),
	}, waitForFinish, killedInput); err != nil {
		return err
	}
	for {
		v, err := c.QueryWorkflow(ctx, killedID, "", stateQuery)
		var state string
		if err == nil && v.Get(&state) == nil && state == "waiting" {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("workflow never reached its signal wait: %w (last error: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Println(childReady)
	<-ctx.Done() // killed long before this
	return errors.New("not killed: " + strings.TrimSpace(ctx.Err().Error()))
}
