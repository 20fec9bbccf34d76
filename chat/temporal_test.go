package chat_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/session"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/serviceerror"
	updatepb "go.temporal.io/api/update/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// frontend is an in-process Temporal frontend speaking the real gRPC
// WorkflowService, so TemporalSessions is tested through the real SDK
// client: it records what the client asked and answers from test fields.
type frontend struct {
	workflowservice.UnimplementedWorkflowServiceServer

	mu       sync.Mutex
	multi    []*workflowservice.ExecuteMultiOperationRequest
	updates  []*workflowservice.UpdateWorkflowExecutionRequest
	queries  []*workflowservice.QueryWorkflowRequest
	lists    []*workflowservice.ListWorkflowExecutionsRequest
	outcome  *updatepb.Outcome // answer to every update
	queryAns *commonpb.Payloads
	queryErr error
	execs    []*workflowpb.WorkflowExecutionInfo
}

func (f *frontend) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{Capabilities: &workflowservice.GetSystemInfoResponse_Capabilities{}}, nil
}

func (f *frontend) updateResponse(req *workflowservice.UpdateWorkflowExecutionRequest) *workflowservice.UpdateWorkflowExecutionResponse {
	return &workflowservice.UpdateWorkflowExecutionResponse{
		UpdateRef: &updatepb.UpdateRef{WorkflowExecution: req.GetWorkflowExecution(), UpdateId: req.GetRequest().GetMeta().GetUpdateId()},
		Outcome:   f.outcome,
		Stage:     enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED,
	}
}

func (f *frontend) ExecuteMultiOperation(_ context.Context, req *workflowservice.ExecuteMultiOperationRequest) (*workflowservice.ExecuteMultiOperationResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.multi = append(f.multi, req)
	upd := req.GetOperations()[1].GetUpdateWorkflow()
	return &workflowservice.ExecuteMultiOperationResponse{Responses: []*workflowservice.ExecuteMultiOperationResponse_Response{
		{Response: &workflowservice.ExecuteMultiOperationResponse_Response_StartWorkflow{StartWorkflow: &workflowservice.StartWorkflowExecutionResponse{RunId: "run-1", Started: true}}},
		{Response: &workflowservice.ExecuteMultiOperationResponse_Response_UpdateWorkflow{UpdateWorkflow: f.updateResponse(upd)}},
	}}, nil
}

func (f *frontend) UpdateWorkflowExecution(_ context.Context, req *workflowservice.UpdateWorkflowExecutionRequest) (*workflowservice.UpdateWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, req)
	return f.updateResponse(req), nil
}

func (f *frontend) QueryWorkflow(_ context.Context, req *workflowservice.QueryWorkflowRequest) (*workflowservice.QueryWorkflowResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, req)
	if f.queryErr != nil {
		// As the real frontend does: serviceerrors travel as gRPC statuses.
		return nil, serviceerror.ToStatus(f.queryErr).Err()
	}
	return &workflowservice.QueryWorkflowResponse{QueryResult: f.queryAns}, nil
}

func (f *frontend) ListWorkflowExecutions(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, req)
	return &workflowservice.ListWorkflowExecutionsResponse{Executions: f.execs}, nil
}

func payloads(t testing.TB, v any) *commonpb.Payloads {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func decode(t testing.TB, p *commonpb.Payloads, v any) {
	t.Helper()
	if err := converter.GetDefaultDataConverter().FromPayloads(p, v); err != nil {
		t.Fatal(err)
	}
}

// refusingFrontend answers every update with the workflow's refusal of
// the given error type.
func refusingFrontend(msg, errType string) *frontend {
	return &frontend{outcome: &updatepb.Outcome{Value: &updatepb.Outcome_Failure{Failure: &failurepb.Failure{
		Message:     msg,
		FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: errType}},
	}}}}
}

