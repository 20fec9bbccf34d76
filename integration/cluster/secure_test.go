package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
)

// This file is a Temporal frontend that authenticates its clients, as a
// production cluster (or Temporal Cloud) does: TLS with client
// certificates required, and an API key (a bearer token) required of every
// caller but the server's own system worker, which is known by its
// certificate. It runs on databases of its own in the shared cluster's
// PostgreSQL.

// secureSpec is the TLS and authentication part of a serverSpec.
type secureSpec struct {
	// CA, Cert and Key are PEM files: the CA that signed every
	// certificate, and the frontend's certificate.
	CA, Cert, Key string
	// SystemCert and SystemKey are the system worker's client certificate.
	SystemCert, SystemKey string
	// APIKey is the bearer token callers must present.
	APIKey string
}

// systemCN is the common name of the system worker's certificate.
const systemCN = "temporal-system-worker"

// applyTLS makes the frontend require TLS with client certificates.
func (s *secureSpec) applyTLS(cfg *config.Config) {
	client := config.ClientTLS{RootCAFiles: []string{s.CA}}
	cfg.Global.TLS.Frontend = config.GroupTLS{
		Server: config.ServerTLS{CertFile: s.Cert, KeyFile: s.Key, ClientCAFiles: []string{s.CA}, RequireClientAuth: true},
		Client: client,
	}
	cfg.Global.TLS.SystemWorker = config.WorkerTLS{CertFile: s.SystemCert, KeyFile: s.SystemKey, Client: client}
}

// keyClaims grants admin to a caller with the API key and to the system
// worker's certificate; a wrong key is an error (the frontend answers
// "Request unauthorized"), and a caller with neither gets no claims, which
// the default authorizer refuses.
type keyClaims struct{ key string }

func (k keyClaims) GetClaims(a *authorization.AuthInfo) (*authorization.Claims, error) {
	switch {
	case a.AuthToken != "":
		if a.AuthToken != "Bearer "+k.key {
			return nil, errors.New("wrong API key")
		}
		return &authorization.Claims{Subject: "sandbot", System: authorization.RoleAdmin}, nil
	case a.TLSSubject != nil && a.TLSSubject.CommonName == systemCN:
		return &authorization.Claims{Subject: systemCN, System: authorization.RoleAdmin}, nil
	}
	return nil, nil
}

// pki is a throwaway CA and the certificates the secure server and its
// clients use, as PEM files.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CAFile string
}

func newPKI(t testing.TB, dir string) *pki {
	t.Helper()
	k := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cluster test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &pki{dir: dir, ca: ca, caKey: k}
	p.CAFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (p *pki) write(t testing.TB, name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue signs a certificate for cn (a server one, for 127.0.0.1, when
// server is set) and returns its certificate and key files.
func (p *pki) issue(t testing.TB, cn string, server bool) (certFile, keyFile string) {
	t.Helper()
	k := newKey(t)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, cn+".pem", "CERTIFICATE", der), p.write(t, cn+"-key.pem", "PRIVATE KEY", kd)
}

// secureServer is a Temporal server whose frontend authenticates callers.
type secureServer struct {
	spec serverSpec
	pki  *pki
	// ClientCert and ClientKey are a certificate for sandbot's processes.
	ClientCert, ClientKey string
}

// startSecureServer starts a secure server on databases named after name
// in c's PostgreSQL; it is killed when the test ends.
func startSecureServer(t testing.TB, c *tcluster, name string) *secureServer {
	t.Helper()
	dir := t.TempDir()
	p := newPKI(t, dir)
	s := &secureServer{pki: p}
	sec := &secureSpec{CA: p.CAFile, APIKey: "cluster-test-api-key-" + strings.ToLower(rand.Text())}
	sec.Cert, sec.Key = p.issue(t, "frontend", true)
	sec.SystemCert, sec.SystemKey = p.issue(t, systemCN, false)
	s.ClientCert, s.ClientKey = p.issue(t, "sandbot", false)

	spec := c.spec
	spec.Secure = sec
	for i, kind := range []sqlplugin.DbKind{sqlplugin.DbKindMain, sqlplugin.DbKindVisibility} {
		db := name + []string{"", "_visibility"}[i]
		if err := c.pg.CreateDatabase(db); err != nil {
			t.Fatal(err)
		}
		cfg, _ := sqlConfig(spec.DB)
		cfg.DatabaseName = db
		if err := setupSchema(cfg, kind, []string{"postgresql/v12/temporal", "postgresql/v12/visibility"}[i]); err != nil {
			t.Fatal(err)
		}
		u := strings.TrimSuffix(c.spec.DB, "/temporal") + "/" + db
		if i == 0 {
			spec.DB = u
		} else {
			spec.VisibilityDB = u
		}
	}
	ports, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	spec.Frontend, spec.FrontendHTTP, spec.History, spec.Matching, spec.Worker = ports[0], ports[1], ports[2], ports[3], ports[4]
	s.spec = spec
	log, err := os.Create(filepath.Join(dir, "temporal.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd, exited, _, err := runServer(spec, dir, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("--- the secure server's log ends with:\n%s", tail(string(b), 4000))
		}
	})
	return s
}

// APIKey is the key the server accepts.
func (s *secureServer) APIKey() string { return s.spec.Secure.APIKey }

// HostPort is the frontend address.
func (s *secureServer) HostPort() string { return s.spec.frontendAddr() }

// Dial connects with the client certificate and the API key.
func (s *secureServer) Dial(ctx context.Context, ns string) (client.Client, error) {
	cert, err := tls.LoadX509KeyPair(s.ClientCert, s.ClientKey)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(s.pki.ca)
	return client.DialContext(ctx, client.Options{
		HostPort: s.HostPort(), Namespace: ns, Logger: quietSDK(),
		Credentials:       client.NewAPIKeyStaticCredentials(s.APIKey()),
		ConnectionOptions: client.ConnectionOptions{TLS: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, Certificates: []tls.Certificate{cert}}},
	})
}

// env is the Temporal part of a sandbot process's environment for this
// server, with the right credentials.
func (s *secureServer) env() []string {
	return []string{
		"SANDBOT_TEMPORAL_ADDRESS=" + s.HostPort(),
		"SANDBOT_TEMPORAL_TLS_CA=" + s.pki.CAFile,
		"SANDBOT_TEMPORAL_TLS_CERT=" + s.ClientCert,
		"SANDBOT_TEMPORAL_TLS_KEY=" + s.ClientKey,
		"SANDBOT_TEMPORAL_API_KEY=" + s.APIKey(),
	}
}

func (s *secureServer) String() string { return fmt.Sprintf("secure Temporal at %s", s.HostPort()) }
