package e2b_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fakee2b "github.com/sandbot/sandbot/internal/fake/e2b"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/e2b"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

// op names a recorded call coarsely: method, path with the sandbox ID
// replaced by {id}, and which helper a Start ran.
func op(c fakee2b.Call, id string) string {
	p := strings.ReplaceAll(c.Path, id, "{id}")
	s := c.Method + " " + p
	switch {
	case p != "/process.Process/Start" || len(c.Args) == 0:
	case c.Args[0] == "/bin/sh" && len(c.Args) > 3:
		s += " " + c.Args[3] // sandbot-exec, sandbot-kill, ...
	default:
		s += " " + c.Args[0] // mkdir, tar, rm
	}
	return s
}

// ops lists the distinct operations in the order they first happened.
func ops(calls []fakee2b.Call, id string) []string {
	var out []string
	for _, c := range calls {
		o := op(c, id)
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// inOrder reports whether want appears in got as a subsequence.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func tarOf(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSessionCallSequence(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	b := newBackend(t, fake, e2b.Options{})
	ctx := ctxT(t)
	h, err := b.Create(ctx, sandbox.Spec{SessionID: "s1", Labels: map[string]string{"platform": "slack"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Import(ctx, h, bytes.NewReader(tarOf(t, map[string]string{"a.txt": "hello"}))); err != nil {
		t.Fatal(err)
	}
	if got := sandboxtest.Sh(t, b, h, "cat a.txt"); got != "hello" {
		t.Fatalf("cat a.txt = %q", got)
	}
	var out bytes.Buffer
	if err := b.Export(ctx, h, &out); err != nil {
		t.Fatal(err)
	}
	if e := sandboxtest.ReadEntries(t, &out); len(e) != 1 {
		t.Errorf("export: %v", e)
	}
	if err := b.Suspend(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := b.Suspend(ctx, h); err != nil {
		t.Fatalf("second Suspend: %v", err)
	}
	if alive, err := b.Alive(ctx, h); err != nil || !alive {
		t.Fatalf("Alive of a paused sandbox = %v, %v", alive, err)
	}
	// On demand: Exec resumes the paused sandbox.
	if got := sandboxtest.Sh(t, b, h, "cat a.txt"); got != "hello" {
		t.Fatalf("after resume: cat a.txt = %q", got)
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
	got := ops(fake.Calls(), h.ID)
	want := []string{
		"POST /sandboxes",
		"POST /process.Process/Start mkdir",
		"POST /files", // import upload
		"POST /process.Process/Start sandbot-import",
		"POST /process.Process/Start sandbot-exec",
		"POST /process.Process/Start tar",
		"GET /files", // export download
		"POST /process.Process/Start rm",
		"POST /sandboxes/{id}/pause",
		"GET /sandboxes/{id}",
		"POST /sandboxes/{id}/connect",
		"DELETE /sandboxes/{id}",
	}
	if !inOrder(got, want) {
		t.Errorf("calls in order %q\nwant these in this order %q", got, want)
	}
	for _, c := range fake.Calls() {
		if c.Service == "envd" && c.Sandbox != h.ID {
			t.Errorf("envd call %s %s routed to %q", c.Method, c.Path, c.Sandbox)
		}
	}
	if n := len(fake.Sandboxes()); n != 0 {
		t.Errorf("%d sandboxes left", n)
	}
}

func TestMetadataAndTTL(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	b := newBackend(t, fake, e2b.Options{Deployment: "prod", Labels: map[string]string{"team": "x"}, TTL: time.Hour})
	h := sandboxtest.NewSandbox(t, b)
	sbs := fake.Sandboxes()
	if len(sbs) != 1 {
		t.Fatalf("sandboxes: %+v", sbs)
	}
	md := sbs[0].Metadata
	if md["sandbot.managed"] != "true" || md["sandbot.session"] != h.SessionID || md["sandbot.deployment"] != "prod" || md["team"] != "x" || md["test"] != "sandboxtest" {
		t.Errorf("metadata %v", md)
	}
	if !sbs[0].AutoPause || time.Until(sbs[0].EndAt) < 50*time.Minute {
		t.Errorf("autoPause %v, endAt in %v; want true and about an hour", sbs[0].AutoPause, time.Until(sbs[0].EndAt))
	}
	// The TTL runs out: autoPause pauses it; the next command resumes it.
	fake.Expire(h.ID)
	if st := fake.Sandboxes()[0].State; st != "paused" {
		t.Fatalf("state after Expire %q", st)
	}
	sandboxtest.Sh(t, b, h, "true")
	if st := fake.Sandboxes()[0].State; st != "running" {
		t.Errorf("state after Exec %q", st)
	}
}

func TestVanished(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	b := newBackend(t, fake, e2b.Options{})
	ctx := ctxT(t)
	h := sandboxtest.NewSandbox(t, b)
	sandboxtest.Sh(t, b, h, "true")
	fake.Vanish(h.ID)
	if alive, err := b.Alive(ctx, h); err != nil || alive {
		t.Errorf("Alive after vanish = %v, %v; want false, nil", alive, err)
	}
	_, err := b.Exec(ctx, h, sandbox.Cmd{Command: "true"})
	if !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Exec after vanish: %v, want ErrNotFound", err)
	}
	var buf bytes.Buffer
	if err := b.Export(ctx, h, &buf); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Export after vanish: %v, want ErrNotFound", err)
	}
	if err := b.Import(ctx, h, bytes.NewReader(tarOf(t, nil))); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Import after vanish: %v, want ErrNotFound", err)
	}
}

func TestRetries(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	rec := &sleeps{}
	b := newBackend(t, fake, e2b.Options{Sleep: rec.sleep})
	ctx := ctxT(t)

	fake.Fail("POST", "/sandboxes", 429, 1, http.Header{"Retry-After": {"7"}})
	h := sandboxtest.NewSandbox(t, b)
	if w := rec.all(); len(w) != 1 || w[0] < 7*time.Second {
		t.Errorf("waits after a 429 with Retry-After: 7: %v", w)
	}

	if err := b.Suspend(ctx, h); err != nil {
		t.Fatal(err)
	}
	fake.Fail("POST", "/sandboxes/"+h.ID+"/connect", 409, 3, nil)
	before := len(rec.all())
	if err := b.Resume(ctx, h); err != nil {
		t.Fatalf("Resume through three 409s: %v", err)
	}
	if n := len(rec.all()) - before; n != 3 {
		t.Errorf("waited %d times for three 409s", n)
	}

	fake.Fail("POST", "/process.Process/Start", 503, 2, nil)
	if got := sandboxtest.Sh(t, b, h, "echo ok"); got != "ok\n" {
		t.Errorf("after two 503s: %q", got)
	}
	connects := 0
	for _, c := range fake.Calls() {
		if c.Path == "/sandboxes/"+h.ID+"/connect" {
			connects++
		}
	}
	if connects != 4 {
		t.Errorf("%d connect calls, want 4 (three 409s and the success)", connects)
	}
}

func TestOutputFlood(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	b := newBackend(t, fake, e2b.Options{})
	h := sandboxtest.NewSandbox(t, b)
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			default:
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			time.Sleep(5 * time.Millisecond) // sampling rate, not a wait for an event
		}
	}()
	const total = 50 << 20
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "head -c 52428800 /dev/zero | tr '\\0' x", OutputCap: 4096})
	close(stop)
	<-sampled
	if !res.Truncated || len(res.Stdout) > 4096 {
		t.Errorf("Truncated %v, %d bytes kept", res.Truncated, len(res.Stdout))
	}
	if kept := int64(len(res.Stdout)); res.DroppedBytes != total-kept+int64(len(sandbox.TruncationMarker)) && res.DroppedBytes != total-kept {
		t.Errorf("DroppedBytes %d, want %d less what was kept (%d)", res.DroppedBytes, total, kept)
	}
	if grew := int64(peak.Load()) - int64(base.HeapInuse); grew > 24<<20 {
		t.Errorf("heap grew by %d MiB while 50 MiB streamed through", grew>>20)
	}
}

