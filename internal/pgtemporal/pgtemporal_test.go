package pgtemporal

import (
	"crypto/x509/pkix"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"go.temporal.io/server/common/authorization"
)

// TestVersionOrder: the schema's versioned directories apply in numeric
// order, v1.10 after v1.9, as temporal-sql-tool applies them.
func TestVersionOrder(t *testing.T) {
	vs := []string{"1.10", "1.2", "1.9", "0.1", "1.2.1"}
	sort.Slice(vs, func(i, j int) bool { return versionLess(vs[i], vs[j]) })
	if got, want := strings.Join(vs, " "), "0.1 1.2 1.2.1 1.9 1.10"; got != want {
		t.Fatalf("order %s, want %s", got, want)
	}
}

// TestStoreURLs: a store URL becomes the server's SQL config, and a bad
// one is named in the error without its password.
func TestStoreURLs(t *testing.T) {
	cfg, err := sqlConfig("postgres://temporal:s3cret@127.0.0.1:5433/temporal_visibility")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "temporal" || cfg.Password != "s3cret" || cfg.ConnectAddr != "127.0.0.1:5433" || cfg.DatabaseName != "temporal_visibility" {
		t.Fatalf("config %+v", cfg)
	}
	_, err = sqlConfig("mysql://temporal:s3cret@127.0.0.1:5433/temporal")
	if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "temporal:xxxxx@") {
		t.Fatalf("error %v: should name the URL with the password hidden", err)
	}
}

// TestSecureSpec: a secure server's frontend requires client certificates
// from the CA, and the spec file handed to the child carries the server's
// side only (not the client certificate Dial presents).
func TestSecureSpec(t *testing.T) {
	sec := &Secure{CA: "ca.pem", Cert: "fe.pem", Key: "fe-key.pem", SystemCert: "sys.pem", SystemKey: "sys-key.pem",
		APIKey: "k", ClientCert: "client.pem", ClientKey: "client-key.pem"}
	db := "postgres://u:p@127.0.0.1:1/d"
	s := childSpec{Databases: Databases{Main: db, Visibility: db}, Frontend: 7233, Shards: historyShards, Secure: sec}
	cfg, _, err := serverConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	fe := cfg.Global.TLS.Frontend.Server
	if !fe.RequireClientAuth || fe.CertFile != "fe.pem" || len(fe.ClientCAFiles) != 1 || fe.ClientCAFiles[0] != "ca.pem" {
		t.Fatalf("frontend TLS %+v", fe)
	}
	if cfg.Global.TLS.SystemWorker.CertFile != "sys.pem" {
		t.Fatalf("system worker TLS %+v", cfg.Global.TLS.SystemWorker)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "client") {
		t.Fatalf("the child's spec carries the client certificate: %s", b)
	}
	plain, _, err := serverConfig(childSpec{Databases: s.Databases, Frontend: 7233, Shards: historyShards})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Global.TLS.Frontend.Server.CertFile != "" {
		t.Fatal("a plain server has TLS")
	}
}

// TestKeyClaims: the API key or the system worker's certificate make a
// caller admin; a wrong key is refused outright; anyone else gets no
// claims (which the default authorizer refuses).
func TestKeyClaims(t *testing.T) {
	k := keyClaims{key: "right"}
	for _, tc := range []struct {
		name    string
		info    authorization.AuthInfo
		admin   bool
		wantErr bool
	}{
		{"key", authorization.AuthInfo{AuthToken: "Bearer right"}, true, false},
		{"wrong-key", authorization.AuthInfo{AuthToken: "Bearer wrong"}, false, true},
		{"system-worker", authorization.AuthInfo{TLSSubject: &pkix.Name{CommonName: SystemWorkerCN}}, true, false},
		{"other-certificate", authorization.AuthInfo{TLSSubject: &pkix.Name{CommonName: "sandbot"}}, false, false},
		{"nothing", authorization.AuthInfo{}, false, false},
	} {
		c, err := k.GetClaims(&tc.info)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: error %v", tc.name, err)
		}
		if admin := c != nil && c.System == authorization.RoleAdmin; admin != tc.admin {
			t.Fatalf("%s: claims %+v", tc.name, c)
		}
	}
}

// TestExitErrorQuotesTheEnd: a start-up failure's message is the end of
// the child's stderr; the whole of it stays in Stderr.
func TestExitErrorQuotesTheEnd(t *testing.T) {
	e := &ExitError{Stderr: "1\n2\n3\n4\n5\n6\n7\n"}
	if got, want := e.Error(), "temporal server exited at start: 3\n4\n5\n6\n7"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
