package workflows

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/sandbot/sandbot/session"
)

// fuzzUpdates are the session workflow's updates, indexed by the fuzzer's
// first argument.
var fuzzUpdates = []string{
	session.UpdateSendMessage, session.UpdateApprove, session.UpdatePause, session.UpdateCompact,
	session.UpdateResume, session.UpdateStop, session.UpdateDestroy, session.UpdateSetBackend,
	session.UpdateChatRef, session.UpdateFork, session.UpdateClaimFinal, session.UpdateClaimWatch,
	session.UpdateRewind, session.UpdateSetTitle, session.UpdateSetModel, session.UpdateSetRepo,
	session.UpdateDiff, session.UpdateOpenPR,
}

// fuzzUpdateID is the ID of the fuzzed update.
const fuzzUpdateID = "fuzzed-update"

// validateOnly lets the fuzzed update be decoded and validated as usual
// but never runs its handler: an accepted fuzzed request (a valid fork,
// diff or /repo) would start work the harness does not fake, and what
// handlers do is their own tests' business.
type validateOnly struct {
	interceptor.WorkerInterceptorBase
}

func (*validateOnly) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &validateOnlyInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type validateOnlyInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (v *validateOnlyInbound) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	if u := workflow.GetCurrentUpdateInfo(ctx); u != nil && u.ID == fuzzUpdateID {
		return nil, nil
	}
	return v.Next.ExecuteUpdate(ctx, in)
}