func TestTimeoutKillsChildren(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	b := newBackend(t, fake, e2b.Options{})
	h := sandboxtest.NewSandbox(t, b)
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "sleep 100 & echo $! > bg.pid; echo started; sleep 100", Timeout: 300 * time.Millisecond})
	if !res.TimedOut || res.ExitCode != 137 || res.Stdout != "started\n" {
		t.Errorf("result %+v", res)
	}
	got := sandboxtest.Sh(t, b, h, `pid=$(cat bg.pid); i=0; while kill -0 "$pid" 2>/dev/null; do i=$((i+1)); [ $i -gt 200 ] && { echo alive; exit 0; }; sleep 0.05; done; echo gone`)
	if got != "gone\n" {
		t.Errorf("background child after the timeout: %q", got)
	}
	var kill, signal bool
	for _, c := range fake.Calls() {
		kill = kill || slices.Contains(c.Args, "sandbot-kill")
		signal = signal || c.Path == "/process.Process/SendSignal"
	}
	if !kill || !signal {
		t.Errorf("group kill ran %v, wrapper signalled %v; want both", kill, signal)
	}
}

func TestErrorsAndSecrets(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	ctx := ctxT(t)

	bad := newBackend(t, fake, e2b.Options{APIKey: "e2b_wrong"})
	_, err := bad.Create(ctx, sandbox.Spec{SessionID: "s"})
	if !errors.Is(err, sandbox.ErrUnauthenticated) || !strings.Contains(err.Error(), "E2B_API_KEY") || !strings.Contains(err.Error(), fake.URL()) {
		t.Errorf("Create with a wrong key: %v", err)
	}
	if err := bad.Check(ctx); !errors.Is(err, sandbox.ErrUnauthenticated) {
		t.Errorf("Check with a wrong key: %v", err)
	}
	named := newBackend(t, fake, e2b.Options{APIKey: "e2b_wrong", KeySetting: "OTHER_E2B_KEY"})
	if err := named.Check(ctx); err == nil || !strings.Contains(err.Error(), "OTHER_E2B_KEY") {
		t.Errorf("Check names %v", err)
	}

	b := newBackend(t, fake, e2b.Options{})
	if err := b.Check(ctx); err != nil {
		t.Errorf("Check: %v", err)
	}
	h := sandboxtest.NewSandbox(t, b)

	fake.SetDown("scheduled maintenance until 03:00 UTC")
	err = b.Check(ctx)
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "scheduled maintenance") {
		t.Errorf("Check during an outage: %v", err)
	}
	if _, err := b.Exec(ctx, h, sandbox.Cmd{Command: "true"}); !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("Exec during an outage: %v", err)
	}
	fake.SetDown("")

	// No secret in the handle, and a fresh backend needs only the handle.
	raw, _ := json.Marshal(h)
	req, _ := http.NewRequestWithContext(ctx, "GET", fake.URL()+"/sandboxes/"+h.ID, nil)
	req.Header.Set("X-API-Key", fake.Options().APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var detail struct {
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&detail)
	resp.Body.Close()
	if detail.EnvdAccessToken == "" {
		t.Fatal("the fake gave the sandbox no access token")
	}
	for _, secret := range []string{fake.Options().APIKey, detail.EnvdAccessToken} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("handle %s carries a secret", raw)
		}
	}
	var back sandbox.Handle
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	fresh := newBackend(t, fake, e2b.Options{})
	if got := sandboxtest.Sh(t, fresh, back, "echo $HOME; pwd"); got != h.Workdir+"\n"+h.Workdir+"\n" {
		t.Errorf("fresh backend: %q", got)
	}
	for i := range 2 {
		if err := b.Destroy(ctx, h); err != nil {
			t.Errorf("Destroy #%d: %v", i+1, err)
		}
	}
}

