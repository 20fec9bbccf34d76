package workerapp

import (
	"fmt"
	"testing"

	"github.com/sandbot/sandbot/config"
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
