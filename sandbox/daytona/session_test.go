package daytona_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	fakedaytona "github.com/sandbot/sandbot/internal/fake/daytona"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/daytona"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// op names a recorded call coarsely, by endpoint; "" for polls.
func op(c fakedaytona.Call) string {
	p := c.Path
	tb := strings.HasPrefix(p, "/toolbox/")
	switch {
	case c.Method == http.MethodPost && p == "/sandbox":
		return "create"
	case !tb && c.Method == http.MethodGet:
		return "" // state polls
	case !tb && c.Method == http.MethodDelete:
		return "delete"
	case !tb && c.Method == http.MethodPost:
		return p[strings.LastIndex(p, "/")+1:] // start, stop
	case strings.HasSuffix(p, "/process/execute"):
		return "execute"
	case strings.HasSuffix(p, "/process/session") && c.Method == http.MethodPost:
		return "session"
	case strings.HasSuffix(p, "/exec"):
		return "session-exec"
	case strings.Contains(p, "/process/session/") && c.Method == http.MethodDelete:
		return "session-delete"
	case strings.Contains(p, "/command/"):
		return "" // status polls
	case strings.HasSuffix(p, "/files/bulk-upload"):
		return "upload"
	case strings.HasSuffix(p, "/files/download"):
		return "download"
	case strings.HasSuffix(p, "/files") && c.Method == http.MethodDelete:
		return "delete-file"
	}
	return c.Method + " " + p
}

