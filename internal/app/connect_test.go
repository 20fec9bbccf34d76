package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sandbot/sandbot/config"
)

// pki is a throwaway CA with one server and one client certificate, as PEM
// files in dir.
type pki struct {
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
	caFile                string
	server                tls.Certificate
	clientCert, clientKey string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p := &pki{caKey: key()}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caFile = write("ca.pem", "CERTIFICATE", der)
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		c := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, c, p.ca, &k.PublicKey, p.caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	sder, skey := issue(2, "temporal.test", x509.ExtKeyUsageServerAuth)
	p.server = tls.Certificate{Certificate: [][]byte{sder}, PrivateKey: skey}
	cder, ckey := issue(3, "sandbot-worker", x509.ExtKeyUsageClientAuth)
	kder, err := x509.MarshalECPrivateKey(ckey)
	if err != nil {
		t.Fatal(err)
	}
	p.clientCert = write("client.pem", "CERTIFICATE", cder)
	p.clientKey = write("client-key.pem", "EC PRIVATE KEY", kder)
	return p
}

// systemInfo answers the one call a Temporal client makes when it dials.
type systemInfo struct {
	workflowservice.UnimplementedWorkflowServiceServer
}

func (systemInfo) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{}, nil
}

// serveMTLS runs a gRPC server that answers Temporal's health check and
// requires a client certificate from the CA.
func serveMTLS(t *testing.T, p *pki) string {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{p.server}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})))
	hs := health.NewServer()
	hs.SetServingStatus("temporal.api.workflowservice.v1.WorkflowService", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	workflowservice.RegisterWorkflowServiceServer(srv, systemInfo{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// A worker or bot configured with SANDBOT_TEMPORAL_TLS_* completes a
// mutual-TLS handshake with a frontend that demands a client certificate;
// without the certificate the same frontend turns it away.
func TestClientOptionsSpeakMutualTLS(t *testing.T) {
	p := newPKI(t)
	addr := serveMTLS(t, p)
	cfg := config.Temporal{Address: addr, Namespace: "default", TLSCert: p.clientCert, TLSKey: p.clientKey, TLSCA: p.caFile, TLSServerName: "temporal.test"}
	dial := func(t config.Temporal) error {
		opts, err := ClientOptions(t)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := client.DialContext(ctx, opts)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(cfg); err != nil {
		t.Fatalf("mutual TLS with the configured certificate: %v", err)
	}
	noCert := cfg
	noCert.TLSCert, noCert.TLSKey = "", ""
	if err := dial(noCert); err == nil {
		t.Fatal("the frontend accepted a client without a certificate")
	}
	plain := config.Temporal{Address: addr, Namespace: "default"}
	if err := dial(plain); err == nil {
		t.Fatal("a plaintext client reached a TLS frontend")
	}
}

func TestClientOptionsNameTheVariable(t *testing.T) {
	p := newPKI(t)
	bad := filepath.Join(t.TempDir(), "not-a-ca.pem")
	if err := os.WriteFile(bad, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ClientOptions(config.Temporal{TLSCA: bad}); err == nil || !strings.Contains(err.Error(), "SANDBOT_TEMPORAL_TLS_CA") {
		t.Errorf("a CA file without certificates: %v", err)
	}
	if _, err := ClientOptions(config.Temporal{TLSCert: p.clientCert, TLSKey: p.caFile}); err == nil || !strings.Contains(err.Error(), "SANDBOT_TEMPORAL_TLS_KEY") {
		t.Errorf("a key that does not match: %v", err)
	}
	opts, err := ClientOptions(config.Temporal{APIKey: "k"})
	if err != nil || opts.Credentials == nil || opts.ConnectionOptions.TLS == nil {
		t.Errorf("an API key must set credentials and TLS: %+v, %v", opts, err)
	}
}
