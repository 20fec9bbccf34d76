// Command forger is what an attacker's command inside a sandbox would run:
// it dials the Temporal frontend and sends the approve update for another
// session's pending call in the name of that session's owner, with no key or
// a made-up one. The forged-approval tests run it from inside a session.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/session"
)

func main() {
	addr := flag.String("addr", "", "Temporal frontend host:port")
	ns := flag.String("namespace", "default", "namespace")
	wf := flag.String("workflow", "", "victim session's workflow ID")
	call := flag.String("call", "", "pending call ID")
	user := flag.String("user", "", "the victim session's owner ID")
	guess := flag.String("key", "", "a guessed decision key to sign with (empty: unsigned)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: *addr, Namespace: *ns})
	if err != nil {
		fmt.Println("FORGER: dial failed:", err)
		os.Exit(3)
	}
	defer c.Close()
	req := session.ApproveRequest{CallID: *call, Decision: session.DecisionApprove, User: session.User{ID: *user}}
	if *guess != "" {
		session.Sign([]byte(*guess), *wf, session.UpdateApprove, &req, time.Now())
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: *wf, UpdateName: session.UpdateApprove, WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{req},
	})
	if err == nil {
		err = h.Get(ctx, nil)
	}
	if err != nil {
		fmt.Println("FORGER: refused:", err)
		os.Exit(2)
	}
	fmt.Println("FORGER: ACCEPTED")
}
