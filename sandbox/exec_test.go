package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/sandbot/sandbot/agent"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/local"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
	"github.com/sandbot/sandbot/session"
)

func TestExecRunsCommandsInOrderAndHeartbeats(t *testing.T) {
	sandbox.BeatAtOnce(t)
	f := newFixture(t)
	beats := recordBeats(f)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	req := sandbox.ExecRequest{Handle: h, CallID: "call-1", Commands: []string{
		"echo one > order",
		"echo two >&2; exit 3",
		"cat no-such-file",
		"echo four >> order; cat order",
	}}
	res, err := run[sandbox.ExecResult](f.env, f.acts.Exec, req)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if len(res.Results) != 4 {
		t.Fatalf("got %d results, want 4", len(res.Results))
	}
	r := res.Results
	if r[0].ExitCode != 0 || r[1].ExitCode != 3 || r[1].Stderr != "two\n" || r[2].ExitCode == 0 || r[2].Stderr == "" {
		t.Errorf("results %+v", r)
	}
	if r[3].Stdout != "one\nfour\n" {
		t.Errorf("a failing command stopped the ones after it, or order broke: last stdout %q", r[3].Stdout)
	}
	for i, cr := range r {
		if cr.Command != req.Commands[i] || cr.Interrupted || cr.Skipped || cr.Error != "" {
			t.Errorf("result %d = %+v", i, cr)
		}
	}
	if b := beats(); len(b) == 0 || b[0].CallID != "call-1" {
		t.Errorf("no heartbeat with progress details was recorded: %+v", b)
	}
}

// TestExecNeverRunsACommandTwice simulates the retry of an Exec whose
// worker died while its second command ran: the recorded progress says
// command 0 finished and command 1 started.
func TestExecNeverRunsACommandTwice(t *testing.T) {
	f := newFixture(t)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	req := sandbox.ExecRequest{Handle: h, CallID: "call-7", Commands: []string{
		"echo a >> marker", "echo b >> marker", "echo c >> marker",
	}}
	first := sandbox.CommandResult{Command: req.Commands[0], Result: sandbox.Result{Stdout: "done-a", ExitCode: 0}}
	f.env.SetHeartbeatDetails(sandbox.ExecProgress{CallID: "call-7", Started: 1, Results: []sandbox.CommandResult{first}})

	res, err := run[sandbox.ExecResult](f.env, f.acts.Exec, req)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if len(res.Results) != 3 {
		t.Fatalf("got %d results", len(res.Results))
	}
	if got := res.Results[0]; got.Stdout != "done-a" || got.Interrupted {
		t.Errorf("finished command's recorded result not kept: %+v", got)
	}
	for i := 1; i < 3; i++ {
		if got := res.Results[i]; !got.Interrupted || got.Skipped || got.Error == "" || got.Command != req.Commands[i] {
			t.Errorf("command %d = %+v, want Interrupted with an explanation", i, got)
		}
	}
	if !strings.Contains(res.Results[1].Error, "running") {
		t.Errorf("the command that was running should say so: %q", res.Results[1].Error)
	}
	if _, err := os.Stat(filepath.Join(h.Workdir, "marker")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a command ran again on the retry (marker file: %v)", err)
	}
}

func TestExecRetryWithForeignProgressRunsNothing(t *testing.T) {
	f := newFixture(t)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	f.env.SetHeartbeatDetails(sandbox.ExecProgress{CallID: "other-call", Started: 0,
		Results: []sandbox.CommandResult{{Command: "echo x >> marker"}}})
	res, err := run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h, CallID: "call-8", Commands: []string{"echo x >> marker"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || !res.Results[0].Interrupted {
		t.Errorf("results %+v, want one Interrupted", res.Results)
	}
	if _, err := os.Stat(filepath.Join(h.Workdir, "marker")); !errors.Is(err, os.ErrNotExist) {
		t.Error("a command ran on a retry")
	}
}

func TestExecErrors(t *testing.T) {
	f := newFixture(t)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle

	_, err := run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h})
	appErr(t, err, sandbox.ErrTypeBadRequest)
	_, err = run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h, Commands: make([]string, sandbox.MaxCommands+1)})
	appErr(t, err, sandbox.ErrTypeBadRequest)
	foreign := h
	foreign.Backend = "daytona"
	_, err = run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: foreign, Commands: []string{"true"}})
	appErr(t, err, sandbox.ErrTypeUnknownBackend)

	if err := os.RemoveAll(h.Workdir); err != nil {
		t.Fatal(err)
	}
	_, err = run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h, Commands: []string{"true"}})
	appErr(t, err, sandbox.ErrTypeNotFound)
}

