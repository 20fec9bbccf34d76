package fakedaytona_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	fakedaytona "github.com/sandbot/sandbot/internal/fake/daytona"
)

type client struct {
	t   *testing.T
	srv *fakedaytona.Server
	key string
}

// do sends a request; a map or struct body is sent as JSON.
func (c client) do(method, path string, body any, hdr ...string) (int, http.Header, []byte) {
	c.t.Helper()
	var r io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		p, _ := json.Marshal(b)
		r, ctype = bytes.NewReader(p), "application/json"
	}
	req, err := http.NewRequest(method, c.srv.URL()+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	p, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, p
}

func (c client) must(want int, method, path string, body any, hdr ...string) map[string]any {
	c.t.Helper()
	status, _, p := c.do(method, path, body, hdr...)
	if status != want {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, status, p, want)
	}
	var m map[string]any
	_ = json.Unmarshal(p, &m)
	return m
}

func newClient(t *testing.T, opts fakedaytona.Options) client {
	srv := fakedaytona.Start(t, opts)
	return client{t: t, srv: srv, key: srv.APIKey()}
}

// started creates a sandbox and polls it until started.
func (c client) started(labels map[string]string) string {
	c.t.Helper()
	id := c.must(200, "POST", "/sandbox", map[string]any{"labels": labels})["id"].(string)
	for range 10 {
		if c.must(200, "GET", "/sandbox/"+id, nil)["state"] == "started" {
			return id
		}
	}
	c.t.Fatal("sandbox never started")
	return ""
}

func TestAuth(t *testing.T) {
	c := newClient(t, fakedaytona.Options{})
	anon := client{t: t, srv: c.srv}
	status, _, p := anon.do("GET", "/sandbox", nil)
	var body map[string]any
	_ = json.Unmarshal(p, &body)
	if status != 401 || body["statusCode"] != 401.0 || body["error"] != "Unauthorized" || body["message"] == nil || body["path"] != "/sandbox" {
		t.Errorf("no key: %d %s", status, p)
	}
	id := c.started(nil)
	status, _, p = anon.do("POST", "/toolbox/"+id+"/process/execute", map[string]any{"command": "true"})
	if status != 401 || !bytes.Contains(p, []byte(`"code":"UNAUTHORIZED"`)) {
		t.Errorf("toolbox without a key: %d %s", status, p)
	}
}

func TestCreateValidation(t *testing.T) {
	c := newClient(t, fakedaytona.Options{})
	for name, tc := range map[string]struct {
		body any
		want string
	}{
		"resources with a snapshot": {map[string]any{"snapshot": "s", "cpu": 2}, "Cannot specify Sandbox resources when using a snapshot"},
		"snake_case key":            {map[string]any{"auto_stop_interval": 5}, "property auto_stop_interval should not exist"},
		"not JSON":                  {[]byte(`{"name":"x"}`), "unsupported content type"},
	} {
		status, _, p := c.do("POST", "/sandbox", tc.body)
		if status != 400 || !strings.Contains(string(p), tc.want) {
			t.Errorf("%s: %d %s, want 400 %q", name, status, p, tc.want)
		}
	}
	c.must(200, "POST", "/sandbox", map[string]any{"buildInfo": map[string]any{"dockerfileContent": "FROM alpine"}, "cpu": 1})
	c.must(200, "POST", "/sandbox", map[string]any{"name": "dup"})
	c.must(409, "POST", "/sandbox", map[string]any{"name": "dup"})
}

func TestTransitions(t *testing.T) {
	c := newClient(t, fakedaytona.Options{TransitionTicks: 2})
	sb := c.must(200, "POST", "/sandbox", map[string]any{"autoStopInterval": 7})
	id := sb["id"].(string)
	if sb["state"] != "creating" || sb["toolboxProxyUrl"] != c.srv.URL()+"/toolbox" {
		t.Errorf("created: %v", sb)
	}
	if m := c.must(409, "POST", "/sandbox/"+id+"/stop", nil); m["message"] != "Sandbox state change in progress" {
		t.Errorf("stop while creating: %v", m)
	}
	if st := c.must(200, "GET", "/sandbox/"+id, nil)["state"]; st != "started" {
		t.Errorf("after two requests the sandbox is %v", st)
	}
	if got := c.srv.Sandboxes()[0].AutoStopInterval; got == nil || *got != 7 {
		t.Errorf("autoStopInterval recorded as %v", got)
	}
	c.must(200, "POST", "/sandbox/"+id+"/stop", nil)
	if m := c.must(409, "POST", "/toolbox/"+id+"/process/execute", map[string]any{"command": "true"}); m["code"] != "CONFLICT" {
		t.Errorf("toolbox while stopping: %v", m)
	}
	c.must(200, "GET", "/sandbox/"+id, nil)
	if st := c.must(200, "GET", "/sandbox/"+id, nil)["state"]; st != "stopped" {
		t.Errorf("state %v, want stopped", st)
	}
	c.must(400, "POST", "/sandbox/"+id+"/stop", nil)
	c.srv.Vanish(id)
	c.must(404, "GET", "/sandbox/"+id, nil)
	c.must(404, "POST", "/toolbox/"+id+"/process/execute", map[string]any{"command": "true"})
	c.must(404, "DELETE", "/sandbox/"+id, nil)
}