// FuzzUpdatePayload sends the session workflow an update whose payload is
// arbitrary bytes, decoded by Temporal's JSON payload converter into the
// update's request type and checked by the workflow's own validator, in
// the SDK's test environment (no server). The workflow is mid-turn, waiting
// for the owner to approve call c1. Whatever the payload: the workflow must
// not panic or fail, a refused update must come back with a reason, and a
// refused update must change nothing (turn state, session info, the
// model's and the sandbox's calls).
func FuzzUpdatePayload(f *testing.F) {
	enc := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	// The requests the bot sends, as it sends them (unsigned: the
	// DecisionGuard interceptor is not installed here), then broken ones.
	real := map[string]any{
		session.UpdateSendMessage: session.MessageRequest{EventID: "e2", User: owner, Text: "and the docs", Ref: "1700000000.000200"},
		session.UpdateApprove:     session.ApproveRequest{CallID: "c1", Decision: session.DecisionApprove, User: owner},
		session.UpdatePause:       session.PauseRequest{User: owner},
		session.UpdateCompact:     session.CompactRequest{User: owner},
		session.UpdateResume:      session.ResumeRequest{User: owner},
		session.UpdateStop:        session.StopRequest{User: owner},
		session.UpdateDestroy:     session.DestroyRequest{User: owner},
		session.UpdateSetBackend:  session.SetBackendRequest{Backend: "docker", User: owner},
		session.UpdateChatRef:     session.ChatRefRequest{Turn: 1, Kind: "status", Ref: "1700000000.000300"},
		session.UpdateFork:        session.ForkRequest{Location: session.Location{Platform: "console", Channel: "local", Thread: "t2"}, User: owner},
		session.UpdateClaimFinal:  session.ClaimFinalRequest{Turn: 1, Claimer: "bot-1"},
		session.UpdateClaimWatch:  session.ClaimWatchRequest{Claimer: "bot-1", For: session.WatchLease},
		session.UpdateRewind:      session.RewindRequest{Turn: 0, User: owner},
		session.UpdateSetTitle:    session.SetTitleRequest{Title: "Clean the build", User: owner},
		session.UpdateSetModel:    session.SetModelRequest{Model: "gpt-other", User: owner},
		session.UpdateSetRepo:     session.SetRepoRequest{Repo: session.RepoSpec{URL: "https://github.com/acme/widgets"}, User: owner},
		session.UpdateDiff:        session.DiffRequest{User: owner},
		session.UpdateOpenPR:      session.OpenPRRequest{Title: "Clean the build", User: owner},
	}
	for i, name := range fuzzUpdates {
		f.Add(uint8(i), enc(real[name]))
	}
	index := map[string]uint8{}
	for i, name := range fuzzUpdates {
		index[name] = uint8(i)
	}
	for _, s := range []string{``, `null`, `[]`, `"x"`, `{`, `{"user":5}`} {
		for i := range fuzzUpdates {
			f.Add(uint8(i), []byte(s))
		}
	}
	for name, s := range map[string]string{
		session.UpdateApprove + " 1":     `{"call_id":5}`,
		session.UpdateApprove + " 2":     `{"call_id":"c1","decision":"maybe","user":{"id":"U1"}}`,
		session.UpdateApprove + " 3":     `{"call_id":"c1","decision":"approve","user":{"id":"U9"}}`,
		session.UpdateApprove + " 4":     `{"call_id":"c1","decision":"approve"}`,
		session.UpdateApprove + " 5":     `{"call_id":"c0","decision":"reject","user":{"id":"U1"}}`,
		session.UpdateSendMessage + " 1": `{"event_id":"e3","user":{"id":"U1"},"text":"   "}`,
		session.UpdateSendMessage + " 2": `{"event_id":"e1","user":{"id":"U1"},"text":"again","attachments":[{"id":"F1","size":-1}]}`,
		session.UpdateClaimWatch + " 1":  `{"for":-1,"claimer":"x"}`,
		session.UpdateClaimWatch + " 2":  `{"for":"1h"}`,
		session.UpdateFork + " 1":        `{"location":{"platform":"console","channel":"local","thread":"t1"},"user":{"id":"U1"}}`,
		session.UpdateFork + " 2":        `{"location":{"platform":"console","channel":"local","thread":"t3"},"at_turn":-1,"user":{"id":"U1"}}`,
		session.UpdateRewind + " 1":      `{"turn":-9223372036854775808,"user":{"id":"U1"}}`,
		session.UpdateSetTitle + " 1":    `{"title":"a\nb","user":{"id":"U1"}}`,
		session.UpdateChatRef + " 1":     `{"turn":1,"kind":"final","ref":""}`,
		session.UpdateSetBackend + " 1":  `{"backend":"","user":{"id":"U1"}}`,
	} {
		name, _, _ = strings.Cut(name, " ")
		f.Add(index[name], []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		name := fuzzUpdates[int(which)%len(fuzzUpdates)]
		goroutines := runtime.NumGoroutine()
		h := newHarness(t, shellCall("c1", "rm -rf build"), final("Cleaned."))
		h.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&validateOnly{}}})
		h.at(0, func() { h.send("e1", "clean the build") })
		var (
			before, after          session.TurnState
			infoBefore, infoAfter  session.Info
			modelBefore, ranBefore int
			modelAfter, ranAfter   int
			rejected               error
			answered               bool
		)
		h.at(time.Second, func() {
			before, infoBefore = h.state(), h.info()
			modelBefore, ranBefore = len(h.model.requests()), len(h.box.ran())
			raw := converter.NewRawValue(&commonpb.Payload{
				Metadata: map[string][]byte{converter.MetadataEncoding: []byte(converter.MetadataEncodingJSON)},
				Data:     payload,
			})
			h.env.UpdateWorkflow(name, fuzzUpdateID, &testsuite.TestUpdateCallback{
				OnAccept:   func() { answered = true },
				OnReject:   func(err error) { answered, rejected = true, err },
				OnComplete: func(any, error) {},
			}, raw)
		})
		h.at(2*time.Second, func() {
			if rejected != nil {
				after, infoAfter = h.state(), h.info()
				modelAfter, ranAfter = len(h.model.requests()), len(h.box.ran())
			}
		})
		h.destroyAt(time.Hour)
		h.run(h.input(session.ApproveAlways))
		noLeak(t, goroutines)

		if before.Pending == nil || before.Pending.CallID != "c1" {
			t.Fatalf("the turn was not waiting for approval of c1: %+v", before)
		}
		if !answered {
			t.Fatalf("update %s was neither accepted nor refused", name)
		}
		if rejected == nil {
			return // a valid request; its effects are the handlers' tests' business
		}
		if msg := rejected.Error(); strings.TrimSpace(msg) == "" || strings.Contains(strings.ToLower(msg), "panic") {
			t.Fatalf("update %s refused without a clear reason: %q", name, msg)
		}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("refused update %s (%v) changed the turn state:\nbefore %+v\nafter  %+v", name, rejected, before, after)
		}
		if !reflect.DeepEqual(infoBefore, infoAfter) {
			t.Fatalf("refused update %s (%v) changed the session info:\nbefore %+v\nafter  %+v", name, rejected, infoBefore, infoAfter)
		}
		if modelAfter != modelBefore || ranAfter != ranBefore {
			t.Fatalf("refused update %s ran something", name)
		}
	})
}

// noLeak fails t if, within a bounded wait, the process does not get back
// to at most before goroutines: the workflow's coroutines, timers and
// activities of a finished test environment must all be gone.
func noLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the input:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}