func TestExecOutputStaysWithinBudget(t *testing.T) {
	f := newFixture(t)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	req := sandbox.ExecRequest{Handle: h, OutputCap: 1 << 20}
	for range 40 {
		req.Commands = append(req.Commands, "yes | head -c 200000")
	}
	res, err := run[sandbox.ExecResult](f.env, f.acts.Exec, req)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, r := range res.Results {
		total += len(r.Stdout) + len(r.Stderr)
		if !r.Truncated || len(r.Stdout) > sandbox.ExecOutputCap(req) {
			t.Fatalf("result kept %d bytes (truncated=%v), cap %d", len(r.Stdout), r.Truncated, sandbox.ExecOutputCap(req))
		}
	}
	if total > sandbox.ExecOutputBudget {
		t.Errorf("ExecResult holds %d output bytes, budget %d", total, sandbox.ExecOutputBudget)
	}
}

func TestTimeoutHelpers(t *testing.T) {
	for _, tc := range []struct {
		in, want time.Duration
	}{
		{0, session.DefaultCommandTimeout},
		{-time.Second, session.DefaultCommandTimeout},
		{5 * time.Second, 5 * time.Second},
		{48 * time.Hour, session.CommandTimeoutCeiling},
	} {
		if got := sandbox.CommandTimeout(tc.in); got != tc.want {
			t.Errorf("CommandTimeout(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	req := sandbox.ExecRequest{Commands: []string{"a", "b", "c"}, Timeout: 10 * time.Second}
	if got, want := sandbox.ExecActivityTimeout(req), 30*time.Second+sandbox.ExecTimeoutMargin; got != want {
		t.Errorf("ExecActivityTimeout = %v, want %v", got, want)
	}
	req.Timeout = 24 * time.Hour
	if got := sandbox.ExecActivityTimeout(req); got <= 3*session.CommandTimeoutCeiling {
		t.Errorf("ExecActivityTimeout %v does not exceed the commands' total clamped time", got)
	}
	for _, tc := range []struct {
		n, requested, want int
	}{
		{1, 0, sandbox.DefaultOutputCap},
		{1, 1000, 1000},
		{1, 10 << 20, sandbox.ExecOutputBudget / 2},
		{64, 0, sandbox.ExecOutputBudget / 128},
	} {
		req := sandbox.ExecRequest{Commands: make([]string, tc.n), OutputCap: tc.requested}
		if got := sandbox.ExecOutputCap(req); got != tc.want {
			t.Errorf("ExecOutputCap(%d commands, cap %d) = %d, want %d", tc.n, tc.requested, got, tc.want)
		}
	}
}

func TestRecoverExec(t *testing.T) {
	req := sandbox.ExecRequest{CallID: "c", Commands: []string{"one", "two", "three"}}
	partial := sandbox.ExecResult{Results: []sandbox.CommandResult{
		{Command: "one", Result: sandbox.Result{Stdout: "1"}},
		{Command: "two", Error: "stopped", Result: sandbox.Result{Stdout: "par", ExitCode: 137}},
		{Command: "three", Skipped: true},
	}}
	if got, ok := sandbox.RecoverExec(req, temporal.NewCanceledError(partial)); !ok || got.Results[1].Stdout != "par" || !got.Results[2].Skipped {
		t.Errorf("from a cancellation: %+v, %v", got, ok)
	}

	prog := sandbox.ExecProgress{CallID: "c", Started: 1, Results: partial.Results[:1]}
	got, ok := sandbox.RecoverExec(req, temporal.NewHeartbeatTimeoutError(prog))
	if !ok || got.Results[0].Stdout != "1" || !got.Results[1].Interrupted || !got.Results[2].Interrupted {
		t.Errorf("from a heartbeat timeout: %+v, %v", got, ok)
	}
	got, ok = sandbox.RecoverExec(req, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil))
	if !ok || len(got.Results) != 3 || !got.Results[0].Interrupted {
		t.Errorf("from a timeout without details: %+v, %v", got, ok)
	}
	if _, ok := sandbox.RecoverExec(req, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)); ok {
		t.Error("a schedule-to-start timeout means nothing ran; RecoverExec must not invent results")
	}
	if _, ok := sandbox.RecoverExec(req, temporal.NewNonRetryableApplicationError("gone", sandbox.ErrTypeNotFound, nil)); ok {
		t.Error("an application error carries no outcome")
	}
}

// TestExecStopKillsRunningCommandAndSkipsTheRest cancels the activity's
// context (as a user's stop does, through the worker) once the second
// command has started.
func TestExecStopKillsRunningCommandAndSkipsTheRest(t *testing.T) {
	f := newFixture(t)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	req := sandbox.ExecRequest{Handle: h, CallID: "c", Timeout: time.Minute, Commands: []string{
		"echo first",
		"echo partial; touch started.flag; sleep 60; echo never",
		"echo third > third.txt",
	}}
	go func() {
		flag := filepath.Join(h.Workdir, "started.flag")
		for {
			if _, err := os.Stat(flag); err == nil {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	_, err := run[sandbox.ExecResult](f.env, f.acts.Exec, req)
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("Exec after stop: %v, want a CanceledError", err)
	}
	res, ok := sandbox.RecoverExec(req, err)
	if !ok || len(res.Results) != 3 {
		t.Fatalf("RecoverExec = %+v, %v", res, ok)
	}
	if r := res.Results[0]; r.Stdout != "first\n" || r.Error != "" {
		t.Errorf("first command %+v", r)
	}
	if r := res.Results[1]; r.Stdout != "partial\n" || !strings.Contains(r.Error, "stopped") || r.ExitCode == 0 || r.Interrupted {
		t.Errorf("stopped command %+v, want its partial output and a stop note", r)
	}
	if r := res.Results[2]; !r.Skipped {
		t.Errorf("command after the stop %+v, want Skipped", r)
	}
	if out := sandboxtest.Sh(t, f.local, h, "ls -A"); out != "started.flag\n" {
		t.Errorf("workspace after stop lists %q; the third command must not have run", out)
	}
}

// A quick command sends no heartbeat: the SDK makes a worker's first beat
// a synchronous call to the server, which a command that ends within the
// heartbeat interval does not need (the server's heartbeat timeout runs
// from the start anyway). One that outlasts the interval beats, carrying
// its progress.
func TestExecHeartbeatsOnlyOnceItOutlastsTheInterval(t *testing.T) {
	f := newFixture(t)
	beats := recordBeats(f)
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	if _, err := run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h, CallID: "quick", Commands: []string{"true"}}); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if n := len(beats()); n != 0 {
		t.Fatalf("a quick command sent %d heartbeats, want none", n)
	}
	slow := fmt.Sprintf("sleep %.1f", (sandbox.HeartbeatEvery + 500*time.Millisecond).Seconds())
	if _, err := run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h, CallID: "slow", Commands: []string{"echo first", slow}}); err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if b := beats(); len(b) == 0 || b[0].CallID != "slow" || b[0].Started != 1 || len(b[0].Results) != 1 {
		t.Fatalf("a command outlasting the interval: beats %+v, want one carrying the first command's result and the second's start", b)
	}
}

