package cluster

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/internal/pgtemporal"
	"github.com/sandbot/sandbot/session"
)

// TestBadConfiguration: a process given a wrong setting does not start,
// and says which setting is wrong. The Temporal server with a database it
// cannot use; cmd/worker and cmd/bot with credentials a frontend that
// authenticates its callers refuses (a wrong API key, no client
// certificate, a CA that did not sign the server's certificate), with a
// Temporal address where nothing listens, with an API key (so TLS) against
// the cluster's plaintext frontend, and the worker with a snapshot bucket
// that does not exist.
func TestBadConfiguration(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	w := newWorld(t, c, "badconfig")

	t.Run("server-database", func(t *testing.T) {
		for _, bad := range []struct{ name, edit, want string }{
			{"wrong-password", "password", "password authentication failed"},
			{"no-such-database", "database", "does not exist (3D000)"},
		} {
			db := c.Databases()
			u, _ := url.Parse(db.Main)
			if bad.edit == "password" {
				u.User = url.UserPassword(u.User.Username(), "not-the-password")
			} else {
				u.Path = "/no_such_db"
			}
			db.Main = u.String()
			srv, err := pgtemporal.NewServer(t.TempDir(), db, pgtemporal.Options{})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = srv.Start()
			srv.Close()
			var exit *pgtemporal.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("%s: the server started, or did not exit: %v", bad.name, err)
			}
			// The server logs the driver's reason, then exits with an
			// error naming the store (our wrapper adds which store).
			msg := exit.Stderr
			redacted := pgtemporal.RedactURL(db.Main)
			pw, _ := u.User.Password()
			if !strings.Contains(msg, bad.want) || !strings.Contains(msg, "persistence "+redacted) || strings.Contains(msg, pw) {
				t.Fatalf("%s: the server's error should name the store %s (password hidden) and say %q:\n%s", bad.name, redacted, bad.want, msg)
			}
			t.Logf("%s: the server exited after %s: %s", bad.name, time.Since(start).Round(time.Millisecond), lastLines(msg, 1))
		}
	})

	t.Run("credentials", func(t *testing.T) { badCredentials(t, w) })

	worker, bot := currentBinary(t, "cmd/worker"), currentBinary(t, "cmd/bot")
	workerEnv := func() []string { return w.workerEnv("bad", t.TempDir(), listenAddr(t)) }
	for _, bad := range []struct {
		name, bin string
		env       []string
		want      []string
	}{
		{"worker-address", worker, append(workerEnv(), "SANDBOT_TEMPORAL_ADDRESS=127.0.0.1:1"),
			[]string{"sandbot worker: connect to Temporal at 127.0.0.1:1 (SANDBOT_TEMPORAL_ADDRESS)", "connection refused"}},
		{"bot-address", bot, append(w.botEnv(listenAddr(t)), "SANDBOT_TEMPORAL_ADDRESS=127.0.0.1:1"),
			[]string{"sandbot bot: connect to Temporal at 127.0.0.1:1 (SANDBOT_TEMPORAL_ADDRESS)", "connection refused"}},
		{"worker-api-key", worker, append(workerEnv(), "SANDBOT_TEMPORAL_API_KEY=not-this-clusters-key"),
			[]string{"sandbot worker: connect to Temporal", "SANDBOT_TEMPORAL_API_KEY", "tls"}},
		{"bot-api-key", bot, append(w.botEnv(listenAddr(t)), "SANDBOT_TEMPORAL_API_KEY=not-this-clusters-key"),
			[]string{"sandbot bot: connect to Temporal", "SANDBOT_TEMPORAL_API_KEY", "tls"}},
		{"worker-bucket", worker, append(workerEnv(), "SANDBOT_SANDBOX_SNAPSHOT_URL="+w.s3.URL("no-such-bucket")),
			[]string{"sandbot worker: worker: snapshot store (SANDBOT_SANDBOX_SNAPSHOT_URL)", "s3://no-such-bucket", "does not exist"}},
	} {
		t.Run(bad.name, func(t *testing.T) { expectStartFailure(t, w, bad.name, bad.bin, bad.env, bad.want...) })
	}
}

