package fakee2b_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	fakee2b "github.com/sandbot/sandbot/internal/fake/e2b"
)

// client talks to a fake the way the wire requires, without the backend.
type client struct {
	t    *testing.T
	fake *fakee2b.Server
}

func (c client) api(method, path, ctype, body string) (int, []byte, http.Header) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.fake.URL()+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("X-API-Key", c.fake.Options().APIKey)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	return do(c.t, req)
}

func do(t *testing.T, req *http.Request) (int, []byte, http.Header) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, resp.Header
}

type created struct {
	SandboxID       string `json:"sandboxID"`
	EnvdAccessToken string `json:"envdAccessToken"`
	EnvdVersion     string `json:"envdVersion"`
}

func (c client) create() created {
	c.t.Helper()
	st, raw, _ := c.api("POST", "/sandboxes", "application/json", `{"templateID":"base","timeout":600,"secure":true,"autoPause":true}`)
	if st != 201 {
		c.t.Fatalf("create: %d %s", st, raw)
	}
	var s created
	if err := json.Unmarshal(raw, &s); err != nil {
		c.t.Fatal(err)
	}
	return s
}

func (c client) envdReq(s created, method, path string, body io.Reader) *http.Request {
	req, err := http.NewRequest(method, c.fake.SandboxURL()+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("E2b-Sandbox-Id", s.SandboxID)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	req.Header.Set("X-Access-Token", s.EnvdAccessToken)
	req.Header.Set("Authorization", "Basic dXNlcjo=")
	return req
}

// start opens a Start stream for sh -c script.
func (c client) start(ctx context.Context, s created, script string, cwd string, hdr map[string]string) *http.Response {
	c.t.Helper()
	msg, _ := json.Marshal(map[string]any{"process": map[string]any{"cmd": "/bin/sh", "args": []string{"-c", script}, "cwd": cwd}, "stdin": false})
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	frame = append(frame, msg...)
	req := c.envdReq(s, "POST", "/process.Process/Start", bytes.NewReader(frame)).WithContext(ctx)
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		c.t.Fatalf("Start: %d", resp.StatusCode)
	}
	return resp
}

type frame struct {
	flag byte
	json string
}

// frames reads envelopes until end of stream.
func frames(t *testing.T, r io.Reader) []frame {
	t.Helper()
	br := bufio.NewReader(r)
	var out []frame
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			t.Fatalf("stream ended without end-of-stream: %v (after %v)", err, out)
		}
		p := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatal(err)
		}
		out = append(out, frame{hdr[0], string(p)})
		if hdr[0] == 2 {
			return out
		}
	}
}