// recordBeats records the progress details of every heartbeat f's
// activities send; the returned function reads what was recorded so far.
func recordBeats(f *fixture) func() []sandbox.ExecProgress {
	var mu sync.Mutex
	var beats []sandbox.ExecProgress
	f.env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p sandbox.ExecProgress
		if details.HasValues() && details.Get(&p) == nil {
			mu.Lock()
			beats = append(beats, p)
			mu.Unlock()
		}
	})
	return func() []sandbox.ExecProgress {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(beats)
	}
}

// startRefused is the local backend, except that the commands named in
// refuse are never started: Exec fails as the Docker daemon failed a
// container start during its shutdown ("failed to update store for object
// type *libnetwork.endpoint"), or ends as a daemon that went away while
// the command ran (lost).
type startRefused struct {
	sandbox.Backend
	refuse, lost string
}

func (b startRefused) Exec(ctx context.Context, h sandbox.Handle, c sandbox.Cmd) (sandbox.Result, error) {
	switch c.Command {
	case b.refuse:
		return sandbox.Result{}, errors.New("docker: exec: start: failed to update store for object type *libnetwork.endpoint")
	case b.lost:
		res, err := b.Backend.Exec(ctx, h, c)
		if err != nil {
			return res, err
		}
		return sandbox.Result{ExitCode: -1}, fmt.Errorf("docker: exec: the Docker daemon went away before it was known to finish: %w", sandbox.ErrOutcomeUnknown)
	}
	return b.Backend.Exec(ctx, h, c)
}

