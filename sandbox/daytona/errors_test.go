package daytona_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	fakedaytona "github.com/sandbot/sandbot/internal/fake/daytona"
	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/daytona"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

func TestRefusedKeyNamesTheSetting(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	for _, setting := range []string{"", "OTHER_DAYTONA_KEY"} {
		b := newBackend(t, srv, daytona.Options{APIKey: "dtn_wrong", KeySetting: setting})
		want := setting
		if want == "" {
			want = "DAYTONA_API_KEY"
		}
		for name, err := range map[string]error{
			"Check":  b.Check(ctxT(t)),
			"Create": func() error { _, err := b.Create(ctxT(t), sandbox.Spec{SessionID: "s"}); return err }(),
		} {
			if !errors.Is(err, sandbox.ErrUnauthenticated) || !strings.Contains(err.Error(), want+" was refused by "+srv.URL()) || !strings.Contains(err.Error(), "401 Invalid credentials") {
				t.Errorf("%s with a wrong key: %v; want ErrUnauthenticated naming %s, the URL and the reason", name, err, want)
			}
			if err != nil && strings.Contains(err.Error(), "dtn_wrong") {
				t.Errorf("%s: the error shows the key: %v", name, err)
			}
		}
	}
	if len(srv.Sandboxes()) != 0 {
		t.Error("a sandbox was created with a refused key")
	}
}

func TestOutageCarriesTheReason(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(t, b)
	srv.SetDown("scheduled maintenance until 02:00 UTC")
	ctx := ctxT(t)
	checks := map[string]error{"Check": b.Check(ctx)}
	_, checks["Exec"] = b.Exec(ctx, h, sandbox.Cmd{Command: "true"})
	_, checks["Alive"] = b.Alive(ctx, h)
	for name, err := range checks {
		if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "scheduled maintenance until 02:00 UTC") {
			t.Errorf("%s during an outage: %v; want ErrUnavailable with the provider's reason", name, err)
		}
	}
	srv.SetDown("")
	if err := b.Check(ctx); err != nil {
		t.Errorf("Check after the outage: %v", err)
	}

	// Nothing listening at all.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dead, err := daytona.New(daytona.Options{APIURL: "http://" + addr, APIKey: "k", Logger: quiet(), RetryMin: time.Millisecond, RetryMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Check(ctx); !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Check with nothing listening: %v; want ErrUnavailable naming %s", err, addr)
	}
}

func TestDestroyTwice(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{})
	h, err := b.Create(ctxT(t), sandbox.Spec{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := b.Destroy(ctxT(t), h); err != nil {
			t.Errorf("Destroy #%d: %v", i+1, err)
		}
	}
	var deletes []int
	for _, c := range srv.Calls() {
		if c.Method == http.MethodDelete {
			deletes = append(deletes, c.Status)
		}
	}
	if len(deletes) != 2 || deletes[0] != 200 || deletes[1] != 404 {
		t.Errorf("delete statuses %v, want 200 then 404 (taken as success)", deletes)
	}
}

func TestHandleHoldsNoSecretAndSuffices(t *testing.T) {
	const key = "dtn_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	srv := fakedaytona.Start(t, fakedaytona.Options{APIKey: key})
	b := newBackend(t, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(t, b)
	sandboxtest.Sh(t, b, h, "echo kept > f")
	raw, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(key)) || bytes.Contains(raw, []byte("0123456789abcdef")) {
		t.Fatalf("handle carries the API key: %s", raw)
	}
	// A fresh worker: a new Backend, the handle decoded from JSON, even
	// without the remembered toolbox URL.
	var back sandbox.Handle
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	delete(back.Meta, "toolbox_url")
	fresh := newBackend(t, srv, daytona.Options{})
	if got := sandboxtest.Sh(t, fresh, back, "cat f"); got != "kept\n" {
		t.Errorf("fresh backend reads %q", got)
	}
}

func TestUnsafeImportNeverUploads(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(t, b)
	for name, entries := range map[string][]sandboxtest.TarEntry{
		"absolute": {{Name: "/tmp/evil", Body: "x"}},
		"dotdot":   {{Name: "ok", Body: "ok"}, {Name: "../evil", Body: "x"}},
		"symlink":  {{Name: "up", Type: '2', Linkname: "/tmp"}, {Name: "up/evil", Body: "x"}},
	} {
		from := len(srv.Calls())
		err := b.Import(ctxT(t), h, bytes.NewReader(sandboxtest.BuildTar(t, entries...)))
		if !errors.Is(err, sandbox.ErrUnsafeArchive) {
			t.Errorf("%s: Import = %v, want ErrUnsafeArchive", name, err)
		}
		for _, c := range srv.Calls()[from:] {
			t.Errorf("%s: a refused archive still reached the fake: %s %s", name, c.Method, c.Path)
		}
	}
	if got := sandboxtest.Sh(t, b, h, "ls -A; ls /tmp | grep -c evil || true"); got != "0\n" {
		t.Errorf("workspace or /tmp touched: %q", got)
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := daytona.New(daytona.Options{}); err == nil || !strings.Contains(err.Error(), "DAYTONA_API_KEY") {
		t.Errorf("New without a key: %v", err)
	}
	if _, err := daytona.New(daytona.Options{APIKey: "k", Snapshot: "s", Image: "i"}); err == nil || !strings.Contains(err.Error(), "Snapshot") || !strings.Contains(err.Error(), "Image") {
		t.Errorf("New with Snapshot and Image: %v", err)
	}
	if _, err := daytona.New(daytona.Options{APIKey: "k", APIURL: "app.daytona.io"}); err == nil {
		t.Error("New accepted an API URL without a scheme")
	}
}

// The request that starts the user's command is never sent twice: a 5xx
// may come after the daemon started it, and running a command twice (an
// append, a migration, a push) is worse than reporting the failure.
func TestCommandStartIsNotRetried(t *testing.T) {
	srv := fakedaytona.Start(t, fakedaytona.Options{})
	b := newBackend(t, srv, daytona.Options{})
	h := sandboxtest.NewSandbox(t, b)
	srv.Fail(http.MethodPost, "/toolbox/"+h.ID+"/process/session/", http.StatusBadGateway, 1, nil)
	before := len(srv.Calls())
	_, err := b.Exec(ctxT(t), h, sandbox.Cmd{Command: "echo once >> log"})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("Exec after a 502 on its start: %v; want ErrUnavailable", err)
	}
	starts := 0
	for _, c := range srv.Calls()[before:] {
		if c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/exec") {
			starts++
		}
	}
	if starts != 1 {
		t.Fatalf("the command's start was sent %d times, want once", starts)
	}
	// The next command runs normally.
	if got := sandboxtest.Sh(t, b, h, "echo fine"); got != "fine\n" {
		t.Fatalf("the next command printed %q", got)
	}
}