func TestControlPlaneValidation(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	c := client{t, fake}
	req, _ := http.NewRequest("POST", fake.URL()+"/sandboxes", strings.NewReader(`{"templateID":"base"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "e2b_nope")
	if st, raw, _ := do(t, req); st != 401 || !strings.Contains(string(raw), `"code":401`) {
		t.Errorf("wrong key: %d %s", st, raw)
	}
	for name, tc := range map[string]struct{ ctype, body string }{
		"snake_case":   {"application/json", `{"template_id":"base"}`},
		"no template":  {"application/json", `{"timeout":60}`},
		"zero timeout": {"application/json", `{"templateID":"base","timeout":0}`},
		"text body":    {"text/plain", `{"templateID":"base"}`},
	} {
		if st, raw, _ := c.api("POST", "/sandboxes", tc.ctype, tc.body); st != 400 || !strings.Contains(string(raw), `"code":400`) {
			t.Errorf("%s: %d %s", name, st, raw)
		}
	}
	st, raw, _ := c.api("POST", "/sandboxes", "application/json", `{"templateID":"base","metadata":{"k":"v"}}`)
	if st != 201 || !strings.Contains(string(raw), `"envdVersion":"0.6.13"`) {
		t.Fatalf("create: %d %s", st, raw)
	}
	sbs := fake.Sandboxes()
	if len(sbs) != 1 || time.Until(sbs[0].EndAt) > 15*time.Second || time.Until(sbs[0].EndAt) < 10*time.Second {
		t.Errorf("default TTL: %+v", sbs)
	}
	id := sbs[0].ID
	if st, raw, _ := c.api("GET", "/v2/sandboxes?metadata="+url.QueryEscape("k=v"), "", ""); st != 200 || !strings.Contains(string(raw), id) {
		t.Errorf("list k=v: %d %s", st, raw)
	}
	if st, raw, _ := c.api("GET", "/v2/sandboxes?metadata="+url.QueryEscape("k=w"), "", ""); st != 200 || string(bytes.TrimSpace(raw)) != "[]" {
		t.Errorf("list k=w: %d %s", st, raw)
	}
	if st, _, _ := c.api("POST", "/sandboxes/"+id+"/pause", "", ""); st != 204 {
		t.Errorf("pause: %d", st)
	}
	if st, _, _ := c.api("POST", "/sandboxes/"+id+"/pause", "", ""); st != 409 {
		t.Errorf("second pause: %d", st)
	}
	if st, _, _ := c.api("POST", "/sandboxes/"+id+"/connect", "application/json", `{"timeout":60}`); st != 201 {
		t.Errorf("connect paused: %d", st)
	}
	if st, _, _ := c.api("POST", "/sandboxes/"+id+"/connect", "application/json", `{"timeout":60}`); st != 200 {
		t.Errorf("connect running: %d", st)
	}
	if st, _, _ := c.api("DELETE", "/sandboxes/"+id, "", ""); st != 204 {
		t.Errorf("kill: %d", st)
	}
	if st, _, _ := c.api("DELETE", "/sandboxes/"+id, "", ""); st != 404 {
		t.Errorf("second kill: %d", st)
	}
}

func TestExpireWithoutAutoPauseKills(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	c := client{t, fake}
	st, raw, _ := c.api("POST", "/sandboxes", "application/json", `{"templateID":"base","timeout":60}`)
	if st != 201 {
		t.Fatal(st, string(raw))
	}
	id := fake.Sandboxes()[0].ID
	fake.Expire(id)
	if n := len(fake.Sandboxes()); n != 0 {
		t.Errorf("%d sandboxes after the TTL of one without autoPause", n)
	}
}

func TestEnvdRoutingAndAuth(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	c := client{t, fake}
	s := c.create()
	// Host-prefix routing: 49983-<id>.<domain> reaches the same envd.
	req, _ := http.NewRequest("GET", fake.SandboxURL()+"/health", nil)
	req.Host = "49983-" + s.SandboxID + ".e2b.app"
	if st, _, _ := do(t, req); st != 204 {
		t.Errorf("health by host: %d", st)
	}
	req = c.envdReq(s, "GET", "/files?path=/home/user/nothing", nil)
	req.Header.Set("X-Access-Token", "wrong")
	if st, raw, _ := do(t, req); st != 401 {
		t.Errorf("wrong token: %d %s", st, raw)
	}
	if st, raw, _ := do(t, c.envdReq(s, "GET", "/files?path=/home/user/nothing", nil)); st != 404 || !strings.Contains(string(raw), "does not exist") {
		t.Errorf("missing file: %d %s", st, raw)
	}
	if st, _, _ := do(t, c.envdReq(s, "GET", "/files?path=/home/user", nil)); st != 400 {
		t.Errorf("directory: %d", st)
	}
	// Multipart upload, then octet-stream download.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "x.bin")
	_, _ = fw.Write([]byte("multi"))
	_ = mw.Close()
	req = c.envdReq(s, "POST", "/files?path=/home/user/d/x.bin&username=user", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if st, raw, _ := do(t, req); st != 200 || !strings.Contains(string(raw), `"type":"file"`) {
		t.Errorf("multipart upload: %d %s", st, raw)
	}
	if st, raw, _ := do(t, c.envdReq(s, "GET", "/files?path=/home/user/d/x.bin", nil)); st != 200 || string(raw) != "multi" {
		t.Errorf("download: %d %q", st, raw)
	}
	// Paused: the proxy's 502, no auto-resume.
	c.api("POST", "/sandboxes/"+s.SandboxID+"/pause", "", "")
	if st, raw, _ := do(t, c.envdReq(s, "GET", "/health", nil)); st != 502 || !strings.Contains(string(raw), "The sandbox was not found") {
		t.Errorf("paused: %d %s", st, raw)
	}
}

func TestStartStream(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	c := client{t, fake}
	s := c.create()
	ctx := context.Background()
	resp := c.start(ctx, s, "echo out; echo err >&2", "", nil)
	if ct := resp.Header.Get("Content-Type"); ct != "application/connect+json" {
		t.Errorf("content type %q", ct)
	}
	fs := frames(t, resp.Body)
	resp.Body.Close()
	all := ""
	for _, f := range fs {
		all += f.json + "\n"
	}
	if !strings.Contains(fs[0].json, `{"event":{"start":{"pid":`) {
		t.Errorf("first frame %s", fs[0].json)
	}
	end := fs[len(fs)-2].json
	if end != `{"event":{"end":{"exited":true,"status":"exit status 0"}}}` {
		t.Errorf("end of a clean exit (zero exitCode left out): %s", end)
	}
	if fs[len(fs)-1].json != "{}" {
		t.Errorf("end of stream %s", fs[len(fs)-1].json)
	}
	if !strings.Contains(all, `"stdout":"b3V0Cg=="`) || !strings.Contains(all, `"stderr":"ZXJyCg=="`) {
		t.Errorf("data frames: %s", all)
	}

	resp = c.start(ctx, s, "true", "/home/user/nowhere", nil)
	fs = frames(t, resp.Body)
	resp.Body.Close()
	if len(fs) != 1 || !strings.Contains(fs[0].json, `"invalid_argument"`) {
		t.Errorf("missing cwd: %v", fs)
	}

	// Keepalives during silence, at the requested interval (seconds);
	// the command outlasts one interval whatever the load.
	resp = c.start(ctx, s, "sleep 1.5; echo done", "", map[string]string{"Keepalive-Ping-Interval": "1"})
	fs = frames(t, resp.Body)
	resp.Body.Close()
	if !strings.Contains(fs[1].json, `{"event":{"keepalive":{}}}`) {
		t.Errorf("no keepalive during 1.5 s of silence: %v", fs)
	}
}

// pidAlive reports whether a process exists and is not a zombie.
func pidAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(st), ") Z ")
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readPid waits for a file in the sandbox holding a pid.
func (c client) readPid(s created, p string) int {
	c.t.Helper()
	var pid int
	waitUntil(c.t, p, func() bool {
		_, raw, _ := do(c.t, c.envdReq(s, "GET", "/files?path="+p, nil))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		return pid > 0
	})
	return pid
}

func TestDeadlineKillsOnlyTheProcess(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	c := client{t, fake}
	s := c.create()
	resp := c.start(context.Background(), s, "sleep 100 & echo $! > /tmp/bg; sleep 100", "", map[string]string{"Connect-Timeout-Ms": "300"})
	fs := frames(t, resp.Body)
	resp.Body.Close()
	if last := fs[len(fs)-1]; last.flag != 2 || !strings.Contains(last.json, `"deadline_exceeded"`) {
		t.Errorf("end of stream %v", last)
	}
	bg := c.readPid(s, "/tmp/bg")
	if !pidAlive(bg) {
		t.Error("the deadline killed the background child too; envd kills only the process it started")
	}
	// Pausing kills everything.
	c.api("POST", "/sandboxes/"+s.SandboxID+"/pause", "", "")
	waitUntil(t, "the child to die with the pause", func() bool { return !pidAlive(bg) })
}

func TestSignalAndDisconnect(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	c := client{t, fake}
	s := c.create()
	ctx, cancel := context.WithCancel(context.Background())
	resp := c.start(ctx, s, "echo $$ > /tmp/me; sleep 100 & echo $! > /tmp/bg; wait", "", nil)
	me, bg := c.readPid(s, "/tmp/me"), c.readPid(s, "/tmp/bg")
	cancel() // the client goes away
	resp.Body.Close()
	if !pidAlive(me) {
		t.Fatal("a disconnect killed the process")
	}
	sig := func(pid int) (int, string) {
		req := c.envdReq(s, "POST", "/process.Process/SendSignal", strings.NewReader(`{"process":{"pid":`+strconv.Itoa(pid)+`},"signal":"SIGNAL_SIGKILL"}`))
		req.Header.Set("Content-Type", "application/json")
		st, raw, _ := do(t, req)
		return st, string(raw)
	}
	if st, raw := sig(bg); st != 404 || !strings.Contains(raw, `"not_found"`) {
		t.Errorf("signal to a pid envd did not start: %d %s", st, raw)
	}
	if st, raw := sig(me); st != 200 {
		t.Errorf("signal: %d %s", st, raw)
	}
	waitUntil(t, "the signalled process to die", func() bool { return !pidAlive(me) })
	if !pidAlive(bg) {
		t.Error("SendSignal killed a child as well; it must signal only that pid")
	}
	c.api("DELETE", "/sandboxes/"+s.SandboxID, "", "")
	waitUntil(t, "the child to die with the sandbox", func() bool { return !pidAlive(bg) })
}

func TestMissingBwrap(t *testing.T) {
	_, err := fakee2b.New(fakee2b.Options{Bwrap: "/nonexistent/bwrap"})
	if err == nil || !strings.Contains(err.Error(), "bubblewrap") {
		t.Errorf("New without bubblewrap: %v", err)
	}
}

func TestFaults(t *testing.T) {
	fake := fakee2b.Start(t, fakee2b.Options{ManualExpiry: true})
	c := client{t, fake}
	fake.Fail("POST", "/sandboxes", 429, 1, http.Header{"Retry-After": {"3"}})
	st, raw, hdr := c.api("POST", "/sandboxes", "application/json", `{"templateID":"base"}`)
	if st != 429 || hdr.Get("Retry-After") != "3" || !strings.Contains(string(raw), `"code":429`) {
		t.Errorf("injected 429: %d %s %v", st, raw, hdr)
	}
	s := c.create()
	fake.SetDown("down for maintenance")
	if st, raw, _ := c.api("GET", "/sandboxes/"+s.SandboxID, "", ""); st != 503 || !strings.Contains(string(raw), "down for maintenance") {
		t.Errorf("down: %d %s", st, raw)
	}
	fake.SetDown("")
	fake.Vanish(s.SandboxID)
	if st, _, _ := c.api("GET", "/sandboxes/"+s.SandboxID, "", ""); st != 404 {
		t.Errorf("vanished: %d", st)
	}
	if st, _, _ := do(t, c.envdReq(s, "GET", "/health", nil)); st != 502 {
		t.Errorf("vanished envd: %d", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A call's status is recorded once its handler returns, which may be
	// after the client has read the answer.
	err := fake.WaitFor(ctx, func(f *fakee2b.Server) bool {
		calls := f.Calls()
		return len(calls) > 0 && calls[0].Path == "/sandboxes" && calls[0].Status == 429
	})
	if err != nil {
		t.Errorf("calls %+v: %v", fake.Calls(), err)
	}
}