// A command the backend could not start did not run, and its result must
// not say it did: no exit code 0 (the chaos suite caught one such command
// reported to the model, and on its card, as "exit code: 0" though its
// marker file was never written). One started whose end was lost is
// interrupted: it may have run, and is not run again.
func TestExecReportsACommandThatCouldNotRunAsNotRun(t *testing.T) {
	f := newFixtureOf(t, func(lb *local.Backend) sandbox.Backend {
		return startRefused{Backend: lb, refuse: "echo b >> marker", lost: "echo c >> marker"}
	})
	h := f.ensure(t, sandbox.EnsureRequest{SessionID: "s", Backend: local.Name}).Handle
	req := sandbox.ExecRequest{Handle: h, CallID: "call-9", Commands: []string{"echo a >> marker", "echo b >> marker"}}
	res, err := run[sandbox.ExecResult](f.env, f.acts.Exec, req)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if len(res.Results) != 2 {
		t.Fatalf("results %+v, want 2", res.Results)
	}
	if r := res.Results[0]; r.ExitCode != 0 || r.Error != "" {
		t.Errorf("the command that ran: %+v", r)
	}
	r := res.Results[1]
	if r.ExitCode == 0 || !strings.HasPrefix(r.Error, "could not run: ") || r.Interrupted {
		t.Errorf("the command that could not start: %+v, want a non-zero exit code and a could-not-run error", r)
	}
	text := agent.FormatShellResult(res.Results)
	if strings.Count(text, "exit code: 0") != 1 || !strings.Contains(text, "could not run: docker: exec: start: failed to update store") {
		t.Errorf("the model reads:\n%s\nwant one exit code 0 (the first command's) and the second's error", text)
	}
	if b, _ := os.ReadFile(filepath.Join(h.Workdir, "marker")); string(b) != "a\n" {
		t.Errorf("marker %q, want only the first command's line", b)
	}

	res, err = run[sandbox.ExecResult](f.env, f.acts.Exec, sandbox.ExecRequest{Handle: h, CallID: "call-10", Commands: []string{"echo c >> marker", "echo d >> marker"}})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if r := res.Results[0]; !r.Interrupted || r.ExitCode == 0 || !strings.Contains(r.Error, "went away") {
		t.Errorf("the command whose end was lost: %+v, want interrupted, with the backend's error", r)
	}
	if r := res.Results[1]; !r.Skipped {
		t.Errorf("the command after it: %+v, want skipped", r)
	}
	if text := agent.FormatShellResult(res.Results); strings.Contains(text, "exit code") || !strings.Contains(text, agent.InterruptedNote) {
		t.Errorf("the model reads:\n%s\nwant the interrupted note and no exit code", text)
	}
}