// badCredentials runs the worker and the bot against a frontend that
// requires a client certificate and an API key: with the right ones the
// worker starts (so the server is not refusing everyone); with a wrong
// key, without a certificate, or trusting the wrong CA, each exits naming
// the settings.
func badCredentials(t *testing.T, w *world) {
	sec := startSecureServer(t, w.c, "secure_"+strings.ReplaceAll(w.ns, "-", "_"))
	ctx := testContext(t)
	if err := sec.CreateNamespace(ctx, w.ns, session.SearchAttributeTypes()); err != nil {
		t.Fatalf("create namespace %s on %s with the right credentials: %v", w.ns, sec, err)
	}
	worker, bot := currentBinary(t, "cmd/worker"), currentBinary(t, "cmd/bot")
	// secured replaces the world's Temporal settings with the secure
	// server's, edited by edit (name=value; an empty value unsets).
	secured := func(env []string, edit ...string) []string {
		var out []string
		for _, kv := range env {
			if !strings.HasPrefix(kv, "SANDBOT_TEMPORAL_ADDRESS=") {
				out = append(out, kv)
			}
		}
		for _, kv := range append(sec.env(), edit...) {
			name, _, _ := strings.Cut(kv, "=")
			kept := out[:0]
			for _, x := range out {
				if !strings.HasPrefix(x, name+"=") {
					kept = append(kept, x)
				}
			}
			out = kept
			if !strings.HasSuffix(kv, "=") {
				out = append(out, kv)
			}
		}
		return out
	}

	good := startProc(t, "secure-worker", worker, w.dir, secured(w.workerEnv("secure", t.TempDir(), listenAddr(t))))
	good.WaitReady(t, "sandbot worker: serving backends [local]", true)
	good.Stop()

	wrongCA := newPKI(t, t.TempDir()).CAFile
	for _, bad := range []struct {
		name, bin string
		env       []string
		want      []string
	}{
		{"worker-wrong-api-key", worker, secured(w.workerEnv("bad", t.TempDir(), listenAddr(t)), "SANDBOT_TEMPORAL_API_KEY=not-the-key-of-this-cluster"),
			[]string{"sandbot worker: connect to Temporal", "SANDBOT_TEMPORAL_API_KEY", "Request unauthorized"}},
		{"bot-wrong-api-key", bot, secured(w.botEnv(listenAddr(t)), "SANDBOT_TEMPORAL_API_KEY=not-the-key-of-this-cluster"),
			[]string{"sandbot bot: connect to Temporal", "SANDBOT_TEMPORAL_API_KEY", "Request unauthorized"}},
		{"worker-no-client-certificate", worker, secured(w.workerEnv("bad", t.TempDir(), listenAddr(t)), "SANDBOT_TEMPORAL_TLS_CERT=", "SANDBOT_TEMPORAL_TLS_KEY="),
			// Under TLS 1.3 the server's alert may come after the client
			// finished its side of the handshake and wrote: then the
			// client sees the connection closed instead.
			[]string{"sandbot worker: connect to Temporal", "SANDBOT_TEMPORAL_TLS_CA", "certificate required|broken pipe|connection reset"}},
		{"bot-wrong-ca", bot, secured(w.botEnv(listenAddr(t)), "SANDBOT_TEMPORAL_TLS_CA="+wrongCA),
			[]string{"sandbot bot: connect to Temporal", "SANDBOT_TEMPORAL_TLS_CA", "certificate signed by unknown authority"}},
	} {
		t.Run(bad.name, func(t *testing.T) { expectStartFailure(t, w, bad.name, bad.bin, bad.env, bad.want...) })
	}
}

// expectStartFailure runs bin with env and requires it to exit non-zero
// with output containing every one of want (a want with "|" is met by any
// of its parts), and no secret.
func expectStartFailure(t *testing.T, w *world, name, bin string, env []string, want ...string) {
	t.Helper()
	start := time.Now()
	p := startProc(t, name, bin, w.dir, env)
	if code := p.Wait(t, time.Minute); code == 0 {
		t.Fatalf("exited 0; output:\n%s", p.Output())
	}
	out := p.Output()
	for _, x := range want {
		found := false
		for _, alt := range strings.Split(x, "|") {
			found = found || strings.Contains(out, alt)
		}
		if !found {
			t.Fatalf("the start-up error should contain %q:\n%s", x, out)
		}
	}
	for _, secret := range []string{"not-the-key-of-this-cluster", "not-this-clusters-key", s3Secret, w.key} {
		if strings.Contains(out, secret) {
			t.Fatalf("the start-up error shows a secret:\n%s", out)
		}
	}
	t.Logf("exited after %s: %s", time.Since(start).Round(time.Millisecond), lastLines(out, 1))
}