// startFrontend serves f on a loopback port and returns a real client.
func startFrontend(t *testing.T, f *frontend) client.Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	workflowservice.RegisterWorkflowServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	c, err := client.Dial(client.Options{HostPort: lis.Addr().String(), Namespace: "ns1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestTemporalSendUsesUpdateWithStart(t *testing.T) {
	f := &frontend{}
	f.outcome = &updatepb.Outcome{Value: &updatepb.Outcome_Success{Success: payloads(t, session.MessageResponse{Turn: 4, Queued: true})}}
	s := chat.NewTemporalSessions(startFrontend(t, f), chat.TemporalOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	in := session.SessionInput{Location: testThread, Owner: chat.User{ID: "U1"}, Backend: "docker", Settings: session.Settings{Policy: session.Policy{MaxToolCalls: 9}}}
	resp, err := s.Send(ctx, in, session.MessageRequest{EventID: "Ev1", User: chat.User{ID: "U1"}, Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Turn != 4 || !resp.Queued {
		t.Errorf("response = %+v", resp)
	}
	if len(f.multi) != 1 {
		t.Fatalf("%d multi-operation calls", len(f.multi))
	}
	start := f.multi[0].GetOperations()[0].GetStartWorkflow()
	upd := f.multi[0].GetOperations()[1].GetUpdateWorkflow()
	if start.GetWorkflowId() != testThread.ID() || start.GetTaskQueue().GetName() != session.TaskQueue ||
		start.GetWorkflowType().GetName() != session.WorkflowName || start.GetNamespace() != "ns1" {
		t.Errorf("start = id %q queue %q type %q ns %q", start.GetWorkflowId(), start.GetTaskQueue().GetName(), start.GetWorkflowType().GetName(), start.GetNamespace())
	}
	if start.GetWorkflowIdConflictPolicy() != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING ||
		start.GetWorkflowIdReusePolicy() != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE {
		t.Errorf("policies = %v / %v", start.GetWorkflowIdConflictPolicy(), start.GetWorkflowIdReusePolicy())
	}
	var gotIn session.SessionInput
	decode(t, start.GetInput(), &gotIn)
	if gotIn.Location != testThread || gotIn.Backend != "docker" || gotIn.Settings.MaxToolCalls != 9 {
		t.Errorf("start input = %+v", gotIn)
	}
	if start.GetSearchAttributes() != nil && len(start.GetSearchAttributes().GetIndexedFields()) > 0 {
		t.Errorf("search attributes set for a namespace without them: %v", start.GetSearchAttributes())
	}
	if upd.GetRequest().GetMeta().GetUpdateId() != "msg:Ev1" || upd.GetRequest().GetInput().GetName() != session.UpdateSendMessage ||
		upd.GetWaitPolicy().GetLifecycleStage() != enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED {
		t.Errorf("update = id %q name %q stage %v", upd.GetRequest().GetMeta().GetUpdateId(), upd.GetRequest().GetInput().GetName(), upd.GetWaitPolicy().GetLifecycleStage())
	}
	var gotReq session.MessageRequest
	decode(t, upd.GetRequest().GetInput().GetArgs(), &gotReq)
	if gotReq.EventID != "Ev1" || gotReq.Text != "hi" {
		t.Errorf("message = %+v", gotReq)
	}

	// Indexed sessions carry their search attributes from the start.
	in.Settings.Indexed = true
	if _, err := s.Send(ctx, in, session.MessageRequest{EventID: "Ev2", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	sa := f.multi[1].GetOperations()[0].GetStartWorkflow().GetSearchAttributes().GetIndexedFields()
	if _, ok := sa[session.SAPlatform.GetName()]; !ok {
		t.Errorf("indexed start lacks %s: %v", session.SAPlatform.GetName(), sa)
	}

	if _, err := s.Send(ctx, in, session.MessageRequest{Text: "no id"}); err == nil {
		t.Error("a message without an event ID was sent")
	}
}

func TestTemporalValidatorRejectionIsUserError(t *testing.T) {
	f := &frontend{}
	const why = "message is 70000 bytes; the limit is 65536"
	f.outcome = &updatepb.Outcome{Value: &updatepb.Outcome_Failure{Failure: &failurepb.Failure{
		Message:     why,
		FailureInfo: &failurepb.Failure_ApplicationFailureInfo{ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: "*errors.errorString"}},
	}}}
	s := chat.NewTemporalSessions(startFrontend(t, f), chat.TemporalOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, err := s.Send(ctx, session.SessionInput{Location: testThread}, session.MessageRequest{EventID: "e", Text: "x"})
	if got := chat.UserMessage(err); got != why {
		t.Errorf("send rejection shows %q, want %q (err %v)", got, why, err)
	}
	_, err = s.Approve(ctx, testThread.ID(), session.ApproveRequest{CallID: "c1", Decision: session.DecisionApprove})
	if got := chat.UserMessage(err); got != why {
		t.Errorf("approve rejection shows %q (err %v)", got, err)
	}
	req := f.updates[0]
	if req.GetWorkflowExecution().GetWorkflowId() != testThread.ID() || req.GetRequest().GetInput().GetName() != session.UpdateApprove ||
		req.GetWaitPolicy().GetLifecycleStage() != enumspb.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED {
		t.Errorf("approve update = %v", req)
	}
}

// TestTemporalCopyOfADecidingClickIsARepeat: the session refuses a copy
// of the click that decided (another replica's delivery of it) with
// ErrTypeClickDecided; Approve reports it as the success it is, and still
// sends the click's ID.
func TestTemporalCopyOfADecidingClickIsARepeat(t *testing.T) {
	f := refusingFrontend("this click decided the call already", session.ErrTypeClickDecided)
	s := chat.NewTemporalSessions(startFrontend(t, f), chat.TemporalOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := s.Approve(ctx, testThread.ID(), session.ApproveRequest{CallID: "c1", Decision: session.DecisionApprove, Click: "1400000000000000001"})
	if err != nil || !res.Repeat {
		t.Fatalf("approve of a copy of the deciding click: %+v, %v; want a repeat, no error", res, err)
	}
	if in := string(f.updates[0].GetRequest().GetInput().GetArgs().GetPayloads()[0].GetData()); !strings.Contains(in, `"click":"1400000000000000001"`) {
		t.Errorf("the update did not carry the click: %s", in)
	}
}

// A release the workflow refuses as stale (its hold was renewed since)
// has nothing to give up: no error, and the update carries the hold.
func TestTemporalStaleReleaseIsNoError(t *testing.T) {
	f := refusingFrontend("this release is of a hold that ended earlier", session.ErrTypeStaleRelease)
	s := chat.NewTemporalSessions(startFrontend(t, f), chat.TemporalOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held := time.Date(2026, 12, 6, 21, 34, 27, 5e6, time.UTC)
	res, err := s.ClaimWatch(ctx, testThread.ID(), session.ClaimWatchRequest{Claimer: "bot-a", Release: true, Held: held})
	if err != nil || res.Granted {
		t.Fatalf("a stale release: %+v, %v; want nothing granted, no error", res, err)
	}
	if in := string(f.updates[0].GetRequest().GetInput().GetArgs().GetPayloads()[0].GetData()); !strings.Contains(in, `"held":"2026-12-06T21:34:27.005Z"`) {
		t.Errorf("the update did not carry the hold: %s", in)
	}
}

func TestTemporalQueriesAndNotFound(t *testing.T) {
	f := &frontend{}
	f.queryAns = payloads(t, session.TurnState{Turn: 3, Version: 11, Status: session.StatusThinking})
	s := chat.NewTemporalSessions(startFrontend(t, f), chat.TemporalOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	ts, err := s.TurnState(ctx, testThread.ID())
	if err != nil || ts.Turn != 3 || ts.Version != 11 {
		t.Fatalf("turn state = %+v, %v", ts, err)
	}
	if q := f.queries[0]; q.GetQuery().GetQueryType() != session.QueryTurnState || q.GetExecution().GetWorkflowId() != testThread.ID() {
		t.Errorf("query = %v", q)
	}

	f.queryErr = serviceerror.NewNotFound("workflow not found")
	_, err = s.Info(ctx, testThread.ID())
	if !errors.Is(err, chat.ErrNoSession) || !strings.Contains(chat.UserMessage(err), "no running session") {
		t.Errorf("not found = %v (%q)", err, chat.UserMessage(err))
	}
}

func TestTemporalList(t *testing.T) {
	other := chat.Thread{Platform: "slack", Workspace: "T1", Channel: "C9", Thread: "1.2"}
	f := &frontend{execs: []*workflowpb.WorkflowExecutionInfo{
		{Execution: &commonpb.WorkflowExecution{WorkflowId: testThread.ID()}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, StartTime: timestamppb.New(t0)},
		{Execution: &commonpb.WorkflowExecution{WorkflowId: other.ID()}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, StartTime: timestamppb.New(t0.Add(time.Hour))},
		{Execution: &commonpb.WorkflowExecution{WorkflowId: "not-a-session"}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING},
	}}
	s := chat.NewTemporalSessions(startFrontend(t, f), chat.TemporalOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := s.List(ctx, chat.ListFilter{Platform: "test", ActiveOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Location != testThread || !got[0].Running || !got[0].StartedAt.Equal(t0) {
		t.Errorf("list = %+v", got)
	}
	if q := f.lists[0].GetQuery(); q != "WorkflowType = 'Session' AND ExecutionStatus = 'Running'" {
		t.Errorf("query = %q", q)
	}

	idx := chat.NewTemporalSessions(startFrontend(t, f), chat.TemporalOptions{Indexed: true})
	if _, err := idx.List(ctx, chat.ListFilter{Platform: "slack", Channel: "C'9", TurnActive: true}); err != nil {
		t.Fatal(err)
	}
	want := `WorkflowType = 'Session' AND SandbotPlatform = 'slack' AND SandbotChannel = 'C\'9' AND SandbotActiveTurn = true`
	if q := f.lists[len(f.lists)-1].GetQuery(); q != want {
		t.Errorf("indexed query = %q, want %q", q, want)
	}
}

func TestUIURL(t *testing.T) {
	if got := chat.UIURL("", "default", "x"); got != "" {
		t.Errorf("no base: %q", got)
	}
	got := chat.UIURL("http://localhost:8233/", "", chat.Thread{Platform: "slack", Channel: "C1", Thread: "a/b"}.ID())
	want := "http://localhost:8233/namespaces/default/workflows/session%2Fslack%2F%2FC1%2Fa%252Fb"
	if got != want {
		t.Errorf("UIURL = %q, want %q", got, want)
	}
}
