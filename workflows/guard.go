package workflows

import (
	"fmt"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/session"
)

// DecisionGuard is the worker interceptor that makes the bot the only party
// that can decide for people: every update to a session workflow must carry
// a session.Signature made with the deployment's decision key, or it is
// rejected before the workflow sees it. A command in a sandbox that reaches
// the Temporal frontend can name any user in a request; it cannot sign one.
//
// The check runs where update validators run, which Temporal skips on
// replay, so rotating the key never changes a recorded history.
type DecisionGuard struct {
	interceptor.WorkerInterceptorBase
	key []byte
}

// NewDecisionGuard returns the guard for key (at least
// session.MinKeyBytes; shorter keys reject every update).
func NewDecisionGuard(key []byte) *DecisionGuard {
	return &DecisionGuard{key: append([]byte(nil), key...)}
}

// InterceptWorkflow implements interceptor.WorkerInterceptor.
func (g *DecisionGuard) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &guardInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, key: g.key}
}

type guardInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	key []byte
}

// ValidateUpdate rejects an update to a session workflow unless its only
// argument is a request signed for this workflow and this update.
func (g *guardInbound) ValidateUpdate(ctx workflow.Context, in *interceptor.UpdateInput) error {
	info := workflow.GetInfo(ctx)
	if info.WorkflowType.Name != session.WorkflowName {
		return g.Next.ValidateUpdate(ctx, in)
	}
	if len(in.Args) != 1 {
		return fmt.Errorf("update %s takes one request; refused", in.Name)
	}
	req, ok := session.SignedRequest(in.Args[0])
	if !ok {
		return fmt.Errorf("update %s: %T is not a sandbot request; refused", in.Name, in.Args[0])
	}
	if err := session.Verify(g.key, info.WorkflowExecution.ID, in.Name, req, workflow.Now(ctx)); err != nil {
		return fmt.Errorf("update %s refused: %w", in.Name, err)
	}
	return g.Next.ValidateUpdate(ctx, in)
}
