package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbot/sandbot/internal/pgtemporal"
)

// This file is a Temporal frontend that authenticates its clients, as a
// production cluster (or Temporal Cloud) does (pgtemporal.Secure): TLS
// with client certificates required, and an API key (a bearer token)
// required of every caller but the server's own system worker, which is
// known by its certificate. It runs on databases of its own in the shared
// cluster's PostgreSQL, and its certificates come from a throwaway CA.

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
// Its Dial and CreateNamespace present the "sandbot" client certificate
// and the API key.
type secureServer struct {
	*pgtemporal.Server
	sec *pgtemporal.Secure
	pki *pki
}

// startSecureServer starts a secure server on databases named after name
// in c's PostgreSQL; it is killed when the test ends.
func startSecureServer(t testing.TB, c *pgtemporal.Cluster, name string) *secureServer {
	t.Helper()
	dir := t.TempDir()
	p := newPKI(t, dir)
	sec := &pgtemporal.Secure{CA: p.CAFile, APIKey: "cluster-test-api-key-" + strings.ToLower(rand.Text())}
	sec.Cert, sec.Key = p.issue(t, "frontend", true)
	sec.SystemCert, sec.SystemKey = p.issue(t, pgtemporal.SystemWorkerCN, false)
	sec.ClientCert, sec.ClientKey = p.issue(t, "sandbot", false)
	db, err := c.CreateDatabases(name)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := pgtemporal.NewServer(dir, db, pgtemporal.Options{Secure: sec, ClientLog: clientLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		if t.Failed() {
			t.Logf("--- the secure server's log ends with:\n%s", srv.LogTail(4000))
		}
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	return &secureServer{Server: srv, sec: sec, pki: p}
}

// APIKey is the key the server accepts.
func (s *secureServer) APIKey() string { return s.sec.APIKey }

// env is the Temporal part of a sandbot process's environment for this
// server, with the right credentials.
func (s *secureServer) env() []string {
	return []string{
		"SANDBOT_TEMPORAL_ADDRESS=" + s.HostPort(),
		"SANDBOT_TEMPORAL_TLS_CA=" + s.pki.CAFile,
		"SANDBOT_TEMPORAL_TLS_CERT=" + s.sec.ClientCert,
		"SANDBOT_TEMPORAL_TLS_KEY=" + s.sec.ClientKey,
		"SANDBOT_TEMPORAL_API_KEY=" + s.APIKey(),
	}
}

func (s *secureServer) String() string { return fmt.Sprintf("secure Temporal at %s", s.HostPort()) }