// ops lists the successful calls' ops since call index from.
func ops(calls []fakedaytona.Call, from int) []string {
	var out []string
	for _, c := range calls[from:] {
		if o := op(c); o != "" && c.Status < 400 {
			out = append(out, o)
		}
	}
	return out
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestSessionCallSequence(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{Deployment: "prod"})
	ctx := ctxT(t)
	h, err := b.Create(ctx, sandbox.Spec{SessionID: "slack:C1:1.2", Labels: map[string]string{"platform": "slack"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Import(ctx, h, bytes.NewReader(sandboxtest.BuildTar(t, sandboxtest.TarEntry{Name: "in.txt", Body: "imported"}))); err != nil {
		t.Fatal(err)
	}
	if res, err := b.Exec(ctx, h, sandbox.Cmd{Command: "cat in.txt"}); err != nil || res.Stdout != "imported" {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	if err := b.Export(ctx, h, new(bytes.Buffer)); err != nil {
		t.Fatal(err)
	}
	if err := b.Suspend(ctx, h); err != nil {
		t.Fatal(err)
	}
	if got := srv.Sandboxes()[0].State; got != "stopped" {
		t.Fatalf("after Suspend the sandbox is %s", got)
	}
	refusedAt := len(srv.Calls())
	if res, err := b.Exec(ctx, h, sandbox.Cmd{Command: "echo again"}); err != nil || res.Stdout != "again\n" {
		t.Fatalf("Exec on a stopped sandbox = %+v, %v", res, err)
	}
	if c := srv.Calls()[refusedAt]; op(c) != "session" || c.Status != http.StatusConflict {
		t.Errorf("first call on the stopped sandbox: %s %s %d, want the toolbox's refusal", c.Method, c.Path, c.Status)
	}
	if err := b.Suspend(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := b.Resume(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := b.Destroy(ctx, h); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create", "execute", // mkdir workspace
		"upload", "execute", // extract
		"session", "session-exec", "session-delete", "execute", "download", "execute", // exec, collect, remove output
		"execute", "download", "delete-file", // export
		"stop",
		"start", "session", "session-exec", "session-delete", "execute", "download", "execute", // exec resumes
		"stop", "start", "delete",
	}
	calls := srv.Calls()
	if got := ops(calls, 0); !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
	var body map[string]any
	if err := json.Unmarshal(calls[0].Body, &body); err != nil {
		t.Fatalf("create body %q: %v", calls[0].Body, err)
	}
	if body["autoStopInterval"] != 15.0 || body["autoDeleteInterval"] != -1.0 {
		t.Errorf("create body %s: want autoStopInterval 15 and autoDeleteInterval -1 sent explicitly", calls[0].Body)
	}
	labels, _ := body["labels"].(map[string]any)
	for k, v := range map[string]string{"sandbot.managed": "true", "sandbot.session": "slack:C1:1.2", "sandbot.deployment": "prod", "platform": "slack"} {
		if labels[k] != v {
			t.Errorf("label %s = %v, want %q", k, labels[k], v)
		}
	}
	for _, c := range calls {
		if strings.HasPrefix(c.Path, "/toolbox/") && !strings.HasPrefix(c.Path, "/toolbox/"+h.ID+"/") {
			t.Errorf("toolbox call outside the sandbox's base: %s", c.Path)
		}
	}
}

func TestVanishedMidSession(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(t, b)
	sandboxtest.Sh(t, b, h, "echo x > f")
	srv.Vanish(h.ID)
	ctx := ctxT(t)
	if alive, err := b.Alive(ctx, h); alive || err != nil {
		t.Errorf("Alive after vanishing = %v, %v; want false, nil", alive, err)
	}
	if _, err := b.Exec(ctx, h, sandbox.Cmd{Command: "true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Exec after vanishing: %v, want ErrNotFound", err)
	}
	if err := b.Import(ctx, h, bytes.NewReader(sandboxtest.BuildTar(t, sandboxtest.TarEntry{Name: "a", Body: "a"}))); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Import after vanishing: %v, want ErrNotFound", err)
	}
	if err := b.Export(ctx, h, new(bytes.Buffer)); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Export after vanishing: %v, want ErrNotFound", err)
	}
}

// sleeps records the waits a backend asks for and returns at once.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) list() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d)
}

func TestConflictIsWaitedOut(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{TransitionTicks: 4})
	var sl sleeps
	b := newBackend(t, srv, daytona.Options{Sleep: sl.sleep})
	h := sandboxtest.NewSandbox(t, b)
	ctx := ctxT(t)
	if err := b.Suspend(ctx, h); err != nil {
		t.Fatal(err)
	}
	// Someone else starts it; the stop arrives mid-transition.
	req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/sandbox/"+h.ID+"/start", nil)
	req.Header.Set("Authorization", "Bearer "+srv.APIKey())
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("start: %v %v", resp, err)
	}
	resp.Body.Close()
	if st := srv.Sandboxes()[0].State; st != "starting" {
		t.Fatalf("state %s, want starting", st)
	}
	from := len(srv.Calls())
	// An injected 409 on start, on top of the transition.
	srv.Fail(http.MethodPost, "/sandbox/"+h.ID+"/stop", http.StatusConflict, 2, nil)
	if err := b.Suspend(ctx, h); err != nil {
		t.Fatalf("Suspend during a start: %v", err)
	}
	if err := b.Resume(ctx, h); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := b.Suspend(ctx, h); err != nil {
		t.Fatalf("Suspend: %v", err)
	}
	if err := b.Resume(ctx, h); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	// The sandbox is started now; stop it behind the backend's back and
	// destroy it mid-transition.
	req, _ = http.NewRequest(http.MethodPost, srv.URL()+"/sandbox/"+h.ID+"/stop", nil)
	req.Header.Set("Authorization", "Bearer "+srv.APIKey())
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stop: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := b.Destroy(ctx, h); err != nil {
		t.Fatalf("Destroy during a stop: %v", err)
	}
	count := func(method, suffix string) (all, conflicts int) {
		for _, c := range srv.Calls()[from:] {
			if c.Method == method && strings.HasSuffix(c.Path, suffix) {
				all++
				if c.Status == http.StatusConflict {
					conflicts++
				}
			}
		}
		return all, conflicts
	}
	if all, conflicts := count(http.MethodPost, "/stop"); conflicts != 2 || all != 5 {
		t.Errorf("%d stop calls, %d of them 409: want two injected 409s retried, two stops of the backend and ours", all, conflicts)
	}
	if all, conflicts := count(http.MethodDelete, "/sandbox/"+h.ID); conflicts == 0 || all != conflicts+1 {
		t.Errorf("%d delete calls, %d of them 409: want 409s retried until one succeeded", all, conflicts)
	}
	if len(srv.Sandboxes()) != 0 {
		t.Errorf("sandbox left after Destroy: %+v", srv.Sandboxes())
	}
	if len(sl.list()) == 0 {
		t.Error("no waits between retries")
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	var sl sleeps
	b := newBackend(t, srv, daytona.Options{Sleep: sl.sleep})
	srv.Fail(http.MethodPost, "/sandbox", http.StatusTooManyRequests, 2, http.Header{
		"X-Ratelimit-Remaining-Sandbox-Create": {"0"},
		"Retry-After-Sandbox-Create":           {"7"},
	})
	h := sandboxtest.NewSandbox(t, b)
	if h.ID == "" {
		t.Fatal("no sandbox")
	}
	var creates []int
	for _, c := range srv.Calls() {
		if c.Method == http.MethodPost && c.Path == "/sandbox" {
			creates = append(creates, c.Status)
		}
	}
	if !slices.Equal(creates, []int{429, 429, 200}) {
		t.Errorf("create statuses %v, want 429, 429, 200", creates)
	}
	var honoured int
	for _, d := range sl.list() {
		if d >= 7*time.Second {
			honoured++
		}
	}
	if honoured != 2 {
		t.Errorf("waits %v: want two of at least the 7 s Retry-After", sl.list())
	}
}

func TestServerErrorsAreRetried(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(t, b)
	srv.Fail(http.MethodGet, "/sandbox/"+h.ID, http.StatusBadGateway, 2, nil)
	if alive, err := b.Alive(ctxT(t), h); !alive || err != nil {
		t.Errorf("Alive after two 502s = %v, %v", alive, err)
	}
	srv.Fail(http.MethodPost, "/toolbox/"+h.ID+"/process/session", http.StatusServiceUnavailable, 2, nil)
	if got := sandboxtest.Sh(t, b, h, "echo ok"); got != "ok\n" {
		t.Errorf("Exec after two toolbox 503s: %q", got)
	}
}

func TestStoppedSandboxResumesOnDemand(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(t, b)
	ctx := ctxT(t)
	sandboxtest.Sh(t, b, h, "echo kept > f")
	archive := new(bytes.Buffer)
	for name, step := range map[string]func() error{
		"Export": func() error { return b.Export(ctx, h, archive) },
		"Import": func() error {
			return b.Import(ctx, h, bytes.NewReader(sandboxtest.BuildTar(t, sandboxtest.TarEntry{Name: "f", Body: "kept\n"})))
		},
		"Fingerprint": func() error { _, err := b.Fingerprint(ctx, h); return err },
		"Exec":        func() error { _, err := b.Exec(ctx, h, sandbox.Cmd{Command: "true"}); return err },
	} {
		if err := b.Suspend(ctx, h); err != nil {
			t.Fatal(err)
		}
		if alive, err := b.Alive(ctx, h); !alive || err != nil {
			t.Errorf("Alive on a stopped sandbox = %v, %v; want true", alive, err)
		}
		if err := step(); err != nil {
			t.Errorf("%s on a stopped sandbox: %v", name, err)
		}
		if st := srv.Sandboxes()[0].State; st != "started" {
			t.Errorf("%s left the sandbox %s", name, st)
		}
	}
	if got := sandboxtest.Sh(t, b, h, "cat f"); got != "kept\n" {
		t.Errorf("workspace after the round: %q", got)
	}
}

func TestCreateFromImage(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{Image: "ubuntu:24.04", Target: "eu", AutoStop: 90 * time.Second})
	sandboxtest.NewSandbox(t, b)
	var body struct {
		Snapshot  *string
		Target    string
		BuildInfo struct{ DockerfileContent string }
		AutoStop  int `json:"autoStopInterval"`
	}
	if err := json.Unmarshal(srv.Calls()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Snapshot != nil || body.BuildInfo.DockerfileContent != "FROM ubuntu:24.04" || body.Target != "eu" || body.AutoStop != 2 {
		t.Errorf("create body %s: want buildInfo FROM ubuntu:24.04, no snapshot, target eu, autoStopInterval 2 (rounded up)", srv.Calls()[0].Body)
	}
}