func TestListFiltersByLabels(t *testing.T) {
	c := newClient(t, fakedaytona.Options{TransitionTicks: -1})
	c.started(map[string]string{"a": "1", "b": "x"})
	c.started(map[string]string{"a": "2"})
	c.started(map[string]string{"a": "1"})
	m := c.must(200, "GET", "/sandbox?limit=1&labels="+url.QueryEscape(`{"a":"1"}`), nil)
	if items := m["items"].([]any); len(items) != 1 || m["nextCursor"] == nil {
		t.Fatalf("first page: %v", m)
	}
	m = c.must(200, "GET", "/sandbox?limit=1&cursor="+m["nextCursor"].(string)+"&labels="+url.QueryEscape(`{"a":"1"}`), nil)
	if items := m["items"].([]any); len(items) != 1 || m["nextCursor"] != nil {
		t.Fatalf("second page: %v", m)
	}
}

func TestExecute(t *testing.T) {
	c := newClient(t, fakedaytona.Options{})
	id := c.started(nil)
	m := c.must(200, "POST", "/toolbox/"+id+"/process/execute", map[string]any{"command": "echo out; echo err >&2; id -u; pwd; echo $HOME; exit 3"})
	if m["exitCode"] != 3.0 || m["result"] != "out\nerr\n1000\n/home/daytona\n/home/daytona\n" {
		t.Errorf("execute: %v", m)
	}
	start := time.Now()
	m = c.must(408, "POST", "/toolbox/"+id+"/process/execute", map[string]any{"command": "sleep 30", "timeout": 1})
	if m["message"] != "request timeout: command execution timeout" || m["code"] != "REQUEST_TIMEOUT" || time.Since(start) > 20*time.Second {
		t.Errorf("timeout: %v after %s", m, time.Since(start))
	}
	c.must(400, "POST", "/toolbox/"+id+"/process/execute", map[string]any{"cmd": "true"})
	c.must(400, "POST", "/toolbox/"+id+"/process/execute", map[string]any{})
}

