package workerapp

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/redact"
)

// TestEverySecretSettingIsRedacted: each registry variable marked Secret
// reaches the redactor with its value, so a secret added to the
// configuration later cannot be forgotten here.
func TestEverySecretSettingIsRedacted(t *testing.T) {
	want := map[string]string{}
	for i, v := range config.Vars() {
		if v.Secret {
			want[v.Name] = fmt.Sprintf("secret-value-%02d-0123456789abcdef0123456789", i)
			t.Setenv(v.Name, want[v.Name])
		}
	}
	if len(want) == 0 {
		t.Fatal("the registry marks no variable Secret")
	}
	t.Setenv("SANDBOT_SANDBOX_SNAPSHOT_URL", "s3://AKIAEXAMPLE:url-password-0123456789@bucket?region=x&secret_access_key=url-query-secret-0123")
	got := map[string][]string{}
	for _, s := range secrets(config.Load()) {
		got[s.Name] = append(got[s.Name], s.Value)
	}
	for name, v := range want {
		if len(got[name]) != 1 || got[name][0] != v {
			t.Errorf("%s: the worker redacts %q, want %q", name, got[name], v)
		}
	}
	if u := got["SANDBOT_SANDBOX_SNAPSHOT_URL"]; len(u) != 2 {
		t.Errorf("snapshot URL credentials: %q, want its password and its secret query parameter", u)
	}
}

// The mTLS private key is a file; a command that printed it (or its PEM
// body, or the DER in base64) shows only the marker.
func TestTLSKeyFileIsRedacted(t *testing.T) {
	der := make([]byte, 121)
	for i := range der {
		der[i] = byte(i*37 + 11)
	}
	block := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	path := filepath.Join(t.TempDir(), "client.key")
	if err := os.WriteFile(path, block, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Load()
	cfg.Temporal.TLSKey = path
	r := redact.New(secrets(cfg)...)
	out := r.Redact("$ cat client.key\n" + string(block) + "$ base64 -w0 key.der\n" + base64.StdEncoding.EncodeToString(der) + "\n")
	if !strings.Contains(out, redact.Marker("SANDBOT_TEMPORAL_TLS_KEY")) || strings.Contains(out, base64.StdEncoding.EncodeToString(der)[:40]) {
		t.Errorf("the key file survived redaction:\n%s", out)
	}
	for _, line := range strings.Split(string(block), "\n")[1:3] {
		if strings.Contains(out, line) {
			t.Errorf("PEM line %q survived:\n%s", line, out)
		}
	}
}

// The AWS SDK's credentials for an s3:// store come from the environment.
func TestAWSCredentialsAreRedacted(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_SESSION_TOKEN", "FwoGZXIvYXdzEXAMPLE-session-token-0123456789")
	r := redact.New(secrets(config.Load())...)
	out := r.Redact("key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY token=FwoGZXIvYXdzEXAMPLE-session-token-0123456789")
	if out != "key="+redact.Marker("AWS_SECRET_ACCESS_KEY")+" token="+redact.Marker("AWS_SESSION_TOKEN") {
		t.Errorf("AWS credentials survived: %s", out)
	}
}
