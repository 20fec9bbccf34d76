package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/internal/logging"
)

// Connect is the shared start of cmd/worker and cmd/bot: load and validate
// the configuration for role, set up logging, and dial Temporal. The
// client's SDK metrics are collected on reg (nil: none). The caller closes
// the client.
func Connect(ctx context.Context, role config.Role, reg prometheus.Registerer) (*config.Config, *slog.Logger, client.Client, error) {
	cfg := config.Load()
	if err := cfg.Validate(role); err != nil {
		return nil, nil, nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	log := logging.New(os.Stderr, cfg.LogLevel)
	opts, err := ClientOptions(cfg.Temporal)
	if err != nil {
		return nil, nil, nil, err
	}
	opts.Logger = logging.Temporal(log.With("component", "temporal"))
	if reg != nil {
		if opts.MetricsHandler, err = TemporalMetrics(reg, log); err != nil {
			return nil, nil, nil, err
		}
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect to Temporal at %s (SANDBOT_TEMPORAL_ADDRESS%s): %w", cfg.Temporal.Address, tlsSettings(cfg.Temporal), err)
	}
	return cfg, log, c, nil
}

// tlsSettings names the set variables that make the connection use TLS or
// credentials, for a connection error: a TLS handshake with a plaintext
// server, or a refused key, is their doing, not the address's.
func tlsSettings(t config.Temporal) string {
	var set []string
	for _, v := range []struct{ name, value string }{
		{"SANDBOT_TEMPORAL_API_KEY", t.APIKey}, {"SANDBOT_TEMPORAL_TLS_CA", t.TLSCA},
		{"SANDBOT_TEMPORAL_TLS_CERT", t.TLSCert}, {"SANDBOT_TEMPORAL_TLS_SERVER_NAME", t.TLSServerName},
	} {
		if v.value != "" {
			set = append(set, v.name)
		}
	}
	if len(set) == 0 {
		return ""
	}
	return "; TLS and credentials from " + strings.Join(set, ", ")
}

// ClientOptions are the Temporal client options of the configured
// connection: plain, TLS (optionally mutual, with the client certificate),
// and/or an API key, for a cluster that authenticates its clients (Temporal
// Cloud, or a self-hosted frontend with an authorizer).
func ClientOptions(t config.Temporal) (client.Options, error) {
	opts := client.Options{HostPort: t.Address, Namespace: t.Namespace}
	if t.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(t.APIKey)
	}
	if !t.TLSEnabled() {
		return opts, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.TLSServerName}
	if t.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(t.TLSCert, t.TLSKey)
		if err != nil {
			return opts, fmt.Errorf("temporal TLS client certificate (SANDBOT_TEMPORAL_TLS_CERT, SANDBOT_TEMPORAL_TLS_KEY): %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if t.TLSCA != "" {
		pem, err := os.ReadFile(t.TLSCA)
		if err != nil {
			return opts, fmt.Errorf("temporal TLS CA (SANDBOT_TEMPORAL_TLS_CA): %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return opts, fmt.Errorf("temporal TLS CA (SANDBOT_TEMPORAL_TLS_CA): %s holds no PEM certificate", t.TLSCA)
		}
		tc.RootCAs = roots
	}
	opts.ConnectionOptions.TLS = tc
	return opts, nil
}