func TestSessionLogs(t *testing.T) {
	c := newClient(t, fakedaytona.Options{})
	id := c.started(nil)
	base := "/toolbox/" + id + "/process/session"
	c.must(201, "POST", base, map[string]any{"sessionId": "s1"})
	c.must(409, "POST", base, map[string]any{"sessionId": "s1"})
	m := c.must(200, "POST", base+"/s1/exec", map[string]any{"command": "echo a; echo b >&2", "runAsync": false}, "X-Daytona-SDK-Version", "0.190.0")
	if m["stdout"] != "a\n" || m["stderr"] != "b\n" || m["exitCode"] != 0.0 {
		t.Errorf("sync exec: %v", m)
	}
	cmd := m["cmdId"].(string)
	for _, tc := range []struct {
		hdr  []string
		ct   string
		want []string // in either order: the streams are two pipes
	}{
		{[]string{"X-Daytona-SDK-Version", "0.190.0"}, "application/json", []string{`"stdout":"a\n"`, `"stderr":"b\n"`}},
		{[]string{"X-Daytona-Split-Output", "true"}, "text/plain", []string{"\x01\x01\x01a\n", "\x02\x02\x02b\n"}},
		{nil, "text/plain", []string{"a\n", "b\n"}},
		{[]string{"X-Daytona-SDK-Version", "0.166.9"}, "text/plain", []string{"a\n", "b\n"}},
	} {
		status, h, p := c.do("GET", base+"/s1/command/"+cmd+"/logs", nil, tc.hdr...)
		ok := len(p) == len(tc.want[0])+len(tc.want[1]) || tc.ct == "application/json"
		for _, w := range tc.want {
			ok = ok && strings.Contains(string(p), w)
		}
		if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), tc.ct) || !ok {
			t.Errorf("logs with %q: %d %s %q", tc.hdr, status, h.Get("Content-Type"), p)
		}
	}
	status, _, p := c.do("POST", base+"/s1/exec", map[string]any{"command": "echo $$ > /tmp/pid; sleep 60", "runAsync": true})
	if status != 202 {
		t.Fatalf("async exec: %d %s", status, p)
	}
	var started struct{ CmdID string }
	_ = json.Unmarshal(p, &started)
	if m := c.must(200, "GET", base+"/s1/command/"+started.CmdID, nil); m["exitCode"] != nil {
		t.Errorf("running command has an exit code: %v", m)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.must(200, "POST", "/toolbox/"+id+"/process/execute", map[string]any{"command": "test -s /tmp/pid; echo $?"})["result"] != "0\n" {
		if time.Now().After(deadline) {
			t.Fatal("the session command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.must(204, "DELETE", base+"/s1", nil)
	c.must(404, "DELETE", base+"/s1", nil)
	m = c.must(200, "POST", "/toolbox/"+id+"/process/execute", map[string]any{"command": `p=$(cat /tmp/pid); i=0
while kill -0 "$p" 2>/dev/null && [ $i -lt 400 ]; do
	case "$(cat /proc/$p/stat 2>/dev/null)" in *") Z "*) break;; esac
	sleep 0.05; i=$((i+1))
done
case "$(cat /proc/$p/stat 2>/dev/null)" in ""|*") Z "*) echo dead;; *) cat /proc/$p/stat;; esac`})
	if m["result"] != "dead\n" {
		t.Errorf("session command after DELETE: %v", m["result"])
	}
}

func TestFiles(t *testing.T) {
	c := newClient(t, fakedaytona.Options{})
	id := c.started(nil)
	tb := "/toolbox/" + id
	upload := func(order []string) (int, []byte) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, f := range order {
			if f == "path" {
				_ = mw.WriteField("files[0].path", "/home/daytona/d/e/f.bin")
			} else {
				w, _ := mw.CreateFormFile("files[0].file", "f.bin")
				_, _ = w.Write([]byte("\x00\x01binary"))
			}
		}
		_ = mw.Close()
		status, _, p := c.do("POST", tb+"/files/bulk-upload", buf.Bytes(), "Content-Type", mw.FormDataContentType())
		return status, p
	}
	if status, p := upload([]string{"file", "path"}); status != 400 || len(p) != 0 {
		t.Errorf("file part before its path: %d %q, want a bare 400", status, p)
	}
	if status, p := upload([]string{"path", "file"}); status != 200 || !strings.Contains(string(p), `"bytes":8`) {
		t.Errorf("bulk upload: %d %s", status, p)
	}
	status, _, p := c.do("GET", tb+"/files/download?path=/home/daytona/d/e/f.bin", nil)
	if status != 200 || string(p) != "\x00\x01binary" {
		t.Errorf("download: %d %q", status, p)
	}
	if m := c.must(404, "GET", tb+"/files/download?path=/home/daytona/missing", nil); m["code"] != "NOT_FOUND" {
		t.Errorf("missing file: %v", m)
	}
	status, _, p = c.do("GET", tb+"/files?path=/home/daytona/d/e", nil)
	if status != 200 || !strings.Contains(string(p), `"name":"f.bin"`) || !strings.Contains(string(p), `"size":8`) {
		t.Errorf("list: %d %s", status, p)
	}
	var one bytes.Buffer
	mw := multipart.NewWriter(&one)
	w, _ := mw.CreateFormFile("file", "g")
	_, _ = w.Write([]byte("single"))
	_ = mw.Close()
	if status, _, p := c.do("POST", tb+"/files/upload?path=/tmp/g", one.Bytes(), "Content-Type", mw.FormDataContentType()); status != 200 {
		t.Errorf("upload: %d %s", status, p)
	}
	if _, _, p := c.do("GET", tb+"/files/download?path=/tmp/g", nil); string(p) != "single" {
		t.Errorf("uploaded file reads %q", p)
	}
	c.must(400, "GET", tb+"/files/download?path=relative", nil)
	c.must(400, "GET", tb+"/files/download?path=/tmp", nil)
	c.must(201, "POST", tb+"/files/folder?path=/tmp/x/y&mode=700", nil)
	c.must(400, "DELETE", tb+"/files?path=/home/daytona/d", nil)
	c.must(204, "DELETE", tb+"/files?path=/home/daytona/d&recursive=true", nil)
	c.must(404, "DELETE", tb+"/files?path=/home/daytona/d", nil)
	// The sandbox user cannot write outside its home and /tmp.
	m := c.must(200, "POST", tb+"/process/execute", map[string]any{"command": "ls -d /tmp/x/y && touch /etc/evil 2>/dev/null; echo $?"})
	if m["result"] != "/tmp/x/y\n1\n" {
		t.Errorf("sandbox confinement: %v", m["result"])
	}
}

func TestFaults(t *testing.T) {
	c := newClient(t, fakedaytona.Options{})
	c.srv.Fail("POST", "/sandbox", 429, 1, http.Header{"Retry-After-Sandbox-Create": {"3"}})
	status, h, p := c.do("POST", "/sandbox", map[string]any{})
	if status != 429 || h.Get("Retry-After-Sandbox-Create") != "3" || !strings.Contains(string(p), "Rate limit exceeded") {
		t.Errorf("injected 429: %d %v %s", status, h, p)
	}
	c.must(200, "POST", "/sandbox", map[string]any{})
	c.srv.SetDown("upgrading")
	if m := c.must(503, "GET", "/sandbox", nil); m["message"] != "upgrading" {
		t.Errorf("down: %v", m)
	}
	c.srv.SetDown("")
	c.must(200, "GET", "/sandbox", nil)
	calls := c.srv.Calls()
	if len(calls) != 4 || calls[0].Status != 429 || calls[2].Status != 503 || calls[0].Path != "/sandbox" {
		t.Errorf("calls: %+v", calls)
	}
}

func TestNeedsBubblewrap(t *testing.T) {
	_, err := fakedaytona.New(fakedaytona.Options{Bwrap: "/nonexistent/bwrap"})
	if err == nil || !strings.Contains(err.Error(), "bubblewrap") {
		t.Errorf("New without bubblewrap: %v", err)
	}
}