func TestEnvironment(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	t.Setenv("SANDBOT_TEST_SECRET", "leak")
	b := newBackend(t, fake, e2b.Options{})
	h := sandboxtest.NewSandbox(t, b)
	env := sandboxtest.Sh(t, b, h, "env")
	for _, want := range []string{"HOME=" + h.Workdir, "LANG=C.UTF-8", "TERM=dumb"} {
		if !strings.Contains(env, want+"\n") {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	if strings.Contains(env, "SANDBOT_TEST_SECRET") {
		t.Error("the worker's environment reached the command")
	}
}

func TestImportUnsafeUploadsNothing(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	b := newBackend(t, fake, e2b.Options{})
	ctx := ctxT(t)
	h := sandboxtest.NewSandbox(t, b)
	var symlinkTar bytes.Buffer
	tw := tar.NewWriter(&symlinkTar)
	_ = tw.WriteHeader(&tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc", Mode: 0o777})
	_ = tw.WriteHeader(&tar.Header{Name: "link/passwd", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	for name, archive := range map[string][]byte{
		"absolute": tarOf(t, map[string]string{"/tmp/evil": "x"}),
		"dotdot":   tarOf(t, map[string]string{"../evil": "x"}),
		"symlink":  symlinkTar.Bytes(),
	} {
		fake.ResetCalls()
		err := b.Import(ctx, h, bytes.NewReader(archive))
		if !errors.Is(err, sandbox.ErrUnsafeArchive) {
			t.Errorf("%s: Import: %v, want ErrUnsafeArchive", name, err)
		}
		for _, c := range fake.Calls() {
			if c.Path == "/files" || strings.HasPrefix(c.Path, "/process.") {
				t.Errorf("%s: %s %s reached the sandbox", name, c.Method, c.Path)
			}
		}
	}
}

// toFake sends requests for envd hosts (https://49983-<id>.<domain>) to
// the fake's plain-HTTP envd listener, keeping the Host header the
// proxy routes by.
type toFake struct{ envd *url.URL }

func (f toFake) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasPrefix(req.URL.Host, "49983-") {
		req = req.Clone(req.Context())
		req.Host = req.URL.Host
		req.URL.Scheme, req.URL.Host = f.envd.Scheme, f.envd.Host
	}
	return http.DefaultTransport.RoundTrip(req)
}

func TestEnvdByHostName(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	envdURL, _ := url.Parse(fake.SandboxURL())
	b, err := e2b.New(e2b.Options{
		APIURL: fake.URL(), APIKey: fake.Options().APIKey, Domain: "sandbox.test",
		HTTPClient: &http.Client{Transport: toFake{envdURL}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := sandboxtest.NewSandbox(t, b)
	if got := sandboxtest.Sh(t, b, h, "echo hi"); got != "hi\n" {
		t.Errorf("echo hi: %q", got)
	}
	n := 0
	for _, c := range fake.Calls() {
		if c.Service == "envd" {
			n++
			if c.Sandbox != h.ID {
				t.Errorf("%s %s routed to %q", c.Method, c.Path, c.Sandbox)
			}
		}
	}
	if n == 0 {
		t.Error("no envd call recorded")
	}
}
